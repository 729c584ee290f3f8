"""Benchmark: in-place updates vs recreate, and coordinated vs uncoordinated P/D rollouts (printed, never asserted).

In the cluster tier (kwok nodes, Volcano gang scheduling) with a kwok readiness delay ``d`` for new pods and for
containers restarted by an image patch (so both methods wait the same ``d`` per unit):

1. The same image change on N ServingGroups (1 entry + 1 worker each, ``maxUnavailable`` M), rolled with
   ``updateMethod: Recreate`` and with ``InPlace``: wall time from the spec edit until ``UpdateInProgress`` is
   ``RolloutComplete``, over the ideal ``ceil(N/M) * d``, and the ratio recreate / in place.
2. One ServingGroup with prefill 4 (``maxUnavailable`` 1) and decode 8 (``maxUnavailable`` 4) under
   ``RoleRollingUpdate``, both images changed, with ``roleCoordination.maxSkew`` and without: the largest
   difference of target-version Ready ratios a 50 ms pod sampler observed, and the wall time.

Each measurement runs ``--runs`` times in one tier (a fresh namespace each); medians are printed with every run.

Usage: python bench/inplace.py [--groups N] [--max-unavailable M] [--delay-ms D] [--skew PCT] [--runs R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.controllers import register_all
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import NAMESPACES, PODS
from kthena_py.plan.modelserving.core.revision import revision_data, role_template_hash
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.wait import eventually

REPO = Path(__file__).resolve().parent.parent


def crds() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("KTHENA_PY_EXTRA_CRDS", "").split(os.pathsep) if p]
    return sorted((REPO / "manifests" / "crd").glob("workload.serving.volcano.sh_*.yaml")) + extra


def container(name: str, image: str = "nginx:1.27") -> dict[str, Any]:
    return {"name": name, "image": image, "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}


def role(name: str, replicas: int, workers: int, max_unavailable: int | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "workerReplicas": workers,
        "entryTemplate": {"spec": {"containers": [container("engine")]}},
    }
    if workers:
        r["workerTemplate"] = {"spec": {"containers": [container("worker")]}}
    if max_unavailable is not None:
        r["maxUnavailable"] = max_unavailable
    return r


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


@contextlib.asynccontextmanager
async def manager(kubeconfig: str) -> AsyncIterator[None]:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    mgr = Manager(client, ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0"))
    register_all(mgr, workers=4)
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.run(stop))
    try:
        await eventually(lambda: mgr.leading.is_set() or task.done(), timeout=60)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()


@contextlib.asynccontextmanager
async def sampling(probe: Callable[[], Awaitable[None]], interval: float) -> AsyncIterator[None]:
    async def run() -> None:
        while True:
            await probe()
            await asyncio.sleep(interval)

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def condition_reason(kube: KubeClient, ns: str, name: str, type_: str = "UpdateInProgress") -> str:
    ms = await kube.get(MODELSERVINGS, name, ns)
    for c in (ms.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return str(c.get("reason"))
    return ""


async def available(kube: KubeClient, ns: str, name: str, replicas: int) -> bool:
    ms = await kube.get(MODELSERVINGS, name, ns)
    st = ms.get("status") or {}
    return st.get("availableReplicas") == replicas and st.get("observedGeneration") == ms["metadata"]["generation"]


async def set_images(kube: KubeClient, ns: str, name: str, image: str) -> None:
    ms = await kube.get(MODELSERVINGS, name, ns)
    roles = ms["spec"]["template"]["roles"]
    for r in roles:
        r["entryTemplate"]["spec"]["containers"][0]["image"] = image
        if r.get("workerTemplate"):
            r["workerTemplate"]["spec"]["containers"][0]["image"] = image
    await kube.patch(MODELSERVINGS, name, {"spec": {"template": {"roles": roles}}}, ns)


async def namespace(kube: KubeClient) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    return name


async def rollout_time(kube: KubeClient, doc: dict[str, Any], replicas: int, timeout: float = 900) -> float:
    ns = await namespace(kube)
    name = doc["metadata"]["name"]
    await kube.create(MODELSERVINGS, doc, ns)
    await eventually(lambda: available(kube, ns, name, replicas), timeout=timeout, interval=0.2)
    await asyncio.sleep(1)
    start = time.monotonic()
    await set_images(kube, ns, name, "nginx:1.28")
    await eventually(
        lambda: _reason_is(kube, ns, name, "RolloutComplete"), timeout=timeout, interval=0.05, description=name
    )
    elapsed = time.monotonic() - start
    await kube.delete(NAMESPACES, ns)
    return elapsed


async def _reason_is(kube: KubeClient, ns: str, name: str, reason: str) -> bool:
    return await condition_reason(kube, ns, name) == reason


async def in_place_vs_recreate(kube: KubeClient, groups: int, unavailable: int, delay: float, runs: int) -> None:
    ideal = math.ceil(groups / unavailable) * delay
    times: dict[str, list[float]] = {"Recreate": [], "InPlace": []}
    for run in range(runs):
        for method in ("Recreate", "InPlace"):
            doc = {
                "metadata": {"name": "ms"},
                "spec": {
                    "replicas": groups,
                    "schedulerName": "volcano",
                    "template": {"roles": [role("decode", 1, 1)]},
                    "rolloutStrategy": {
                        "type": "ServingGroupRollingUpdate",
                        "updateMethod": method,
                        "rollingUpdateConfiguration": {"maxUnavailable": unavailable},
                    },
                },
            }
            elapsed = await rollout_time(kube, doc, groups)
            times[method].append(elapsed)
            print(f"  run {run + 1} {method:8s}: {elapsed:6.1f} s  ({elapsed / ideal:4.2f} x ideal {ideal:.1f} s)")
    rec, inp = statistics.median(times["Recreate"]), statistics.median(times["InPlace"])
    print(f"  median Recreate {rec:.1f} s, InPlace {inp:.1f} s; recreate / in place = {rec / inp:.2f}")


async def pd_rollout(kube: KubeClient, doc: dict[str, Any]) -> tuple[float, float]:
    """Roll both images of a P/D ModelServing; return (max observed skew of target-version Ready ratios, seconds)."""
    ns = await namespace(kube)
    await kube.create(MODELSERVINGS, doc, ns)
    await eventually(lambda: available(kube, ns, "pd", 1), timeout=600, interval=0.2)
    await set_images(kube, ns, "pd", "nginx:1.28")
    ms = ModelServing.model_validate(await kube.get(MODELSERVINGS, "pd", ns))
    data = revision_data(ms.spec)
    hashes = {r.name: (role_template_hash(data, r), r.replicas) for r in data.roles}
    worst = 0.0

    async def probe() -> None:
        nonlocal worst
        counts = dict.fromkeys(hashes, 0)
        for pod in (await kube.list(PODS, ns)).items:
            labels = pod["metadata"]["labels"]
            want = hashes.get(labels.get("modelserving.volcano.sh/role", ""))
            if (
                want is not None
                and labels.get("modelserving.volcano.sh/role-template-hash") == want[0]
                and ready(pod)
                and not pod["metadata"].get("deletionTimestamp")
            ):
                counts[labels["modelserving.volcano.sh/role"]] += 1
        ratios = [counts[r] / n for r, (_, n) in hashes.items()]
        worst = max(worst, max(ratios) - min(ratios))

    start = time.monotonic()
    async with sampling(probe, 0.05):
        await eventually(lambda: _reason_is(kube, ns, "pd", "RolloutComplete"), timeout=900, interval=0.05)
    elapsed = time.monotonic() - start
    await kube.delete(NAMESPACES, ns)
    return worst, elapsed


async def coordinated(kube: KubeClient, skew: int, runs: int) -> None:
    results: dict[str, list[tuple[float, float]]] = {"coordinated": [], "uncoordinated": []}
    for run in range(runs):
        for mode in ("uncoordinated", "coordinated"):
            strategy: dict[str, Any] = {"type": "RoleRollingUpdate"}
            if mode == "coordinated":
                strategy["roleCoordination"] = {"maxSkew": f"{skew}%"}
            doc = {
                "metadata": {"name": "pd"},
                "spec": {
                    "replicas": 1,
                    "schedulerName": "volcano",
                    "template": {"roles": [role("prefill", 4, 0, 1), role("decode", 8, 0, 4)]},
                    "rolloutStrategy": strategy,
                },
            }
            worst, elapsed = await pd_rollout(kube, doc)
            results[mode].append((worst, elapsed))
            print(f"  run {run + 1} {mode:13s}: max skew {worst * 100:5.1f} points, {elapsed:6.1f} s")
    (u_skew, u_time), (c_skew, c_time) = (
        (statistics.median(s for s, _ in results[m]), statistics.median(t for _, t in results[m]))
        for m in ("uncoordinated", "coordinated")
    )
    print(
        f"  median uncoordinated: max skew {u_skew * 100:.1f} points, {u_time:.1f} s; "
        f"coordinated (maxSkew {skew}%): max skew {c_skew * 100:.1f} points, {c_time:.1f} s; "
        f"wall time coordinated / uncoordinated = {c_time / u_time:.2f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--max-unavailable", type=int, default=2)
    parser.add_argument("--delay-ms", type=int, default=2000)
    parser.add_argument("--skew", type=int, default=25)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as d,
        ClusterTier(d, crds=crds(), pod_ready_delay_ms=args.delay_ms, inplace_ready_delay_ms=0) as tier,
    ):
        kube = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        try:
            async with manager(str(tier.kubeconfig_path)):
                delay = args.delay_ms / 1000
                print(
                    f"1. {args.groups} ServingGroups (entry + worker), maxUnavailable {args.max_unavailable}, "
                    f"readiness delay {delay:.1f} s (new pods and restarted containers alike)"
                )
                await in_place_vs_recreate(kube, args.groups, args.max_unavailable, delay, args.runs)
                print(f"2. prefill 4 (maxUnavailable 1) / decode 8 (maxUnavailable 4), readiness delay {delay:.1f} s")
                await coordinated(kube, args.skew, args.runs)
        finally:
            await kube.close()


if __name__ == "__main__":
    asyncio.run(main())
