"""Benchmark: what the activator adds to a streamed completion (printed, never asserted).

Three paths to the same loopback streaming engine (aiohttp, Server-Sent Events: ``--chunks`` ``data:`` chunks per
completion, written one by one without delay, so every millisecond measured is transport and proxy):

* **direct**: the client talks to the engine;
* **activator**: the real ``kthena-py activator`` process (``--listen 127.0.0.1:PORT``), which resolves the model
  to a ModelServing and forwards to its Ready entry pod;
* **go**: a minimal Go reverse proxy (the standard library's ``net/http/httputil.ReverseProxy``, flushing every
  write), written and built by this script into a temporary directory with the local Go toolchain
  (``GOFLAGS=-mod=mod``, no external module, no network).

The activator's kube API is a real one: etcd + kube-apiserver from :mod:`kthena_py.testing.controlplane` (the
envtest tier) holding a ModelServing and a Ready entry pod object whose IP is 127.100.0.1, where the engine listens.
No kubelet runs: the script writes the pod's status itself.

For 1, 50 and 200 concurrent streams (closed loop: each stream sends its next request when the last one ended)
it prints p50/p99 latency (request to last byte) and time to first token (request to first chunk), requests/s,
and what the activator and the Go proxy add to the direct path, with the ratios activator/direct and
activator/go. Then the cold start: a request for a ModelServing at zero is held (the activator writes 0 -> 1), the
script creates the pod and marks it Ready at ``t`` (just before the status write), and measures the first byte at
the client minus ``t`` (API write, watch event, informer, forward, engine, first chunk back). Finally the
activator's RSS (current and peak).

The client is Python (aiohttp) on the same 2 cores as the proxies and the engine: at 200 streams every path is
CPU-bound, so the figures there compare throughput under saturation more than a proxy's own latency.

Usage: python bench/activator_overhead.py [--duration 3] [--streams 1,50,200] [--chunks 8] [--cold-runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
ENGINE_IP = "127.100.0.1"
NAMESPACE = "bench"
WARM = "warm"
COLD = "cold"
GO_PROXY = """\
package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	target, err := url.Parse(os.Args[1])
	if err != nil {
		panic(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	proxy.Transport = &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	panic(http.Serve(listener, proxy))
}
"""


# -- the engine (a child process) ----------------------------------------------------------------------------


def serve_engine(chunks: int) -> None:
    """Run the streaming engine on ENGINE_IP, print its port, serve until killed."""

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for i in range(chunks):
            await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"tok%d"}}]}\n\n' % i)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, ENGINE_IP, 0, backlog=1024)
        await site.start()
        print(site._server.sockets[0].getsockname()[1], flush=True)  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(main())


# -- processes -----------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_printing_port(args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    """Start a child that prints its port on the first line of stdout."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip():
        raise RuntimeError(f"{args[0]} did not start (exit {proc.poll()})")
    return proc, int(line)


def build_go_proxy(workdir: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("the Go toolchain (go) is not on PATH")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text("module benchproxy\n\ngo 1.21\n")
    (workdir / "main.go").write_text(GO_PROXY)
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", "proxy", "."], cwd=workdir, env=env, check=True, timeout=300)
    return workdir / "proxy"


def spawn_activator(kubeconfig: Path, port: int, health: int) -> subprocess.Popen[str]:
    """The real ``kthena-py activator`` process, watching the bench namespace."""
    args = [
        sys.executable,
        "-m",
        "kthena_py.main",
        "activator",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={NAMESPACE}",
        f"--listen=127.0.0.1:{port}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        "--log-level=warning",
        "--log-format=json",
    ]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Vm")
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the cluster objects -------------------------------------------------------------------------------------


def modelserving(name: str, replicas: int, engine_port: int) -> dict[str, Any]:
    from kthena_py.vocab.labels import ACTIVATOR_HOLD_BUDGET, ACTIVATOR_PORT, ACTIVATOR_SCALE_FROM_ZERO

    container = {"name": "engine", "image": "engine:1"}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {
            "name": name,
            "annotations": {
                ACTIVATOR_PORT: str(engine_port),
                ACTIVATOR_SCALE_FROM_ZERO: "true",
                ACTIVATOR_HOLD_BUDGET: "30s",
            },
        },
        "spec": {
            "replicas": replicas,
            "template": {
                "roles": [
                    {
                        "name": "main",
                        "replicas": 1,
                        "workerReplicas": 0,
                        "entryTemplate": {"spec": {"containers": [container]}},
                    }
                ]
            },
        },
    }


def entry_pod(serving: str, name: str) -> dict[str, Any]:
    from kthena_py.vocab.labels import ENTRY_VALUE, SERVING_ENTRY, SERVING_NAME

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {SERVING_NAME: serving, SERVING_ENTRY: ENTRY_VALUE}},
        "spec": {"nodeName": "bench-node", "containers": [{"name": "engine", "image": "engine:1"}]},
    }


READY_STATUS = {
    "status": {
        "phase": "Running",
        "podIP": ENGINE_IP,
        "podIPs": [{"ip": ENGINE_IP}],
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
    }
}


# -- the client ----------------------------------------------------------------------------------------------


@dataclass
class Run:
    ttft: list[float]
    latency: list[float]
    errors: int
    seconds: float
    first_error: str = ""

    @property
    def rps(self) -> float:
        return len(self.latency) / self.seconds


async def one(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}")
        async for _ in resp.content.iter_any():
            if first is None:
                first = time.perf_counter()
    ended = time.perf_counter()
    return (first or ended) - started, ended - started


async def load(url: str, streams: int, duration: float, warmup: float) -> Run:
    body = json.dumps({"model": WARM, "stream": True, "messages": [{"role": "user", "content": "hello"}]}).encode()
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    run = Run([], [], 0, duration)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        begin = time.perf_counter()
        measure_from = begin + warmup
        end = measure_from + duration

        async def worker() -> None:
            while time.perf_counter() < end:
                try:
                    ttft, latency = await one(session, url, body)
                except (aiohttp.ClientError, RuntimeError) as err:
                    run.errors += 1
                    run.first_error = run.first_error or f"{type(err).__name__}: {err}"
                    continue
                if time.perf_counter() >= measure_from:
                    run.ttft.append(ttft)
                    run.latency.append(latency)

        await asyncio.gather(*(worker() for _ in range(streams)))
    return run


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the benchmark -------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def control_plane(workdir: Path, engine_port: int) -> AsyncIterator[tuple[Path, Any]]:
    from kthena_py.api.crdgen import build_crds
    from kthena_py.controllers.resources import MODELSERVINGS
    from kthena_py.kube import KubeClient
    from kthena_py.kube.resources import NAMESPACES, PODS
    from kthena_py.testing.controlplane import EnvTest

    with EnvTest(workdir / "envtest", crds=list(build_crds().values())) as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        try:
            await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await kube.create(MODELSERVINGS, modelserving(WARM, 1, engine_port), NAMESPACE)
            await kube.create(MODELSERVINGS, modelserving(COLD, 0, engine_port), NAMESPACE)
            await kube.create(PODS, entry_pod(WARM, "warm-0"), NAMESPACE)
            await kube.patch(PODS, "warm-0", READY_STATUS, NAMESPACE, subresource="status")
            yield env.kubeconfig_path, kube
        finally:
            await kube.close()


async def wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(trust_env=False) as session:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout:g}s")


async def held_call(session: aiohttp.ClientSession, url: str, body: bytes, first_byte: asyncio.Future[float]) -> None:
    """Send one streamed request; resolve ``first_byte`` with the time its first chunk arrived."""
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        async for _ in resp.content.iter_any():
            if not first_byte.done():
                first_byte.set_result(time.monotonic())
        if resp.status != 200:
            raise RuntimeError(f"cold start answered HTTP {resp.status}")


async def cold_start(kube: Any, url: str, runs: int) -> list[float]:
    """Request to first byte minus the moment the pod is marked Ready, ``runs`` times."""
    from kthena_py.controllers.resources import MODELSERVINGS
    from kthena_py.kube.resources import PODS

    body = json.dumps({"model": COLD, "stream": True, "messages": [{"role": "user", "content": "wake"}]}).encode()
    results: list[float] = []
    async with aiohttp.ClientSession(trust_env=False) as session:
        for i in range(runs):
            first_byte: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(held_call(session, url, body, first_byte))
            await asyncio.sleep(0.5)  # held: no Ready pod; the activator writes 0 -> 1
            if task.done():
                task.result()
                raise RuntimeError("the cold request was answered before a pod existed")
            name = f"cold-{i}"
            await kube.create(PODS, entry_pod(COLD, name), NAMESPACE)
            ready_at = time.monotonic()
            await kube.patch(PODS, name, READY_STATUS, NAMESPACE, subresource="status")
            results.append(await asyncio.wait_for(first_byte, 30) - ready_at)
            await task
            await kube.delete(PODS, name, NAMESPACE, grace_period_seconds=0)
            await kube.patch(MODELSERVINGS, COLD, {"spec": {"replicas": 0}}, NAMESPACE)
            await asyncio.sleep(0.3)
    return results


def ms(value: float) -> str:
    return f"{value * 1000:.2f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


async def bench(args: argparse.Namespace) -> None:
    levels = [int(s) for s in args.streams.split(",")]
    with tempfile.TemporaryDirectory(prefix="activator-bench-") as tmp:
        workdir = Path(tmp)
        started = time.monotonic()
        go_binary = build_go_proxy(workdir / "go")
        build_seconds = time.monotonic() - started
        engine, engine_port = start_printing_port(
            [sys.executable, __file__, "--role", "engine", "--chunks", str(args.chunks)]
        )
        go_proxy, go_port = start_printing_port([str(go_binary), f"http://{ENGINE_IP}:{engine_port}"])
        activator: subprocess.Popen[str] | None = None
        try:
            async with control_plane(workdir, engine_port) as (kubeconfig, kube):
                port, health = free_port(), free_port()
                activator = spawn_activator(kubeconfig, port, health)
                await wait_ready(f"http://127.0.0.1:{health}/readyz")
                idle_rss, _ = rss_kib(activator.pid)
                paths = {
                    "direct": f"http://{ENGINE_IP}:{engine_port}/v1/chat/completions",
                    "activator": f"http://127.0.0.1:{port}/v1/chat/completions",
                    "go": f"http://127.0.0.1:{go_port}/v1/chat/completions",
                }
                results: dict[tuple[str, int], Run] = {}
                for streams in levels:
                    for name, url in paths.items():
                        results[(name, streams)] = await load(url, streams, args.duration, args.warmup)
                cold = await cold_start(kube, paths["activator"], args.cold_runs)
                rss, peak = rss_kib(activator.pid)
        finally:
            if activator is not None:
                stop(activator)
            stop(go_proxy)
            stop(engine)

    print(
        f"activator overhead: {args.chunks} SSE chunks per completion, {args.duration:g}s per cell "
        f"(+{args.warmup:g}s warm-up), 2-core machine, Python client; Go proxy built in {build_seconds:.1f}s"
    )
    print()
    header = (
        f"{'streams':>7} {'path':<10} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'ttft50':>8} {'ttft99':>8} "
        f"{'+p50':>7} {'+p99':>7} {'+ttft50':>8} {'err':>4}"
    )
    print(header)
    print("-" * len(header))
    for streams in levels:
        direct = results[("direct", streams)]
        for name in paths:
            run = results[(name, streams)]
            added = (
                ("", "", "")
                if name == "direct"
                else (
                    ms(pct(run.latency, 0.5) - pct(direct.latency, 0.5)),
                    ms(pct(run.latency, 0.99) - pct(direct.latency, 0.99)),
                    ms(pct(run.ttft, 0.5) - pct(direct.ttft, 0.5)),
                )
            )
            print(
                f"{streams:>7} {name:<10} {run.rps:>8.0f} {ms(pct(run.latency, 0.5)):>8} "
                f"{ms(pct(run.latency, 0.99)):>8} {ms(pct(run.ttft, 0.5)):>8} {ms(pct(run.ttft, 0.99)):>8} "
                f"{added[0]:>7} {added[1]:>7} {added[2]:>8} {run.errors:>4}"
            )
    for (name, streams), run in results.items():
        if run.errors:
            print(f"  {name} at {streams} streams: {run.errors} errors, the first: {run.first_error}")
    print()
    print("ratios (activator/direct, activator/go):")
    for streams in levels:
        a, d, g = (results[(n, streams)] for n in ("activator", "direct", "go"))
        print(
            f"  {streams:>3} streams: p50 {ratio(pct(a.latency, 0.5), pct(d.latency, 0.5))} / "
            f"{ratio(pct(a.latency, 0.5), pct(g.latency, 0.5))}, p99 "
            f"{ratio(pct(a.latency, 0.99), pct(d.latency, 0.99))} / "
            f"{ratio(pct(a.latency, 0.99), pct(g.latency, 0.99))}, "
            f"req/s {ratio(a.rps, d.rps)} / {ratio(a.rps, g.rps)}"
        )
    print()
    print(
        f"cold start (first byte minus Ready at t, {len(cold)} runs): median {ms(statistics.median(cold))} ms, "
        f"max {ms(max(cold))} ms"
    )
    print(
        f"activator RSS: {idle_rss / 1024:.1f} MiB idle, {rss / 1024:.1f} MiB after the run, peak {peak / 1024:.1f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per (path, streams) cell")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each cell")
    parser.add_argument("--streams", default="1,50,200", help="concurrent streams, comma-separated")
    parser.add_argument("--chunks", type=int, default=8, help="SSE chunks per completion")
    parser.add_argument("--cold-runs", type=int, default=5, help="cold starts measured")
    parser.add_argument("--role", choices=("bench", "engine"), default="bench", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "engine":
        serve_engine(args.chunks)
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
