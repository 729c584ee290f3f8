"""Benchmark: draining kwok nodes under protected ModelServings (printed, never asserted).

In the cluster tier: 5 ModelServings x 4 ServingGroups (one 1-GPU pod each) with
``evictionStrategy.minAvailable: 75%`` (3 of 4 must stay ready) on 10 nodes of 2 GPUs, 10 empty spare nodes to
rebuild onto; then the 10 nodes are drained with ``kubectl drain``. An in-process manager serves the eviction
webhook (``manifests/eviction``'s webhook pointed at it) and runs the controllers. Four scenarios, each on its
own nodes in the same tier:

* ``one-drain``: one ``kubectl drain`` of the 10 nodes (node after node);
* ``10-drains``: 10 ``kubectl drain`` processes at once, one per node (an upgrade tool or an autoscaler);
* ``off-1`` / ``off-10``: the same with the endpoint disabled (it admits everything): the baselines.

Per scenario: drain wall time (start until every drain exited and every ModelServing is Available again), the
evictions the webhook granted and denied, the retries kubectl reported, the fewest ready groups of any
ModelServing seen at any pod event (minAvailable is 3), and the webhook's decision latency (p50/p99/max,
measured around the handler, so it includes waiting for the per-ModelServing lock).

With ``--storm``, the storm of :mod:`kthena_py.testing.evictionstorm` instead: one ModelServing (3 ServingGroups of
an entry and a worker pod, ``minAvailable: 2``; at Role level 2 groups of 3 instances of one role,
``roleMinAvailable: 2``), 4 clients evicting every live pod over and over for ``--storm-seconds``, a LIST+WATCH
checking every pod state. Per run and level: the fewest ready units seen against minAvailable, the observed
states below it, the grant rate and the webhook's latency; ``off`` (the endpoint disabled) is the baseline, in
the same tier. ``--storm-runs`` repeats each level.

Usage: python bench/eviction.py [--modelservings 5] [--groups 4] [--nodes 10]
       python bench/eviction.py --storm [--storm-runs 3] [--storm-seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from kthena_py.controllers import eviction, register_all
from kthena_py.controllers.eviction import EVICTION_PATH
from kthena_py.controllers.eviction.metrics import REQUESTS
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import NAMESPACES, PODS, VALIDATING_WEBHOOKS
from kthena_py.runtime import logconfig
from kthena_py.runtime.certs import generate
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.webhook import AdmissionRequest, AdmissionResponse, WebhookServer
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.cluster import FakeNode
from kthena_py.testing.evictionstorm import pod_ready, run_storm

REPO = Path(__file__).resolve().parent.parent
CERTS = generate(["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
TAINT = "kthena-py/bench"


def crds() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("KTHENA_PY_EXTRA_CRDS", "").split(os.pathsep) if p]
    return sorted((REPO / "manifests" / "crd").glob("workload.serving.volcano.sh_*.yaml")) + extra


def modelserving(name: str, groups: int, tag: str) -> KubeObject:
    container = {
        "name": "engine",
        "image": "nginx",
        "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
    }
    spec = {
        "containers": [container],
        "nodeSelector": {TAINT: tag},
        "tolerations": [{"key": TAINT, "operator": "Equal", "value": tag, "effect": "NoSchedule"}],
    }
    role = {"name": "main", "replicas": 1, "workerReplicas": 0, "entryTemplate": {"spec": spec}}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": groups,
            "schedulerName": "volcano",
            "template": {"roles": [role]},
            "rolloutStrategy": {"evictionStrategy": {"minAvailable": "75%"}},
        },
    }


def nodes(tag: str, prefix: str, count: int) -> list[FakeNode]:
    return [
        FakeNode(
            f"{tag}-{prefix}{i}",
            gpus=2,
            labels={TAINT: tag},
            taints=[{"key": TAINT, "value": tag, "effect": "NoSchedule"}],
        )
        for i in range(count)
    ]


class Watcher:
    """The fewest ready groups (1-pod groups) of any ModelServing, after every pod event of the namespace."""

    def __init__(self, client: KubeClient, namespace: str, names: list[str]) -> None:
        self.client, self.namespace, self.names = client, namespace, names
        self.pods: dict[str, KubeObject] = {}
        self.minimum = 10**9
        self.task: asyncio.Task[None] | None = None

    def observe(self) -> None:
        counts = dict.fromkeys(self.names, 0)
        for pod in self.pods.values():
            ms = (pod["metadata"].get("labels") or {}).get("modelserving.volcano.sh/name")
            if ms in counts and pod_ready(pod):
                counts[ms] += 1
        self.minimum = min(self.minimum, *counts.values())

    async def run(self) -> None:
        listed = await self.client.list(PODS, self.namespace)
        self.pods = {p["metadata"]["name"]: p for p in listed.items}
        self.observe()
        version = listed.resource_version
        while True:
            async for event in self.client.watch(PODS, self.namespace, resource_version=version):
                version = event.object["metadata"]["resourceVersion"]
                if event.type == "BOOKMARK":
                    continue
                if event.type == "DELETED":
                    self.pods.pop(event.object["metadata"]["name"], None)
                else:
                    self.pods[event.object["metadata"]["name"]] = event.object
                self.observe()


@contextlib.asynccontextmanager
async def manager(kubeconfig: Path, namespace: str, enabled: bool, latencies: list[float]) -> AsyncIterator[int]:
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    mgr = Manager(client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0"))
    register_all(mgr, workers=8, eviction_budget=enabled)
    server = WebhookServer(lambda: (CERTS.serving.cert, CERTS.serving.key), host="127.0.0.1", port=0)
    handler = eviction.add_webhook(server, mgr, enabled=enabled)

    async def timed(request: AdmissionRequest) -> AdmissionResponse:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            latencies.append(time.perf_counter() - started)

    server.handlers[EVICTION_PATH] = timed
    mgr.add_runnable(server.run, needs_leader=False)
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.run(stop))
    try:
        while not (server.started.is_set() and mgr.leading.is_set()):
            await asyncio.sleep(0.1)
        assert server.port is not None
        yield server.port
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


def webhook(namespace: str, port: int) -> KubeObject:
    patch = yaml.safe_load((REPO / "manifests" / "eviction" / "validating_webhook_configuration.yaml").read_text())
    (hook,) = patch["webhooks"]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{port}{EVICTION_PATH}",
        "caBundle": base64.b64encode(CERTS.ca_bundle).decode(),
    }
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return {"metadata": {"name": f"bench-eviction-{namespace}"}, "webhooks": [hook]}


async def all_available(client: KubeClient, namespace: str, names: list[str], groups: int) -> bool:
    for name in names:
        status = (await client.get(MODELSERVINGS, name, namespace)).get("status") or {}
        if status.get("availableReplicas") != groups or status.get("replicas") != groups:
            return False
    return True


async def wait(probe: Any, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not await probe():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out")
        await asyncio.sleep(0.25)


def counted(decision: str) -> float:
    return sum(
        s.value
        for m in REQUESTS.collect()
        for s in m.samples
        if s.name.endswith("_total") and s.labels.get("decision") == decision
    )


async def kubectl_drain(kubeconfig: Path, names: list[str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        "drain",
        *names,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=600s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return int(proc.returncode or 0), out.decode()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def scenario(tier: ClusterTier, label: str, mode: str, enabled: bool, args: argparse.Namespace) -> None:
    tag = f"b{label}"
    namespace = f"bench-{label}"
    client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
    latencies: list[float] = []
    drained = [n.name for n in nodes(tag, "d", args.nodes)]
    try:
        for node in nodes(tag, "d", args.nodes):
            await asyncio.to_thread(tier.add_node, node)
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        names = [f"ms-{i}" for i in range(args.modelservings)]
        async with manager(tier.kubeconfig_path, namespace, enabled, latencies) as port:
            config = webhook(namespace, port)
            await client.create(VALIDATING_WEBHOOKS, config)
            for name in names:
                await client.create(MODELSERVINGS, modelserving(name, args.groups, tag), namespace)
            await wait(lambda: all_available(client, namespace, names, args.groups))
            for node in nodes(tag, "s", args.nodes):
                await asyncio.to_thread(tier.add_node, node)
            await asyncio.sleep(2)  # the webhook configuration is in effect long since; let the caches settle
            watcher = Watcher(client, namespace, names)
            watcher.task = asyncio.create_task(watcher.run())
            granted0, denied0 = counted("allowed"), counted("denied")
            latencies.clear()
            start = time.perf_counter()
            if mode == "one":
                results = [await kubectl_drain(tier.kubeconfig_path, drained)]
            else:
                results = await asyncio.gather(*(kubectl_drain(tier.kubeconfig_path, [n]) for n in drained))
            drain_done = time.perf_counter() - start
            await wait(lambda: all_available(client, namespace, names, args.groups))
            total = time.perf_counter() - start
            watcher.task.cancel()
            await asyncio.gather(watcher.task, return_exceptions=True)
            failed = [out for code, out in results if code != 0]
            retries = sum(out.count("will retry after") for _, out in results)
            granted, denied = counted("allowed") - granted0, counted("denied") - denied0
            ms = [1000 * x for x in latencies]
            print(
                f"  {label:>9}: drains exited after {drain_done:6.1f} s, all Available after {total:6.1f} s; "
                f"evictions granted {granted:.0f}, denied {denied:.0f} (kubectl retries {retries}); "
                f"fewest ready groups of a ModelServing {watcher.minimum} of {args.groups}; "
                f"webhook p50 {pct(ms, 0.5):.1f} ms, p99 {pct(ms, 0.99):.1f} ms, max {max(ms, default=0):.1f} ms "
                f"({len(ms)} calls, mean {statistics.fmean(ms) if ms else 0:.1f} ms)"
                + (f"; {len(failed)} drains FAILED:\n{failed[0][-2000:]}" if failed else "")
            )
            with contextlib.suppress(NotFound):
                await client.delete(VALIDATING_WEBHOOKS, config["metadata"]["name"])
    finally:
        await client.close()


def storm_modelserving(level: str) -> KubeObject:
    worker = {"containers": [{"name": "worker", "image": "nginx", "resources": {"requests": {"cpu": "10m"}}}]}
    entry = {"containers": [{"name": "engine", "image": "nginx", "resources": {"requests": {"cpu": "10m"}}}]}
    if level == "Role":
        replicas, instances = 2, 3
        strategy: dict[str, Any] = {"protectionLevel": "Role", "roleMinAvailable": {"main": 2}}
    else:
        replicas, instances = 3, 1
        strategy = {"protectionLevel": "ServingGroup", "minAvailable": 2}
    role = {
        "name": "main",
        "replicas": instances,
        "workerReplicas": 1,
        "entryTemplate": {"spec": entry},
        "workerTemplate": {"spec": worker},
    }
    return {
        "metadata": {"name": "llm"},
        "spec": {
            "replicas": replicas,
            "schedulerName": "volcano",
            "template": {"roles": [role]},
            "rolloutStrategy": {"evictionStrategy": strategy},
        },
    }


async def storm(tier: ClusterTier, label: str, level: str, enabled: bool, seconds: float) -> None:
    namespace = f"storm-{label}"
    client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
    clients = [await KubeClient.from_kubeconfig(str(tier.kubeconfig_path)) for _ in range(5)]
    latencies: list[float] = []
    try:
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        async with manager(tier.kubeconfig_path, namespace, enabled, latencies) as port:
            config = webhook(namespace, port)
            await client.create(VALIDATING_WEBHOOKS, config)
            ms = storm_modelserving(level)
            await client.create(MODELSERVINGS, ms, namespace)
            groups = ms["spec"]["replicas"]
            await wait(lambda: all_available(client, namespace, ["llm"], groups))
            await asyncio.sleep(2)  # the webhook configuration is in effect long since
            latencies.clear()
            report = await run_storm(
                clients[:4], clients[4], await client.get(MODELSERVINGS, "llm", namespace), seconds=seconds
            )
            ms_latency = [1000 * x for x in latencies]
            floors = ", ".join(f"{k} {report.fewest[k]}/min {report.minimum[k]}" for k in sorted(report.fewest))
            print(
                f"  {label:>14}: fewest ready {report.fewest_ready} (min {min(report.minimum.values())}); "
                f"{report.below} of {report.states} states below minAvailable"
                + (f" (first at {report.first_below:.1f} s)" if report.first_below is not None else "")
                + f"; {report.requests} evictions, {report.granted} granted "
                f"({report.granted / report.seconds:.1f}/s), {report.denied} denied, {report.not_found} not found, "
                f"{report.errors} errors; webhook p50 {pct(ms_latency, 0.5):.1f} ms, p99 {pct(ms_latency, 0.99):.1f} ms"
                + ("" if level == "ServingGroup" else f"; per budget: {floors}")
            )
            with contextlib.suppress(NotFound):
                await client.delete(VALIDATING_WEBHOOKS, config["metadata"]["name"])
    finally:
        for each in (client, *clients):
            await each.close()


async def storms(args: argparse.Namespace) -> None:
    print(
        f"eviction storm: 4 clients, {args.storm_seconds:.0f} s per run; ServingGroup level 3 groups "
        "(entry + worker) minAvailable 2; Role level 2 groups x 3 instances, roleMinAvailable 2"
    )
    nodes_ = [FakeNode(f"storm-{i}", gpus=0) for i in range(4)]
    with tempfile.TemporaryDirectory() as d, ClusterTier(d, nodes=nodes_, crds=crds()) as tier:
        await storm(tier, "off-group", "ServingGroup", False, args.storm_seconds)
        for run in range(args.storm_runs):
            await storm(tier, f"group-{run + 1}", "ServingGroup", True, args.storm_seconds)
        await storm(tier, "off-role", "Role", False, args.storm_seconds)
        for run in range(args.storm_runs):
            await storm(tier, f"role-{run + 1}", "Role", True, args.storm_seconds)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelservings", type=int, default=5)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--storm", action="store_true", help="run the eviction storm instead of the drains")
    ap.add_argument("--storm-runs", type=int, default=3)
    ap.add_argument("--storm-seconds", type=float, default=60.0)
    args = ap.parse_args()
    logconfig.configure("warning", json=False)
    if not crds():
        sys.exit("manifests/crd is empty: generate the CRDs first (kthena-py crds)")
    if args.storm:
        await storms(args)
        return
    print(
        f"{args.modelservings} ModelServings x {args.groups} groups (minAvailable 75%), "
        f"{args.nodes} nodes drained onto {args.nodes} spares"
    )
    with tempfile.TemporaryDirectory() as d, ClusterTier(d, nodes=0, crds=crds()) as tier:
        await scenario(tier, "off-1", "one", False, args)
        await scenario(tier, "one-drain", "one", True, args)
        await scenario(tier, "off-10", "many", False, args)
        await scenario(tier, "10-drains", "many", True, args)


if __name__ == "__main__":
    asyncio.run(main())
