"""Benchmark: work-queue throughput and informer memory per cached pod (printed, never asserted).

1. Queue: 100,000 distinct keys added, then drained by 8 async workers calling get/done, with
   client-go semantics (dedup, per-key exclusivity) vs. a plain ``asyncio.Queue`` baseline doing the
   same add/get/task_done work in the same run.
2. Informer memory: 10,000 pods created in a fresh envtest tier, listed into an informer with the
   default transform (drops managedFields) and without it; bytes per cached pod measured with
   tracemalloc. Skip with ``--no-informer``.

Usage: python bench/workqueue.py [--keys N] [--workers W] [--pods N] [--no-informer]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
import tracemalloc

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import NAMESPACES, PODS
from kthena_py.runtime.informer import Informer
from kthena_py.runtime.workqueue import RateLimitingQueue, ShutDown


async def bench_queue(keys: int, workers: int) -> float:
    q: RateLimitingQueue[str] = RateLimitingQueue(name="bench")
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            try:
                k = await q.get()
            except ShutDown:
                return
            processed += 1
            q.done(k)

    start = time.perf_counter()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    for i in range(keys):
        q.add(f"ns/key-{i}")
        if i % 1000 == 0:
            await asyncio.sleep(0)
    await q.shutdown_with_drain()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    assert processed == keys, processed
    return keys / elapsed


async def bench_asyncio_queue(keys: int, workers: int) -> float:
    q: asyncio.Queue[str] = asyncio.Queue()
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            k = await q.get()
            processed += 1
            q.task_done()
            del k

    start = time.perf_counter()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    for i in range(keys):
        q.put_nowait(f"ns/key-{i}")
        if i % 1000 == 0:
            await asyncio.sleep(0)
    await q.join()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = time.perf_counter() - start
    assert processed == keys
    return keys / elapsed


def pod(i: int) -> dict[str, object]:
    return {
        "metadata": {
            "name": f"bench-{i}",
            "labels": {
                "modelserving.volcano.sh/name": "bench",
                "modelserving.volcano.sh/group-name": f"bench-{i // 4}",
                "modelserving.volcano.sh/role": "decode",
                "modelserving.volcano.sh/role-id": f"decode-{i % 4}",
            },
            "annotations": {"scheduling.k8s.io/group-name": f"bench-{i // 4}"},
        },
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": "vllm/vllm-openai:v0.11.0",
                    "env": [{"name": "GROUP_SIZE", "value": "2"}, {"name": "WORKER_INDEX", "value": "0"}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ]
        },
    }


async def measure_informer(client: KubeClient, namespace: str, transform: bool) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kwargs = {} if transform else {"transform": None}
    inf = Informer(client, PODS, namespace=namespace, **kwargs)  # type: ignore[arg-type]
    task = asyncio.create_task(inf.run())
    await inf.wait_for_sync()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    n = len(inf.store)
    return (after - before) / max(n, 1)


async def bench_informer(pods: int) -> tuple[float, float]:
    from kthena_py.testing.controlplane import EnvTest

    with tempfile.TemporaryDirectory() as d, EnvTest(d) as env:
        client = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        try:
            await client.create(NAMESPACES, {"metadata": {"name": "bench"}})
            sem = asyncio.Semaphore(32)

            async def create(i: int) -> None:
                async with sem:
                    await client.create(PODS, pod(i), "bench")

            t0 = time.perf_counter()
            await asyncio.gather(*(create(i) for i in range(pods)))
            print(f"created {pods} pods in {time.perf_counter() - t0:.1f}s")
            with_t = await measure_informer(client, "bench", transform=True)
            without_t = await measure_informer(client, "bench", transform=False)
            return with_t, without_t
        finally:
            await client.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--no-informer", action="store_true")
    args = ap.parse_args()

    base = await bench_asyncio_queue(args.keys, args.workers)
    ours = await bench_queue(args.keys, args.workers)
    print(f"queue: {args.keys} keys, {args.workers} workers")
    print(f"  baseline asyncio.Queue : {base:12,.0f} items/s")
    print(f"  RateLimitingQueue      : {ours:12,.0f} items/s  (ratio to baseline {ours / base:.2f})")
    if not args.no_informer:
        with_t, without_t = await bench_informer(args.pods)
        print(f"informer: {args.pods} pods in the envtest tier")
        print(f"  without transform      : {without_t:10,.0f} bytes/pod")
        print(f"  with managedFields drop: {with_t:10,.0f} bytes/pod  (ratio {with_t / without_t:.2f})")


if __name__ == "__main__":
    asyncio.run(main())
