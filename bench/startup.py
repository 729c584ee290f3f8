"""Benchmark: start-up time of the ``kthena-py`` command line (printed, never asserted).

Each command runs ``--runs`` times in a fresh interpreter (``python -m kthena_py.main ...``, bytecode already
compiled by a warm-up run); the table shows the median and best wall time, next to the baseline of the same
interpreter doing nothing (``python -c pass``), and which heavy libraries the command imported (found with
``-X importtime``). The figure that matters to a person typing the command is the median.

Usage: python bench/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "examples" / "modelserving-pd.yaml")
POLICY = str(ROOT / "examples" / "autoscaling" / "homogeneous.yaml")
TRACE = str(ROOT / "examples" / "autoscaling" / "load.csv")
HEAVY = ("scipy", "numpy", "matplotlib", "kubernetes_asyncio", "aiohttp", "pydantic", "structlog", "cryptography")

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass (baseline)", ["-c", "pass"]),
    ("kthena-py --help", ["-m", "kthena_py.main", "--help"]),
    ("kthena-py manager --help", ["-m", "kthena_py.main", "manager", "--help"]),
    ("kthena-py validate -f sample", ["-m", "kthena_py.main", "validate", "-f", SAMPLE]),
    ("kthena-py render -f sample", ["-m", "kthena_py.main", "render", "-f", SAMPLE]),
    (
        "kthena-py autoscaler simulate",
        ["-m", "kthena_py.main", "autoscaler", "simulate", "-f", POLICY, "--trace", TRACE],
    ),
]


def run_once(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def heavy_imports(args: list[str]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found = set()
    for line in result.stderr.splitlines():
        name = line.rsplit("|", 1)[-1].strip()
        if name in HEAVY:
            found.add(name)
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"start-up of each command, {args.runs} runs (python {sys.version.split()[0]})")
    print(f"{'command':<32} {'median':>8} {'best':>8}  heavy libraries imported")
    for title, argv in COMMANDS:
        run_once(argv)  # warm-up: bytecode compiled, files in the page cache
        times = [run_once(argv) for _ in range(args.runs)]
        imported = ", ".join(heavy_imports(argv)) or "-"
        print(f"{title:<32} {statistics.median(times):>7.3f}s {min(times):>7.3f}s  {imported}")


if __name__ == "__main__":
    main()
