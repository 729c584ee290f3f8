"""Benchmark: time for the controller to converge a fleet of ModelServings (printed, never asserted).

In the cluster tier (kwok nodes, Volcano gang scheduling): N ModelServings x 2 groups x 2 roles x
(1 entry + 1 worker) — 800 pods, 400 headless Services and 200 PodGroups for N = 100 — and the time
until every ModelServing is Available. Baseline, in a fresh tier of the same shape: a plain script
that creates the very same objects (rendered by the same code, without owner references) with the
same client concurrency and waits for the same readiness (every pod Running and Ready). Then the
manager's RSS and CPU seconds at steady state, and the writes it makes in the 60 s after a restart.

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
from kthena_py.kube.resources import CONTROLLER_REVISIONS, NAMESPACES, PODGROUPS, PODS, SERVICES
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

            start = time.perf_counter()
            # The same order the controller obeys: PodGroups and revisions, then Services and pods.
            await asyncio.gather(*(create(o) for o in objects if o["kind"] in ("PodGroup", "ControllerRevision")))
            await asyncio.gather(*(create(o) for o in objects if o["kind"] in ("Service", "Pod")))
            expected = sum(1 for o in objects if o["kind"] == "Pod")
            while not await all_pods_ready(client, expected):
                await asyncio.sleep(0.5)
            return time.perf_counter() - start
        finally:
            await client.close()


def proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a process."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss_kb / 1024, (int(fields[11]) + int(fields[12])) / ticks


def writes_made(metrics_port: int) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith("rest_client_requests_total{") and any(
            f'method="{m}"' in line for m in ("POST", "PUT", "PATCH", "DELETE")
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


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
            start = time.perf_counter()
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
        print(f"  run {i + 1}: baseline {bases[-1]:6.1f} s, controller {ours[-1]:6.1f} s")

    def mmm(xs: list[float]) -> str:
        return f"min {min(xs):6.1f}  median {statistics.median(xs):6.1f}  max {max(xs):6.1f} s"

    ratio = statistics.median(ours) / statistics.median(bases)
    print(f"  baseline (direct creates, same concurrency): {mmm(bases)}")
    print(f"  kthena-py controller                       : {mmm(ours)}")
    print(f"  ratio of medians: {ratio:.2f} (target <= 1.25)")
    rss, cpu, writes = stats[0]
    print(f"  manager at steady state (run 1): RSS {rss:.0f} MiB, CPU {cpu:.1f} s")
    print(f"  writes in the {args.after_restart:.0f} s after a restart (run 1): {writes:.0f} (target 0)")


if __name__ == "__main__":
    asyncio.run(main())
