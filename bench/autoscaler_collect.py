"""Benchmark: scraping the /metrics of N pods for one autoscaling pass (printed, never asserted).

A child process serves a vLLM-like ``/metrics`` page (gauges, counters and histograms, ~``--lines`` lines) on
``--pods`` loopback addresses (127.0.x.y, one aiohttp site each, one port), ``--slow`` of which never answer.
The parent then collects one metric from all of them, three ways:

1. **sequential**: Kthena's loop, one pod after the other, each with a 3 s timeout, parsing the whole page (and
   once more with our pre-parse filter, to separate the two effects);
2. **ours**: :func:`kthena_py.controllers.autoscaling.collector.collect` (bounded concurrency, 3 s per pod,
   the page filtered down to the requested family before parsing), first pass (new connections) and second pass
   (kept-alive connections);
3. the same with ``--concurrency`` 8 and 128, to show the effect of the bound.

Usage: python bench/autoscaler_collect.py [--pods 500] [--slow 5] [--lines 400] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import time
from typing import Any

import aiohttp
from aiohttp import web

from kthena_py.api.autoscaling import MetricSource
from kthena_py.controllers.autoscaling.collector import Backend, PodScraper, collect, filter_exposition
from kthena_py.plan.autoscaling import MetricTarget, parse_exposition

FAMILY = "vllm:num_requests_waiting"


def page(lines: int) -> str:
    """A vLLM-like exposition of about ``lines`` lines, with the autoscaling metric somewhere in the middle."""
    out = []
    buckets = ("0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")
    i = 0
    while len(out) < lines:
        name = f"vllm:latency_{i}_seconds"
        out.append(f"# HELP {name} Latency.")
        out.append(f"# TYPE {name} histogram")
        for j, le in enumerate(buckets):
            out.append(f'{name}_bucket{{le="{le}",model_name="llama-3-8b"}} {j * 10 + i}')
        out.append(f'{name}_sum{{model_name="llama-3-8b"}} {i * 3.5}')
        out.append(f'{name}_count{{model_name="llama-3-8b"}} {100 + i}')
        out.append(f"# TYPE vllm:tokens_{i} counter")
        out.append(f'vllm:tokens_{i}_total{{model_name="llama-3-8b"}} {i * 1000}')
        if i == 3:
            out.append(f"# HELP {FAMILY} Number of requests waiting to be processed.")
            out.append(f"# TYPE {FAMILY} gauge")
            out.append(f'{FAMILY}{{model_name="llama-3-8b"}} 4.0')
        i += 1
    return "\n".join(out) + "\n"


def addresses(count: int) -> list[str]:
    return [f"127.0.{10 + i // 250}.{1 + i % 250}" for i in range(count)]


def serve(ips: list[str], slow: set[str], port: int, lines: int, ready: Any) -> None:
    async def main() -> None:
        body = page(lines)
        never = asyncio.Event()

        async def handle(request: web.Request) -> web.Response:
            ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
            if ip in slow:
                await never.wait()
            return web.Response(text=body, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for ip in ips:
            await web.TCPSite(runner, ip, port, backlog=1024).start()
        ready.set()
        await never.wait()

    asyncio.run(main())


def pods(ips: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {
                "name": f"p{i}",
                "namespace": "bench",
                "uid": f"uid-{i}",
                "labels": {
                    "modelserving.volcano.sh/name": "ms",
                    "modelserving.volcano.sh/entry": "true",
                    "modelserving.volcano.sh/group-name": f"ms-{i}",
                },
            },
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for i, ip in enumerate(ips)
    ]


async def sequential(ips: list[str], port: int, timeout: float, filtered: bool) -> tuple[float, int, int]:
    started = time.perf_counter()
    ok = failed = 0
    async with aiohttp.ClientSession(trust_env=False) as session:
        for ip in ips:
            try:
                async with asyncio.timeout(timeout), session.get(f"http://{ip}:{port}/metrics") as resp:
                    text = await resp.text()
                parse_exposition(filter_exposition(text, [FAMILY]) if filtered else text, [FAMILY])
                ok += 1
            except (TimeoutError, aiohttp.ClientError):
                failed += 1
    return time.perf_counter() - started, ok, failed


async def ours(ips: list[str], port: int, concurrency: int, passes: int = 2) -> list[tuple[float, int, int]]:
    scraper = PodScraper(timeout=3.0, concurrency=concurrency)
    source = MetricSource.model_validate({"pod": {"name": FAMILY, "port": port}})
    backend = Backend("bench", "ms", None, len(ips), pods(ips), {"waiting": source})
    results = []
    memory: dict[Any, Any] = {}
    try:
        for _ in range(passes):
            started = time.perf_counter()
            collection = await collect(scraper, [backend], [MetricTarget("waiting", 1)], memory, deadline=60)
            memory = collection.memory
            sample = collection.samples["waiting"]
            reporting = getattr(sample, "reporting", 0)
            results.append((time.perf_counter() - started, reporting, collection.pod_errors))
    finally:
        await scraper.close()
    return results


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--slow", type=int, default=5, help="pods that never answer")
    parser.add_argument("--lines", type=int, default=400, help="lines per /metrics page")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    ips = addresses(args.pods)
    slow = set(ips[:: max(1, args.pods // args.slow)][: args.slow]) if args.slow else set()
    port = free_port(ips[0])
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(ips, slow, port, args.lines, ready), daemon=True)
    server.start()
    if not ready.wait(120):
        raise SystemExit("the servers did not start")
    body = page(args.lines)
    print(
        f"{args.pods} pods on loopback ({len(slow)} never answer), /metrics page {len(body)} bytes, per-pod timeout 3 s"
    )
    print(f"{'method':<34} {'seconds':>8} {'ms/pod':>8} {'ok':>5} {'failed':>6}")

    def row(label: str, seconds: float, ok: int, failed: int) -> None:
        print(f"{label:<34} {seconds:8.2f} {seconds * 1000 / args.pods:8.2f} {ok:5d} {failed:6d}")

    try:
        seconds, ok, failed = asyncio.run(sequential(ips, port, 3.0, filtered=False))
        row("sequential (Kthena), full parse", seconds, ok, failed)
        seconds, ok, failed = asyncio.run(sequential(ips, port, 3.0, filtered=True))
        row("sequential, filtered parse", seconds, ok, failed)
        for concurrency in sorted({8, args.concurrency, 128}):
            results = asyncio.run(ours(ips, port, concurrency))
            for index, (seconds, ok, failed) in enumerate(results):
                row(f"ours, concurrency {concurrency}, pass {index + 1}", seconds, ok, failed)
    finally:
        server.terminate()
        server.join(10)


if __name__ == "__main__":
    main()
