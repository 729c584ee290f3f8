"""Benchmark: ``kthena-py download`` (sha256 verified while streaming) against ``curl`` on the same files.

A model of ``--files`` random files of ``--mib`` MiB each (default 4 x 512 MiB = 2 GiB) is written to a temporary
directory and served by the loopback artifact server as LFS files of a fake Hugging Face repository (files on
disk go out by ``sendfile``, so the server is not what is measured). ``curl`` fetches the same resolve URLs
with the same parallelism (``--parallel --parallel-max W``) into a directory next to ours (same filesystem);
``kthena-py download hf://bench/model -w W`` fetches them with every file's LFS sha256 checked (while
streaming) and each file fsynced before it is renamed, then runs again on the complete directory (the cached
run). ``sync FILE...`` then fsyncs curl's files, timed apart, to show what the same durability costs curl.
The pair runs ``--rounds`` times (default 2) and the best time of each tool is compared, so a burst of
load on a shared machine does not decide the ratio. Ours is timed as a whole process (interpreter start,
imports and the hub listing included), as curl is. Prints throughputs, the CPU seconds (user+system) each
tool used, the ratio ours/curl (target >= 0.9) and the cached run's time; nothing is asserted. Everything is
deleted at the end.

Usage: python bench/download_throughput.py [--files N] [--mib M] [--workers W] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kthena_py.testing.artifacts import ArtifactServer, HubRepo

ROOT = Path(__file__).resolve().parents[1]
BLOCK = 8 * 1024 * 1024


def make_file(path: Path, mib: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as handle:
        for _ in range(mib * 1024 * 1024 // BLOCK):
            block = os.urandom(BLOCK)
            digest.update(block)
            handle.write(block)
    return digest.hexdigest()


def remove_and_settle(path: Path) -> None:
    """Delete ``path``, then wait until the filesystem is done with it (untimed).

    Files that reached the disk (ours are fsynced; curl's too once ``sync`` ran) give their blocks back at the
    next journal commit, and on a filesystem mounted with ``discard`` that commit also trims them: disk work
    that would otherwise land in the next timed run, and hit only the tool that writes to disk (ours).
    """
    shutil.rmtree(path)
    os.sync()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def timed(*argv: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one command (the runs are sequential, so the children's CPU delta is its)."""
    cpu = children_cpu()
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return elapsed, children_cpu() - cpu


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kthena-bench-download-"))
    try:
        src = work / "src"
        src.mkdir()
        names = [f"model-{i + 1:05d}-of-{args.files:05d}.safetensors" for i in range(args.files)]
        digests = {name: make_file(src / name, args.mib) for name in names}
        os.sync()  # the model's own dirty pages must not be written back during the runs
        total = args.files * args.mib * 1024 * 1024
        async with ArtifactServer() as server:
            repo = server.add_repo(
                HubRepo(
                    "bench/model",
                    {name: str(src / name) for name in names},
                    lfs=set(names),
                    lfs_sha256_override=digests,
                )
            )
            urls = [f"{server.url}/bench/model/resolve/{repo.commit}/{name}" for name in names]
            curl_dir = work / "curl"
            curl_args = ["curl", "-sSf", "--parallel", "--parallel-max", str(args.workers)]
            for url, name in zip(urls, names, strict=True):
                curl_args += ["-o", str(curl_dir / name), url]

            async def curl() -> tuple[float, float, float]:
                curl_dir.mkdir()
                try:
                    elapsed, cpu = await timed(*curl_args)
                    # What it takes curl's files to be as durable as ours (fsync of each), timed apart.
                    synced, _ = await timed("sync", *(str(curl_dir / name) for name in names))
                    return elapsed, cpu, synced
                finally:
                    remove_and_settle(curl_dir)

            out = work / "ours"
            env = {**os.environ, "HF_ENDPOINT": server.url, "NO_PROXY": "127.0.0.1"}
            cmd = [sys.executable, "-m", "kthena_py", "download", "-s", "hf://bench/model", "-o", str(out)]
            cmd += ["-w", str(args.workers)]
            curl_runs: list[tuple[float, float, float]] = []
            ours_runs: list[tuple[float, float]] = []
            cached_runs: list[tuple[float, float]] = []
            for _ in range(args.rounds):
                curl_runs.append(await curl())
                ours_runs.append(await timed(*cmd, env=env))
                cached_runs.append(await timed(*cmd, env=env))
                remove_and_settle(out)
        (curl_time, curl_cpu, _), (ours_time, ours_cpu) = min(curl_runs), min(ours_runs)
        durable_time = min(t + synced for t, _, synced in curl_runs)
        cached_time = min(cached_runs)[0]
        mib_s = total / 1024 / 1024

        def runs(items: list[tuple[float, float]] | list[tuple[float, float, float]]) -> str:
            return ", ".join(f"{item[0]:.2f}" for item in items)

        print(f"model: {args.files} x {args.mib} MiB = {mib_s:.0f} MiB, {args.workers} in parallel, loopback")
        print(
            f"curl (no verification)          {curl_time:7.2f} s  {mib_s / curl_time:8.1f} MiB/s"
            f"  cpu {curl_cpu:5.2f} s  (runs {runs(curl_runs)} s)"
        )
        print(
            f"kthena-py download (sha256 on)  {ours_time:7.2f} s  {mib_s / ours_time:8.1f} MiB/s"
            f"  cpu {ours_cpu:5.2f} s  (runs {runs(ours_runs)} s)"
        )
        print(f"ratio ours/curl                 {curl_time / ours_time:7.2f}   (target >= 0.9)")
        print(
            f"curl, then fsync of its files   {durable_time:7.2f} s  {mib_s / durable_time:8.1f} MiB/s"
            f"  (ours is that durable: ratio {durable_time / ours_time:.2f})"
        )
        print(f"second run (complete marker)    {cached_time:7.2f} s  (runs {runs(cached_runs)} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
