"""Benchmark: rolling update wall time and availability in the cluster tier (printed, never asserted).

N ServingGroups (default 20, one role: an entry pod and a worker), kwok making every scheduled pod Ready after a
delay d (``ClusterTier(pod_ready_delay_ms=...)``), the manager running as its own process. Two rollouts of an
image change, each on a fresh ModelServing:

1. ``maxUnavailable 2``: the ideal is ceil(N/2) waves of d each, so the wall time is printed over ceil(N/2)·d;
2. ``maxUnavailable 0, maxSurge 2``: availability should never drop below N; its time is printed over the same
   ceil(N/2)·d and over (ceil(N/2)+1)·d, the surge's own lower bound (the surge groups start first).

A sampler lists the pods every 0.2 s and counts complete, ready ServingGroups (as ``test/cluster/test_rollout.py``
does): the minimum it saw is what the cluster showed, not what the controller reported. The wall time runs from
the spec patch until ``UpdateInProgress`` is ``RolloutComplete`` for the new generation; the moment the sampler
first saw every group ready on the new image is printed too. Each scenario also prints what ``kthena-py rollout
plan`` predicts for the same spec (steps and lowest availability), from the same pure planners.

Usage: python bench/rollout.py [--groups N] [--delay SECONDS] [--max-unavailable K] [--max-surge S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from converge import crds, start_manager

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import NAMESPACES, PODS
from kthena_py.simulation import simulate_rollout
from kthena_py.testing.controlplane import ClusterTier

GROUP = "modelserving.volcano.sh/group-name"
NAME = "modelserving.volcano.sh/name"
OLD, NEW = "nginx:1.27", "nginx:1.28"


def modelserving(name: str, groups: int, config: dict[str, Any], image: str = OLD) -> dict[str, Any]:
    c = {"name": "engine", "image": image, "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": groups,
            "schedulerName": "volcano",
            "rolloutStrategy": {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config},
            "template": {
                "roles": [
                    {
                        "name": "decode",
                        "replicas": 1,
                        "workerReplicas": 1,
                        "entryTemplate": {"spec": {"containers": [c]}},
                        "workerTemplate": {"spec": {"containers": [copy.deepcopy(c)]}},
                    }
                ]
            },
        },
    }


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


@dataclass
class Sampler:
    """Lists the pods every ``interval`` seconds: the fewest ready groups, and when all were ready on ``image``."""

    client: KubeClient
    namespace: str
    name: str
    groups: int
    image: str
    start: float
    interval: float = 0.2
    lowest: int | None = None
    samples: int = 0
    all_new_at: float | None = None
    seen: set[str] = field(default_factory=set)

    async def sample(self) -> None:
        pods = (await self.client.list(PODS, self.namespace, label_selector=f"{NAME}={self.name}")).items
        by_group: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            by_group.setdefault(pod["metadata"]["labels"][GROUP], []).append(pod)
        self.seen |= set(by_group)
        complete = {
            g: members
            for g, members in by_group.items()
            if len(members) >= 2 and all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in members)
        }
        count = len(complete)
        self.samples += 1
        self.lowest = count if self.lowest is None else min(self.lowest, count)
        updated = [
            g
            for g, members in complete.items()
            if all(p["spec"]["containers"][0]["image"] == self.image for p in members)
        ]
        if self.all_new_at is None and len(updated) >= self.groups and len(by_group) == self.groups:
            self.all_new_at = time.perf_counter() - self.start

    async def run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.interval)


async def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.perf_counter() + timeout
    while not await check():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def condition(client: KubeClient, namespace: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ms = await client.get(MODELSERVINGS, name, namespace)
    status = ms.get("status") or {}
    found = next((c for c in status.get("conditions") or [] if c["type"] == "UpdateInProgress"), {})
    return ms, found


@dataclass
class Result:
    label: str
    wall: float
    all_new: float | None
    lowest: int
    samples: int
    surge_seen: int
    predicted_steps: int
    predicted_lowest: int


async def scenario(client: KubeClient, label: str, name: str, groups: int, config: dict[str, Any]) -> Result:
    namespace = f"bench-{name}"
    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    old = modelserving(name, groups, config)
    await client.create(MODELSERVINGS, old, namespace)

    async def available() -> bool:
        ms = await client.get(MODELSERVINGS, name, namespace)
        return (ms.get("status") or {}).get("availableReplicas") == groups

    await wait_for(available, 600, f"{name} available")
    new = modelserving(name, groups, config, image=NEW)
    plan = simulate_rollout(old, new)
    ms = await client.get(MODELSERVINGS, name, namespace)
    start = time.perf_counter()
    sampler = Sampler(client, namespace, name, groups, NEW, start)
    task = asyncio.create_task(sampler.run())
    try:
        await client.patch(MODELSERVINGS, name, {"spec": {"template": new["spec"]["template"]}}, namespace)
        generation = ms["metadata"]["generation"] + 1

        async def complete() -> bool:
            _, c = await condition(client, namespace, name)
            return c.get("reason") == "RolloutComplete" and (c.get("observedGeneration") or 0) >= generation

        await wait_for(complete, 1200, f"{name} RolloutComplete")
        wall = time.perf_counter() - start
        await sampler.sample()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return Result(
        label=label,
        wall=wall,
        all_new=sampler.all_new_at,
        lowest=sampler.lowest or 0,
        samples=sampler.samples,
        surge_seen=len(sampler.seen) - groups,
        predicted_steps=sum(1 for step in plan.steps if step.take_down or step.surge),
        predicted_lowest=plan.min_available,
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--delay", type=float, default=5.0, help="kwok readiness delay d, seconds")
    ap.add_argument("--max-unavailable", type=int, default=2)
    ap.add_argument("--max-surge", type=int, default=2)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    n, d = args.groups, args.delay
    waves = math.ceil(n / args.max_unavailable)
    ideal = waves * d
    print(f"{n} ServingGroups x 2 pods, kwok readiness delay d = {d:g} s")
    print(f"ideal: ceil({n}/{args.max_unavailable})·d = {ideal:g} s")
    with (
        tempfile.TemporaryDirectory() as tmp,
        ClusterTier(tmp, nodes=4, crds=crds(), pod_ready_delay_ms=int(d * 1000)) as tier,
    ):
        client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        manager = start_manager(tier.kubeconfig_path, args.workers, 18391, Path(tmp) / "manager.log")
        try:
            await asyncio.sleep(3)  # manager start-up is not measured
            results = [
                await scenario(
                    client, f"maxUnavailable {args.max_unavailable}", "mu", n, {"maxUnavailable": args.max_unavailable}
                ),
                await scenario(
                    client,
                    f"maxUnavailable 0, maxSurge {args.max_surge}",
                    "surge",
                    n,
                    {"maxUnavailable": 0, "maxSurge": args.max_surge},
                ),
            ]
        finally:
            manager.terminate()
            manager.wait(30)
            await client.close()
    for r in results:
        surge_ideal = (math.ceil(n / args.max_surge) + 1) * d if "Surge" in r.label else None
        extra = f", over (ceil(N/S)+1)·d = {surge_ideal:g} s: {r.wall / surge_ideal:.2f}" if surge_ideal else ""
        all_new = f"{r.all_new:.1f} s" if r.all_new is not None else "never seen"
        print(f"  {r.label}:")
        print(
            f"    wall time {r.wall:.1f} s (every group ready on the new image at {all_new}); "
            f"ratio over ideal {r.wall / ideal:.2f}{extra}"
        )
        print(
            f"    availability: lowest {r.lowest}/{n} ready ServingGroups over {r.samples} samples; "
            f"surge groups seen {r.surge_seen}"
        )
        print(f"    rollout plan predicts {r.predicted_steps} waves, lowest availability {r.predicted_lowest}/{n}")


if __name__ == "__main__":
    asyncio.run(main())
