"""Benchmark: time for the controller to converge a fleet of ModelServings (printed, never asserted).

In the cluster tier (kwok nodes, Volcano gang scheduling): N ModelServings x 2 groups x 2 roles x
(1 entry + 1 worker) — 800 pods, 400 headless Services and 200 PodGroups for N = 100 — and the time
until every ModelServing is Available. Baseline, in a fresh tier of the same shape: a plain script
that creates the very same objects (rendered by the same code, without owner references) with the
same client concurrency and waits for the same readiness (every pod Running and Ready). Then the
manager's RSS and CPU seconds at steady state, and the writes it makes in the 60 s after a restart.

Per run it also prints where the time and the work went, the same way for both sides: a timeline (p50
and max over ModelServings of when the first PodGroup, first and last pod appeared, the last pod was
bound and Ready, and the ModelServing was Available), CPU seconds per control-plane process, the API
server's requests by verb and resource, Events by source and reason, and the manager's own requests
and reconciles. On a 2-core machine every process competes for the same CPU, so these explain most of
the difference between the two sides.

Usage: python bench/converge.py [--modelservings N] [--workers W] [--after-restart SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import AlreadyExists, KubeClient
from kthena_py.kube.resources import CONTROLLER_REVISIONS, EVENTS, NAMESPACES, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.render import render
from kthena_py.testing.controlplane import ClusterTier

REPO = Path(__file__).resolve().parent.parent
CONNECTIONS = 100  # KubeClient's default connection pool size
KINDS = {"Pod": PODS, "Service": SERVICES, "PodGroup": PODGROUPS, "ControllerRevision": CONTROLLER_REVISIONS}


def modelserving(i: int) -> dict[str, Any]:
    def role(name: str) -> dict[str, Any]:
        c = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
        return {
            "name": name,
            "replicas": 1,
            "workerReplicas": 1,
            "entryTemplate": {"spec": {"containers": [c]}},
            "workerTemplate": {"spec": {"containers": [c]}},
        }

    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": f"ms-{i}", "namespace": "bench"},
        "spec": {"replicas": 2, "schedulerName": "volcano", "template": {"roles": [role("prefill"), role("decode")]}},
    }


def crds() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("KTHENA_PY_EXTRA_CRDS", "").split(os.pathsep) if p]
    return sorted((REPO / "manifests" / "crd").glob("workload.serving.volcano.sh_*.yaml")) + extra


async def all_pods_ready(client: KubeClient, expected: int) -> bool:
    items = (await client.list_all(PODS, "bench")).items
    ready = [
        p
        for p in items
        if (p.get("status") or {}).get("phase") == "Running"
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    ]
    return len(ready) >= expected


async def baseline(n: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as d, ClusterTier(d, nodes=10, crds=crds()) as tier:
        client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        try:
            await client.create(NAMESPACES, {"metadata": {"name": "bench"}})
            objects = [o for i in range(n) for o in render(modelserving(i))]
            for o in objects:
                o["metadata"].pop("ownerReferences", None)
            sem = asyncio.Semaphore(concurrency)

            async def create(o: dict[str, Any]) -> None:
                async with sem:
                    with contextlib.suppress(AlreadyExists):
                        await client.create(KINDS[o["kind"]], o, "bench")

            cpu_before = component_cpu(tier)
            api_before = apiserver_requests(tier)
            start = time.perf_counter()
            timeline = Timeline(client, start)
            timeline.begin()
            # The same order the controller obeys: PodGroups and revisions, then Services and pods.
            await asyncio.gather(*(create(o) for o in objects if o["kind"] in ("PodGroup", "ControllerRevision")))
            await asyncio.gather(*(create(o) for o in objects if o["kind"] in ("Service", "Pod")))
            expected = sum(1 for o in objects if o["kind"] == "Pod")
            while not await all_pods_ready(client, expected):
                await asyncio.sleep(0.5)
            elapsed = time.perf_counter() - start
            cpu = cpu_report(cpu_before, component_cpu(tier))
            print(f"    baseline timeline: {await timeline.stop()}")
            print(f"    baseline CPU: {cpu}")
            print(f"    baseline API requests: {requests_report(api_before, apiserver_requests(tier))}")
            print(f"    baseline events: {await event_report(client)}")
            return elapsed
        finally:
            await client.close()


class Timeline:
    """When each object was first seen, each pod bound and Ready, each ModelServing Available.

    Fed by watches in the benchmark process, so both sides are observed the same way; times are seconds
    after ``start``. Printed per run to show where the time goes: the p50 and max over ModelServings of
    the moment its first PodGroup, first pod and last pod appeared, its last pod was bound and Ready,
    and it was Available.
    """

    MILESTONES = ("podgroup", "first pod", "last pod", "last bound", "last ready", "available")

    def __init__(self, client: KubeClient, start: float) -> None:
        self.client = client
        self.start = start
        self.seen: dict[tuple[str, str, str], float] = {}
        self.tasks: list[asyncio.Task[None]] = []

    def begin(self) -> None:
        self.tasks = [asyncio.create_task(self._follow(rt)) for rt in (PODS, PODGROUPS, MODELSERVINGS)]

    def _mark(self, what: str, name: str) -> None:
        self.seen.setdefault((what, "", name), time.perf_counter() - self.start)

    async def _follow(self, rt: Any) -> None:
        try:
            async for ev in self.client.watch(rt, "bench", resource_version="0", allow_bookmarks=False):
                obj = ev.object
                name = obj["metadata"]["name"]
                status = obj.get("status") or {}
                conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
                if rt is PODS:
                    self._mark("pod", name)
                    if (obj.get("spec") or {}).get("nodeName"):
                        self._mark("bound", name)
                    if status.get("phase") == "Running" and conditions.get("Ready") == "True":
                        self._mark("ready", name)
                elif rt is PODGROUPS:
                    self._mark("podgroup", name)
                elif conditions.get("Available") == "True":
                    self._mark("available", name)
        except Exception as exc:  # a broken watch only loses timeline detail
            print(f"    timeline watch of {rt.plural} ended: {type(exc).__name__}: {exc}")
        else:
            print(f"    timeline watch of {rt.plural} closed by the server")

    async def stop(self) -> str:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        per_ms: dict[str, dict[str, list[float]]] = {}
        for (what, _, name), t in self.seen.items():
            ms = "-".join(name.split("-")[:2])  # ms-<i>-...
            per_ms.setdefault(ms, {}).setdefault(what, []).append(t)
        milestones: dict[str, list[float]] = {m: [] for m in self.MILESTONES}
        for times in per_ms.values():
            for label, what, pick in (
                ("podgroup", "podgroup", min),
                ("first pod", "pod", min),
                ("last pod", "pod", max),
                ("last bound", "bound", max),
                ("last ready", "ready", max),
                ("available", "available", min),
            ):
                if times.get(what):
                    milestones[label].append(pick(times[what]))
        parts = []
        for label, xs in milestones.items():
            if xs:
                xs.sort()
                parts.append(f"{label} {xs[len(xs) // 2]:.1f}/{xs[-1]:.1f}")
        return "p50/max s: " + ", ".join(parts)


def proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a process."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss_kb / 1024, (int(fields[11]) + int(fields[12])) / ticks


def component_cpu(tier: ClusterTier, manager_pid: int | None = None) -> dict[str, float]:
    """CPU seconds used so far by each control-plane process, the manager and this benchmark."""
    pids = {p.name: p.pid for p in tier.processes if p.pid}
    if manager_pid:
        pids["manager"] = manager_pid
    cpu = {name: proc_stats(pid)[1] for name, pid in pids.items()}
    cpu["bench"] = proc_stats(os.getpid())[1]
    return cpu


def cpu_report(before: dict[str, float], after: dict[str, float]) -> str:
    used = {name: after[name] - before.get(name, 0.0) for name in after}
    parts = [f"{name} {s:.1f}" for name, s in sorted(used.items(), key=lambda kv: -kv[1])]
    return f"total {sum(used.values()):.1f} s: " + ", ".join(parts)


def apiserver_requests(tier: ClusterTier) -> dict[str, float]:
    """The API server's request counts so far, by ``verb resource[/subresource]``."""
    _, text = tier.client.raw("GET", "/metrics")
    counts: dict[str, float] = {}
    for line in str(text).splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].replace('"', "").split(",")
        )
        key = f"{labels.get('verb')} {labels.get('resource')}" + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def requests_report(before: dict[str, float], after: dict[str, float]) -> str:
    diff = {k: v - before.get(k, 0.0) for k, v in after.items()}
    top = sorted(((v, k) for k, v in diff.items() if v >= 20), reverse=True)
    return ", ".join(f"{k} {v:.0f}" for v, k in top)


async def event_report(client: KubeClient) -> str:
    """Events in the benchmark namespace, by source component and reason."""
    counts: dict[str, int] = {}
    for e in (await client.list_all(EVENTS, "bench")).items:
        key = f"{(e.get('source') or {}).get('component') or e.get('reportingComponent')}/{e.get('reason')}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def manager_counter(metrics_port: int, metric: str, label: str) -> dict[str, float]:
    """A counter of the manager's ``/metrics`` summed by one label (e.g. requests by ``method``)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    totals: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith(metric + "{"):
            value = line.split(f'{label}="', 1)[1].split('"', 1)[0]
            totals[value] = totals.get(value, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def requests_made(metrics_port: int) -> dict[str, float]:
    """The manager's API requests so far, by HTTP method."""
    return manager_counter(metrics_port, "rest_client_requests_total", "method")


def reconciles_made(metrics_port: int) -> dict[str, float]:
    """The manager's reconciles so far, by controller."""
    return manager_counter(metrics_port, "controller_runtime_reconcile_total", "controller")


def writes_made(metrics_port: int) -> float:
    return sum(n for m, n in requests_made(metrics_port).items() if m in ("POST", "PUT", "PATCH", "DELETE"))


def start_manager(kubeconfig: Path, workers: int, port: int, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kthena_py",
            "manager",
            "--kubeconfig",
            str(kubeconfig),
            "--workers",
            str(workers),
            "--metrics-bind-address",
            f"127.0.0.1:{port}",
            "--health-probe-bind-address",
            "0",
            "--webhook-port",
            "0",
            "--log-level",
            "warning",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def controller(n: int, workers: int, after_restart: float) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory() as d, ClusterTier(d, nodes=10, crds=crds()) as tier:
        client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        port = 18390
        manager = start_manager(tier.kubeconfig_path, workers, port, Path(d) / "manager.log")
        try:
            await client.create(NAMESPACES, {"metadata": {"name": "bench"}})
            await asyncio.sleep(3)  # manager start-up (informers synced) is not part of the measure
            cpu_before = component_cpu(tier, manager.pid)
            api_before = apiserver_requests(tier)
            start = time.perf_counter()
            timeline = Timeline(client, start)
            timeline.begin()
            sem = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with sem:
                    await client.create(MODELSERVINGS, modelserving(i), "bench")

            await asyncio.gather(*(create(i) for i in range(n)))
            while True:
                items = (await client.list_all(MODELSERVINGS, "bench")).items
                done = [
                    m
                    for m in items
                    if any(
                        c["type"] == "Available" and c["status"] == "True"
                        for c in (m.get("status") or {}).get("conditions") or []
                    )
                ]
                if len(done) == n:
                    break
                await asyncio.sleep(0.5)
            elapsed = time.perf_counter() - start
            cpu = cpu_report(cpu_before, component_cpu(tier, manager.pid))
            print(f"    controller timeline: {await timeline.stop()}")
            print(f"    controller CPU: {cpu}")
            print(f"    controller API requests: {requests_report(api_before, apiserver_requests(tier))}")
            print(f"    controller events: {await event_report(client)}")
            made = ", ".join(f"{m} {n:.0f}" for m, n in sorted(requests_made(port).items()))
            print(f"    manager requests until Available: {made}")
            done = ", ".join(f"{c} {n:.0f}" for c, n in sorted(reconciles_made(port).items()) if n)
            print(f"    manager reconciles until Available: {done}")
            await asyncio.sleep(5)
            rss, cpu = proc_stats(manager.pid)
            manager.send_signal(signal.SIGTERM)
            manager.wait(30)
            manager = start_manager(tier.kubeconfig_path, workers, port, Path(d) / "manager.log")
            await asyncio.sleep(after_restart)
            writes = writes_made(port)
            return elapsed, rss, cpu, writes
        finally:
            manager.send_signal(signal.SIGTERM)
            manager.wait(30)
            await client.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelservings", type=int, default=100)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--after-restart", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=3, help="paired runs; medians are compared")
    args = ap.parse_args()
    if not crds():
        sys.exit("manifests/crd is empty: generate the CRDs first (kthena-py crds)")
    n = args.modelservings
    print(f"{n} ModelServings = {n * 8} pods, {n * 4} Services, {n * 2} PodGroups; {args.workers} workers")
    bases: list[float] = []
    ours: list[float] = []
    stats: list[tuple[float, float, float]] = []
    for i in range(args.repeat):
        # The same client concurrency: both sides go through one KubeClient whose connection pool holds
        # CONNECTIONS connections; the controller's workers and per-reconcile fan-out share that pool.
        bases.append(await baseline(n, concurrency=CONNECTIONS))
        elapsed, rss, cpu, writes = await controller(n, args.workers, args.after_restart if i == 0 else 5.0)
        ours.append(elapsed)
        stats.append((rss, cpu, writes))
        ratio = ours[-1] / bases[-1]
        print(f"  run {i + 1}: baseline {bases[-1]:6.1f} s, controller {ours[-1]:6.1f} s, ratio {ratio:.2f}")

    def mmm(xs: list[float]) -> str:
        return f"min {min(xs):6.1f}  median {statistics.median(xs):6.1f}  max {max(xs):6.1f} s"

    ratio = statistics.median(ours) / statistics.median(bases)
    print(f"  baseline (direct creates, same concurrency): {mmm(bases)}")
    print(f"  kthena-py controller                       : {mmm(ours)}")
    print(f"  ratio of medians: {ratio:.2f} (target <= 1.25)")
    paired = [o / b for o, b in zip(ours, bases, strict=True)]
    shown = " ".join(f"{r:.2f}" for r in paired)
    print(f"  paired ratios (run by run): {shown}; median {statistics.median(paired):.2f}")
    rss, cpu, writes = stats[0]
    print(f"  manager at steady state (run 1): RSS {rss:.0f} MiB, CPU {cpu:.1f} s")
    print(f"  writes in the {args.after_restart:.0f} s after a restart (run 1): {writes:.0f} (target 0)")


if __name__ == "__main__":
    asyncio.run(main())
