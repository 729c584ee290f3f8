"""Memory trimming: once after each busy period, never while busy or steadily idle."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

from kthena_py.runtime import memory


def test_trim_returns_free_memory_on_glibc() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc_trim exists on Linux only")
    assert memory.trim() is True


async def trim_ticks(per_interval: list[float], **thresholds: float) -> list[int]:
    """The ticks at which :func:`memory.trim_when_idle` trims, given the CPU seconds used in each interval."""
    totals = [0.0]
    for used in per_interval:
        totals.append(totals[-1] + used)
    readings = iter(totals)
    trims: list[int] = []
    ticks = 0

    async def sleep(_: float) -> None:
        nonlocal ticks
        ticks += 1
        if ticks > len(per_interval):
            raise asyncio.CancelledError

    def trimmer() -> bool:
        trims.append(ticks)
        return True

    with pytest.raises(asyncio.CancelledError):
        await memory.trim_when_idle(
            **thresholds,
            cpu_time=lambda: next(readings),
            sleep=sleep,
            trimmer=trimmer,
        )
    return trims


async def test_trims_when_idle_after_enough_work() -> None:
    # CPU seconds used per 10 s interval: busy, busy, idle, idle, busy, idle (a light tail), busy, idle, idle, idle...
    per_interval = [5.0, 4.0, 0.1, 0.1, 5.0, 0.3, 5.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    trims = await trim_ticks(per_interval, interval=10.0, idle_share=0.2, work=0.5, every=30.0)
    # Never while busy (1, 2, 5, 7) nor in a lull of one idle interval (3, 6): after two idle intervals in a row
    # following work (4, 9); then, idle with too little work, once 30 s have passed since the last trim (tick 12).
    assert trims == [4, 9, 12]


def test_resident_size_is_read() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("/proc exists on Linux only")
    assert memory.resident_mib() > 1


async def test_by_default_the_lulls_of_a_converging_fleet_are_not_idle() -> None:
    # A fleet converging: the manager near 20 % of a core (1 CPU s per 5 s interval), with lulls at 10 % and 6 %;
    # then nothing to do (0.3 % of a core).
    converging = [1.2, 0.5, 0.5, 1.0, 0.3, 0.3, 1.1, 0.5]
    settled = [0.015] * 4
    trims = await trim_ticks(converging + settled)  # the default thresholds, 5 s intervals
    # Not in the lulls (ticks 2-3, 5-6): once, after two settled intervals.
    assert trims == [len(converging) + 2]


def test_startup_objects_are_frozen_out_of_collections() -> None:
    try:
        frozen = memory.freeze_startup()
        assert frozen > 1000  # at least the modules and classes imported so far
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_collections_are_timed_by_generation() -> None:
    from kthena_py.runtime.metrics import REGISTRY

    def paused(generation: int) -> float:
        value = REGISTRY.get_sample_value("kthena_gc_pause_seconds_total", {"generation": str(generation)})
        return value or 0.0

    before = paused(2), paused(0)
    memory.time_collections()
    memory.time_collections()  # once per process
    try:
        assert sum(isinstance(cb, memory._CollectionTimer) for cb in gc.callbacks) == 1
        gc.collect()
        gc.collect(0)
        assert paused(2) > before[0]
        assert paused(0) > before[1]
        longest = REGISTRY.get_sample_value("kthena_gc_pause_longest_seconds", {"generation": "2"})
        assert longest is not None and 0 < longest <= paused(2) - before[0]
    finally:
        gc.callbacks[:] = [cb for cb in gc.callbacks if not isinstance(cb, memory._CollectionTimer)]


def test_the_longest_pause_is_kept_per_generation() -> None:
    from kthena_py.runtime.metrics import REGISTRY

    def longest(generation: int) -> float | None:
        return REGISTRY.get_sample_value("kthena_gc_pause_longest_seconds", {"generation": str(generation)})

    ticks = iter([0.0, 0.5, 1.0, 1.1, 2.0, 2.2, 3.0, 3.7])
    timer = memory._CollectionTimer(clock=lambda: next(ticks))  # called directly, never installed in gc.callbacks
    shown: list[tuple[float | None, float | None]] = []
    for generation in (0, 0, 1, 0):
        timer("start", {"generation": generation})
        timer("stop", {"generation": generation})
        shown.append((longest(0), longest(1)))
    # 0.5 s; then 0.1 s, shorter, kept out; then generation 1's 0.2 s; then 0.7 s, generation 0's new longest.
    assert [pair[0] for pair in shown] == pytest.approx([0.5, 0.5, 0.5, 0.7])
    assert shown[2][1] == pytest.approx(0.2)
    assert shown[3][1] == pytest.approx(0.2)
