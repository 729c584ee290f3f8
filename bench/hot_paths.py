"""Benchmark: the manager's CPU per unit of its hottest paths, each against its former self (printed, never asserted).

Issue 33 cut the manager's CPU where every ModelServing pays it many times over. Each path is measured here in this
process, in alternating rounds, against the way it used to be done, kept callable for the comparison:

* ``request``: CPU microseconds of this process per API request (Event create, get and merge patch, 16 at a time) to
  a fresh envtest tier (etcd and kube-apiserver over TLS), sent by :class:`~kthena_py.kube.KubeClient` straight to
  its aiohttp session, against the same requests sent through kubernetes-asyncio's generated ``call_api`` path (what
  the client did before);
* ``plan``: microseconds per :func:`~kthena_py.plan.modelserving.groups.servinggroups.plan_servinggroups` of a
  settled ModelServing (2 groups x 2 roles x 2 pods, the converge benchmark's shape), with the pod-state memo,
  against the same with the memo emptied before each call (every pod parsed again, as before);
* ``cache lookup``: nanoseconds to find a type's informer, by type (how a cache read finds it now) against by a
  ``(type, field selector)`` key object (how it did before).

Usage: python bench/hot_paths.py [--requests N] [--plans N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import EVENTS, PODS
from kthena_py.plan.modelserving.core import groups as pod_states
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.runtime.cache import _Key
from kthena_py.runtime.eventloop import loop_factory
from kthena_py.simulation import VOLCANO, Simulation
from kthena_py.testing.controlplane import EnvTest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from converge import modelserving  # the converge benchmark's ModelServing: both price one shape

NAMESPACE = "default"
CONCURRENCY = 16


def _event(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": NAMESPACE},
        "reason": "Bench",
        "message": "m" * 40,
        "type": "Normal",
    }


class GeneratedPath:
    """The same requests through kubernetes-asyncio's ``call_api`` (the client's former path), answers read alike."""

    def __init__(self, client: KubeClient) -> None:
        self._api = client._api

    async def _send(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> None:
        resp = await self._api.call_api(
            path,
            method,
            query_params=[],
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        try:
            await resp.read()
        finally:
            resp.release()

    async def create(self, name: str) -> None:
        await self._send("POST", EVENTS.path(NAMESPACE), {"apiVersion": "v1", "kind": "Event", **_event(name)})

    async def get(self, name: str) -> None:
        await self._send("GET", EVENTS.path(NAMESPACE, name))

    async def patch(self, name: str) -> None:
        await self._send("PATCH", EVENTS.path(NAMESPACE, name), {"message": "z"}, "application/merge-patch+json")


class DirectPath:
    """The client as the manager uses it."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def create(self, name: str) -> None:
        await self._client.create(EVENTS, _event(name))

    async def get(self, name: str) -> None:
        await self._client.get(EVENTS, name, NAMESPACE)

    async def patch(self, name: str) -> None:
        await self._client.patch(EVENTS, name, {"message": "z"}, NAMESPACE)


async def _cpu_per_request(n: int, prefix: str, path: DirectPath | GeneratedPath) -> float:
    """This process's CPU microseconds per request over ``n`` creates, ``n`` gets and ``n`` patches."""
    sem = asyncio.Semaphore(CONCURRENCY)

    async def each(op: Callable[[str], Awaitable[None]]) -> None:
        async def one(i: int) -> None:
            async with sem:
                await op(f"{prefix}-{i}")

        await asyncio.gather(*(one(i) for i in range(n)))

    started = time.process_time()
    for op in (path.create, path.get, path.patch):
        await each(op)
    return (time.process_time() - started) * 1e6 / (3 * n)


async def requests(n: int, rounds: int) -> tuple[list[float], list[float]]:
    direct: list[float] = []
    generated: list[float] = []
    with tempfile.TemporaryDirectory() as d, EnvTest(d, crds=[]) as env:
        client = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        try:
            await _cpu_per_request(200, "warm", DirectPath(client))
            for r in range(rounds):
                a = await _cpu_per_request(n, f"d{r}", DirectPath(client))
                b = await _cpu_per_request(n, f"g{r}", GeneratedPath(client))
                direct.append(a)
                generated.append(b)
                print(f"  request round {r + 1}: direct {a:.0f} us, generated path {b:.0f} us ({a / b:.2f})")
        finally:
            await client.close()
    return direct, generated


def plans(n: int, rounds: int) -> tuple[list[float], list[float]]:
    sim = Simulation(modelserving(1))
    sim.settle()
    ms = sim.parse()
    ref, observed = sim.ref(ms), sim.observed()

    def memoised() -> None:
        plan_servinggroups(ms, ref, observed, VOLCANO, sim.now)

    def parsed_again() -> None:
        pod_states._POD_STATES.clear()
        plan_servinggroups(ms, ref, observed, VOLCANO, sim.now)

    with_memo: list[float] = []
    without: list[float] = []
    for r in range(rounds):
        a = timeit.timeit(memoised, number=n) * 1e6 / n
        b = timeit.timeit(parsed_again, number=n) * 1e6 / n
        with_memo.append(a)
        without.append(b)
        print(f"  plan round {r + 1}: memoised {a:.0f} us, parsed again {b:.0f} us ({a / b:.2f})")
    return with_memo, without


def lookups(rounds: int) -> tuple[list[float], list[float]]:
    by_type = {PODS: object()}
    by_key = {_Key(PODS, None): object()}
    n = 200_000
    direct: list[float] = []
    keyed: list[float] = []
    for _ in range(rounds):
        direct.append(timeit.timeit(lambda: by_type.get(PODS), number=n) * 1e9 / n)
        keyed.append(timeit.timeit(lambda: by_key.get(_Key(PODS, None)), number=n) * 1e9 / n)
    return direct, keyed


def line(name: str, unit: str, now: list[float], before: list[float]) -> str:
    med = statistics.median
    paired = " ".join(f"{a / b:.2f}" for a, b in zip(now, before, strict=True))
    return (
        f"  {name}: {med(now):.0f} {unit} now, {med(before):.0f} {unit} before; "
        f"ratio of medians {med(now) / med(before):.2f}, paired {paired}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000, help="requests of each kind (create, get, patch) per round")
    ap.add_argument("--plans", type=int, default=2000, help="plans per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    direct, generated = await requests(args.requests, args.rounds)
    memo, parsed = plans(args.plans, args.rounds)
    by_type, by_key = lookups(args.rounds)
    print("summary (medians; ratio < 1: the path as it is now costs less):")
    print(line("request (client CPU)", "us", direct, generated))
    print(line("plan_servinggroups (settled, 8 pods)", "us", memo, parsed))
    print(line("informer lookup", "ns", by_type, by_key))


if __name__ == "__main__":
    _, factory = loop_factory("auto")
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())
