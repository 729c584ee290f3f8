"""Benchmark: behaviour under faults, in the envtest tier (printed, never asserted).

* Leader takeover when the leader's connection stalls (packets held, connections open): time from the
  stall until the other replica leads (takeover), until the old leader stopped leading, and the overlap
  (both leading at once). Baseline, same run: an elector whose renews are not bounded by the renew
  deadline (the behaviour before issue 11), on the same stalled connection.
* Detection of a dead connection: a watch whose connection silently stops forwarding (new connections
  work): time until the informer notices and has the change made meanwhile; and a request on a dead
  pooled keep-alive connection: time until it fails.
* Requests per minute on a permanently refused object: a ModelServing whose worker pod template the API
  server refuses (422), minute by minute, all requests of the manager and the create attempts of the
  refused pod.

Usage: python bench/faults.py [--minutes N] [--lease-duration S --renew-deadline S --retry-period S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from kthena_py.controllers import register_all
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import ApiError, KubeClient
from kthena_py.kube.resources import CONFIGMAPS, NAMESPACES
from kthena_py.runtime.informer import Informer
from kthena_py.runtime.leader import LeaderElector
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.controlplane import EnvTest
from kthena_py.testing.counting import CountingClient
from kthena_py.testing.proxy import TcpProxy

REPO = Path(__file__).resolve().parent.parent


def crds() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("KTHENA_PY_EXTRA_CRDS", "").split(os.pathsep) if p]
    return sorted((REPO / "manifests" / "crd").glob("workload.serving.volcano.sh_*.yaml")) + extra


def _server(kubeconfig: Path) -> tuple[str, int]:
    cfg = yaml.safe_load(kubeconfig.read_text())
    host, port = cfg["clusters"][0]["cluster"]["server"].removeprefix("https://").rstrip("/").split(":")
    return host, int(port)


def _via(kubeconfig: Path, port: int, name: str) -> Path:
    cfg = yaml.safe_load(kubeconfig.read_text())
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = kubeconfig.parent / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path


@contextlib.asynccontextmanager
async def proxied(kubeconfig: Path, name: str) -> AsyncIterator[tuple[TcpProxy, KubeClient]]:
    proxy = await TcpProxy(*_server(kubeconfig)).start()
    client = await KubeClient.from_kubeconfig(str(_via(kubeconfig, proxy.port, name)))
    try:
        yield proxy, client
    finally:
        proxy.resume()
        await client.close()
        await proxy.stop()


class UnboundedElector(LeaderElector):
    """The baseline: a renew waits for its request however long it takes (no renew-deadline cut-off)."""

    async def _attempt(self, budget: float) -> bool:
        try:
            return await self._try_acquire_or_renew()
        except ApiError:
            return False


async def takeover(
    kubeconfig: Path, direct: KubeClient, namespace: str, lease: dict[str, float], *, bounded: bool
) -> dict[str, float]:
    """Stall the leader's connection; return seconds from the stall to each milestone."""
    times: dict[str, float] = {}
    async with proxied(kubeconfig, f"lease-{namespace}") as (proxy, a_client):
        cls = LeaderElector if bounded else UnboundedElector
        a = cls(a_client, name="bench", namespace=namespace, identity="a", **lease)
        b = LeaderElector(direct, name="bench", namespace=namespace, identity="b", **lease)

        async def mark(key: str) -> None:
            times[key] = time.monotonic()

        a_task = asyncio.create_task(a.run(lambda: mark("a_started"), lambda: mark("a_stopped")))
        while "a_started" not in times:
            await asyncio.sleep(0.05)
        b_task = asyncio.create_task(b.run(lambda: mark("b_started"), lambda: mark("b_stopped")))
        await asyncio.sleep(2 * lease["retry_period"])
        proxy.stall()
        stalled = time.monotonic()
        while "b_started" not in times or "a_stopped" not in times:
            await asyncio.sleep(0.05)
            if time.monotonic() - stalled > 180:
                break
        for task in (a_task, b_task):
            task.cancel()
        proxy.resume()
        await asyncio.gather(a_task, b_task, return_exceptions=True)
    out = {"takeover": times["b_started"] - stalled}
    if "a_stopped" in times:
        out["old_leader_stopped"] = times["a_stopped"] - stalled
        out["overlap"] = max(0.0, times["a_stopped"] - times["b_started"])
    return out


async def dead_watch(kubeconfig: Path, direct: KubeClient, namespace: str) -> tuple[float, float]:
    """Seconds from a silent stall of the watch's connection until it is noticed / the change arrives."""
    async with proxied(kubeconfig, f"watch-{namespace}") as (proxy, client):
        inf = Informer(client, CONFIGMAPS, namespace=namespace)
        task = asyncio.create_task(inf.run())
        await inf.wait_for_sync(30)
        await asyncio.sleep(1)
        proxy.stall(new_connections=False)
        stalled = time.monotonic()
        await direct.create(CONFIGMAPS, {"metadata": {"name": "after-stall"}}, namespace)
        noticed = arrived = 0.0
        while not arrived:
            await asyncio.sleep(0.05)
            if not noticed and inf.failures:
                noticed = time.monotonic() - stalled
            if inf.store.get(f"{namespace}/after-stall") is not None:
                arrived = time.monotonic() - stalled
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return noticed, arrived


async def dead_pooled_connection(kubeconfig: Path, namespace: str) -> tuple[float, str]:
    async with proxied(kubeconfig, f"pool-{namespace}") as (proxy, client):
        await client.list(CONFIGMAPS, namespace)
        proxy.stall(new_connections=False)
        started = time.monotonic()
        try:
            await client.list(CONFIGMAPS, namespace)
            outcome = "answered"
        except ApiError as exc:
            outcome = type(exc).__name__
        return time.monotonic() - started, outcome


def refused_modelserving() -> dict[str, Any]:
    ok = {"containers": [{"name": "engine", "image": "nginx:1.27"}]}
    bad = {"containers": [{"name": "engine", "image": ""}]}
    role = {"name": "prefill", "replicas": 1, "workerReplicas": 1, "entryTemplate": {"spec": ok}}
    role["workerTemplate"] = {"spec": bad}
    return {
        "metadata": {"name": "refused"},
        "spec": {"replicas": 1, "schedulerName": "default-scheduler", "template": {"roles": [role]}},
    }


async def refused_requests(kubeconfig: Path, direct: KubeClient, namespace: str, minutes: int) -> list[Counter[str]]:
    client = await CountingClient.from_kubeconfig(str(kubeconfig))
    manager = Manager(
        client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    register_all(manager, workers=4)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    per_minute: list[Counter[str]] = []
    try:
        while not manager.leading.is_set():
            await asyncio.sleep(0.05)
        await direct.create(MODELSERVINGS, refused_modelserving(), namespace)
        for _ in range(minutes):
            before = Counter(client.requests)
            await asyncio.sleep(60)
            delta = client.requests - before
            per_minute.append(
                Counter(
                    {
                        "all": sum(delta.values()),
                        "watch/list": sum(n for (m, _), n in delta.items() if m in ("WATCH", "GET")),
                        "create refused pod": delta[("POST", "refused-0-prefill-0-1")],
                        "delete accepted pod": delta[("DELETE", "refused-0-prefill-0-0")],
                        "events": sum(n for (m, name), n in delta.items() if name.startswith("refused.")),
                    }
                )
            )
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
    return per_minute


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=int, default=3)
    ap.add_argument("--lease-duration", type=float, default=15.0)
    ap.add_argument("--renew-deadline", type=float, default=10.0)
    ap.add_argument("--retry-period", type=float, default=2.0)
    args = ap.parse_args()
    lease = {
        "lease_duration": args.lease_duration,
        "renew_deadline": args.renew_deadline,
        "retry_period": args.retry_period,
    }
    with tempfile.TemporaryDirectory() as d, EnvTest(d, crds=crds()) as env:
        direct = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        try:
            for ns in ("lease", "lease-base", "watch", "refused"):
                await direct.create(NAMESPACES, {"metadata": {"name": ns}})
            print(
                f"leader takeover, leader's connection stalled (lease {args.lease_duration:g} s, "
                f"renew deadline {args.renew_deadline:g} s, retry {args.retry_period:g} s):"
            )
            for label, bounded, ns in (("renews bounded (ours)", True, "lease"), ("baseline", False, "lease-base")):
                r = await takeover(env.kubeconfig_path, direct, ns, lease, bounded=bounded)
                stopped = f"{r['old_leader_stopped']:.1f}s" if "old_leader_stopped" in r else "never (>180s)"
                overlap = f"{r['overlap']:.1f}s" if "overlap" in r else "unbounded"
                print(
                    f"  {label:22}: takeover {r['takeover']:5.1f}s, old leader stopped after {stopped}, "
                    f"overlap {overlap}"
                )
            noticed, arrived = await dead_watch(env.kubeconfig_path, direct, "watch")
            print("dead connection (silently stalled, kernel still acknowledging):")
            print(f"  watch noticed after     : {noticed:5.1f}s (change delivered after {arrived:.1f}s; bound 45 s)")
            seconds, outcome = await dead_pooled_connection(env.kubeconfig_path, "watch")
            print(f"  pooled request failed   : {seconds:5.1f}s ({outcome}; read-idle bound 30 s)")
            print(f"requests per minute, one ModelServing whose worker pod is refused (422), {args.minutes} min:")
            for i, counts in enumerate(await refused_requests(env.kubeconfig_path, direct, "refused", args.minutes)):
                print(
                    f"  minute {i + 1}: {counts['all']:4d} requests (watch/list/get {counts['watch/list']}, "
                    f"events {counts['events']}), create of the refused pod {counts['create refused pod']}, "
                    f"deletes of the accepted pod {counts['delete accepted pod']}"
                )
        finally:
            await direct.close()


if __name__ == "__main__":
    asyncio.run(main())
