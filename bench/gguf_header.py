"""Benchmark: what reading a GGUF header costs, realistic and hostile (printed, never asserted).

The downloader reads the primary GGUF's header after every staging (:mod:`kthena_py.modelmeta.gguf`). This
prints the time and the peak memory the parser takes for:

* ``llama-3-like``: a 128k-token vocabulary with scores and token types, and 280k merges (a few MiB, as in real
  files; all walked, none kept);
* ``hostile strings``: an array of empty strings filling the 64 MiB byte cap (the most loop steps per byte);
* ``hostile arrays``: an array of empty arrays filling the cap;
* ``hostile booleans``: keys of nested small boolean arrays filling the cap (what the kept-element budget
  bounds).

Each input is parsed ``--rounds`` times untraced (the median seconds, and its ratio to the realistic case), then
once under ``tracemalloc`` for the peak allocation (the input itself not counted).

Usage: python bench/gguf_header.py [--rounds R]
"""

from __future__ import annotations

import argparse
import io
import statistics
import struct
import time
import tracemalloc

from kthena_py.modelmeta.gguf import MAX_METADATA_BYTES, read_header
from kthena_py.testing.artifacts.gguf import STRING, Array, llama_like


def _llama3_like() -> bytes:
    merges = ("tokenizer.ggml.merges", Array(STRING, [f"a{i} b{i}" for i in range(280_000)]))
    return llama_like(vocabulary=128_256, extra=dict([merges]))


def _one_key_array(element_type: int, count: int, element: bytes) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    return head + struct.pack("<IIQ", 9, element_type, count) + element * count


def _hostile_booleans() -> bytes:
    """Many keys, each a 64 x 64 array of booleans: kept whole, these would be ~450 MiB of list slots."""
    small = struct.pack("<IQ", 7, 64) + b"\x01" * 64
    value = struct.pack("<IIQ", 9, 9, 64) + small * 64
    count = (MAX_METADATA_BYTES - 64) // (8 + 6 + len(value))
    pairs = b"".join(struct.pack("<Q", 6) + f"k{i:05d}".encode() + value for i in range(count))
    return b"GGUF" + struct.pack("<IQQ", 3, 0, count) + pairs


def _measure(data: bytes, rounds: int) -> tuple[float, int]:
    """Median seconds over ``rounds`` untraced parses, then the peak traced allocation of one more."""
    times: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        read_header(io.BytesIO(data))
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    read_header(io.BytesIO(data))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cases = {
        "llama-3-like": _llama3_like(),
        "hostile strings": _one_key_array(8, (MAX_METADATA_BYTES - 64) // 8, struct.pack("<Q", 0)),
        "hostile arrays": _one_key_array(9, (MAX_METADATA_BYTES - 64) // 12, struct.pack("<IQ", 0, 0)),
        "hostile booleans": _hostile_booleans(),
    }
    baseline = None
    print(f"{'case':<18} {'MiB':>7} {'seconds':>9} {'ratio':>7} {'peak MiB':>9}")
    for name, data in cases.items():
        seconds, peak = _measure(data, args.rounds)
        baseline = baseline or seconds
        print(f"{name:<18} {len(data) / 2**20:>7.1f} {seconds:>9.3f} {seconds / baseline:>7.1f} {peak / 2**20:>9.1f}")


if __name__ == "__main__":
    main()
