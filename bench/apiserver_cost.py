"""Benchmark: the API server's CPU per write, by kind of write (printed, never asserted).

On a machine whose cores are kept busy a converge lasts as long as the CPU work of every process, and the API
server does most of it (``bench/converge.py`` prints both). This measures what each kind of write a ModelServing
controller sends costs the API server and etcd, so a design choice (server-side apply or a read-modify-write of a
status, one Event per transition or fewer) can be priced:

* ``pod create``: the baseline, the write no controller can avoid;
* ``status apply``: the ServingGroup reconciler's write, a server-side apply of the fields it owns;
* ``status merge patch`` and ``status update`` (the object as last read, its status replaced and sent back whole,
  as Kthena's Go controller does from its cache): the cheaper-looking alternatives;
* ``event create``: one Event, as for each role instance's transition.

Each kind is sent ``--writes`` times by 16 concurrent requests to one fresh envtest tier (etcd and kube-apiserver,
the project's CRDs), in ``--rounds`` alternating rounds; the figure is the median over rounds of the CPU
milliseconds kube-apiserver plus etcd used per write, and its ratio to a pod create in the same round. Beside it,
the client's own CPU per write: this process, sending through the manager's :class:`~kthena_py.kube.KubeClient` on
the manager's event loop (uvloop when importable), does nothing else, so its CPU time is what the same write costs
the manager (building the body, the request, TLS, reading and decoding the answer).

Usage: python bench/apiserver_cost.py [--writes N] [--rounds R] [--crds DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import Conflict, KubeClient
from kthena_py.kube.resources import EVENTS, NAMESPACES, PODS
from kthena_py.runtime.eventloop import loop_factory
from kthena_py.testing.controlplane import EnvTest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from converge import modelserving, proc_stats  # the converge benchmark's ModelServing: both price one shape

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
OBJECTS = 50
"""ModelServings whose status is written in turn (a write per object at a time, as a fleet's reconciles do)."""
CONCURRENCY = 16
LOOP_NAME, LOOP_FACTORY = loop_factory()  # the manager's default: uvloop when importable
MANAGER = "kthena-py-servinggroups"


def status(n: int) -> dict[str, Any]:
    """A ModelServing status as the ServingGroup reconciler writes it; ``n`` changes what is written each time."""
    available = n % 3
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def condition(type_: str, value: bool, reason: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": "True" if value else "False",
            "reason": reason,
            "message": f"{available} of 2 ServingGroups available ({n})",
            "lastTransitionTime": since,
            "observedGeneration": 1,
        }

    return {
        "observedGeneration": 1,
        "replicas": 2,
        "currentReplicas": 2,
        "updatedReplicas": 2,
        "availableReplicas": available,
        "currentRevision": "ms-5f7c9d8b6",
        "updateRevision": "ms-5f7c9d8b6",
        "labelSelector": "modelserving.volcano.sh/name=ms,modelserving.volcano.sh/role=prefill",
        "conditions": [condition("Available", available == 2, "x"), condition("Progressing", available < 2, "y")],
    }


def pod(i: int) -> dict[str, Any]:
    c = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    labels = {"modelserving.volcano.sh/name": "ms", "modelserving.volcano.sh/group-name": f"ms-{i % OBJECTS}"}
    return {"metadata": {"name": f"p-{i}", "namespace": NAMESPACE, "labels": labels}, "spec": {"containers": [c]}}


def event(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"ms-{i % OBJECTS}.{i:016x}", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "name": f"ms-{i % OBJECTS}",
            "namespace": NAMESPACE,
        },
        "type": "Normal",
        "reason": "RoleRunning",
        "message": f"Role prefill/prefill-0 in ServingGroup ms-{i % OBJECTS}-{i} is now Running",
        "source": {"component": "modelserving-controller"},
        "count": 1,
    }


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` have used so far."""
    return sum(proc_stats(pid)[1] for pid in pids)


class Writes:
    """The kinds of write, each a coroutine factory over a running counter."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.serial = itertools.count()
        self.latest: dict[str, dict[str, Any]] = {}
        self.conflicts = 0
        """Updates refused because the cached copy was stale (re-read and sent again)."""

    async def pod_create(self, i: int) -> None:
        await self.client.create(PODS, pod(next(self.serial)), NAMESPACE)

    async def event_create(self, i: int) -> None:
        await self.client.create(EVENTS, event(next(self.serial)), NAMESPACE)

    async def status_apply(self, i: int) -> None:
        body = {
            "apiVersion": MODELSERVINGS.api_version,
            "kind": MODELSERVINGS.kind,
            "metadata": {"name": f"ms-{i % OBJECTS}", "namespace": NAMESPACE},
            "status": status(next(self.serial)),
        }
        await self.client.apply(MODELSERVINGS, body, namespace=NAMESPACE, field_manager=MANAGER, subresource="status")

    async def status_merge_patch(self, i: int) -> None:
        body = {"status": status(next(self.serial))}
        await self.client.patch(
            MODELSERVINGS, f"ms-{i % OBJECTS}", body, NAMESPACE, subresource="status", field_manager=MANAGER
        )

    async def status_update(self, i: int) -> None:
        """A read-modify-write from a cached copy (the last answer), as a controller with an informer sends it."""
        name = f"ms-{i % OBJECTS}"
        while True:
            current = self.latest.get(name) or await self.client.get(MODELSERVINGS, name, NAMESPACE)
            current["status"] = status(next(self.serial))
            try:
                self.latest[name] = await self.client.replace(
                    MODELSERVINGS, current, NAMESPACE, subresource="status", field_manager=MANAGER
                )
                return
            except Conflict:
                self.conflicts += 1
                self.latest.pop(name, None)


async def timed(pids: list[int], n: int, write: Callable[[int], Awaitable[None]]) -> tuple[float, float]:
    """CPU milliseconds per write of ``pids`` and of this process (the client), over ``n`` writes sent by
    CONCURRENCY requests at a time."""
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with sem:
            await write(i)

    before, client_before = cpu_seconds(pids), time.process_time()
    await asyncio.gather(*(one(i) for i in range(n)))
    client = time.process_time() - client_before
    await asyncio.sleep(0.5)  # what the write set in motion (watch fan-out, etcd compaction of the burst) settles
    return (cpu_seconds(pids) - before) * 1000 / n, client * 1000 / n


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=1000, help="writes of each kind per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--crds", type=Path, default=REPO / "manifests" / "crd", help="the CRDs' directory (e.g. Kthena's own)"
    )
    args = ap.parse_args()
    crds = sorted(args.crds.glob("workload.serving.volcano.sh_*.yaml"))
    with tempfile.TemporaryDirectory() as d, EnvTest(d, crds=crds) as env:
        pids = [p.pid for p in env.processes if p.pid]
        client = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        try:
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            for i in range(OBJECTS):
                await client.create(MODELSERVINGS, modelserving(i), NAMESPACE)
            writes = Writes(client)
            kinds: dict[str, Callable[[int], Awaitable[None]]] = {
                "pod create": writes.pod_create,
                "status apply": writes.status_apply,
                "status merge patch": writes.status_merge_patch,
                "status update": writes.status_update,
                "event create": writes.event_create,
            }
            per_round: dict[str, list[float]] = {k: [] for k in kinds}
            ratios: dict[str, list[float]] = {k: [] for k in kinds}
            client_per_round: dict[str, list[float]] = {k: [] for k in kinds}
            client_ratios: dict[str, list[float]] = {k: [] for k in kinds}
            await timed(pids, 200, writes.status_apply)  # warm-up: the apply path's type conversion is built lazily
            for r in range(args.rounds):
                costs = {k: await timed(pids, args.writes, w) for k, w in kinds.items()}
                for k, (ms, client_ms) in costs.items():
                    per_round[k].append(ms)
                    ratios[k].append(ms / costs["pod create"][0])
                    client_per_round[k].append(client_ms)
                    client_ratios[k].append(client_ms / costs["pod create"][1])
                print(
                    f"round {r + 1}: "
                    + ", ".join(f"{k} {ms:.2f} (client {client_ms:.2f})" for k, (ms, client_ms) in costs.items())
                    + " ms"
                )
            print(
                f"CPU per write, median of {args.rounds} rounds of {args.writes} writes "
                f"({writes.conflicts} stale updates sent again; client on {LOOP_NAME}):"
            )
            for k in kinds:
                print(
                    f"  {k:<28} API server + etcd {statistics.median(per_round[k]):6.2f} ms "
                    f"(ratio to a pod create {statistics.median(ratios[k]):.2f}); "
                    f"client {statistics.median(client_per_round[k]):5.2f} ms "
                    f"(ratio to a pod create {statistics.median(client_ratios[k]):.2f})"
                )
        finally:
            await client.close()


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=LOOP_FACTORY) as runner:
        runner.run(main())
