"""Give memory freed after a burst of work back to the operating system.

A burst (a fleet being created, a relist) allocates many short-lived request and response buffers. CPython frees
them, but glibc's allocator keeps the freed pages of its heap mapped, so the resident size stays at the burst's
high-water mark long after the cache has shrunk back to what it holds.

Guarantees:

* :func:`trim` asks glibc to return free heap pages (``malloc_trim(0)``) and reports whether it could; on other C
  libraries it does nothing and returns ``False``.
* :func:`trim_when_idle` runs forever (cancel it to stop): every ``interval`` seconds it reads the process's CPU
  time. After ``quiet`` idle intervals in a row (CPU use below ``idle_share`` of one core) it trims when at least
  ``work`` CPU seconds were spent since the previous trim (collecting cyclic garbage first: what a burst leaves in
  reference cycles is otherwise freed only by a later full collection); with less work than that, at the end of
  an idle interval once ``every`` seconds have passed since the last trim, which returns what is freed without
  work (e.g. idle keep-alive connections closing, with their TLS buffers). Never while busy, and not in the lulls
  of a burst: a full collection over a large cache costs a tenth of a second or more (measured: 5 % of the
  manager's CPU while a 2,400-pod fleet converged, when one idle interval sufficed).
* "Idle" means under ``idle_share`` of one core: 5 % by default, what a manager with nothing to do stays well
  under (0.3 % with 4,000 pods cached). A fleet converging keeps it above that; at 25 % (the former default) the
  lulls of a 100-ModelServing converge, where the manager averages about 20 % of a core, counted as idle, and the
  collection ran in the middle of the work (about 8 % of the manager's profile samples to converge).
* :func:`freeze_startup` moves every object alive when the manager starts (modules, classes, the generated client's
  models: some 40,000 tracked objects) out of the cyclic collector's reach, so no later collection, automatic or
  ours, walks them again. They live as long as the process; the manager's CLI calls it once, before the informers
  start, and never in a process that runs managers as tests do.
* :func:`tune_collector` sets the collector's thresholds (``--gc-threshold``, the manager's counterpart of Go's
  ``GOGC``) before freezing.
* :func:`time_collections` counts the seconds every cyclic collection holds the process in
  ``kthena_gc_pause_seconds_total{generation}``, and the longest single pause in
  ``kthena_gc_pause_longest_seconds{generation}``: a collection runs inside whatever allocation triggered it, so a
  profiler charges its time to that line; this says what it costs in all.
* Trimming, freezing and timing never change what the program computes: they only return free memory, skip work
  or count.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import os
import time
from collections.abc import Awaitable, Callable
from functools import cache

import structlog
from prometheus_client import Counter, Gauge

from .metrics import REGISTRY

__all__ = [
    "GC_LONGEST_PAUSE",
    "GC_PAUSES",
    "freeze_startup",
    "resident_mib",
    "time_collections",
    "trim",
    "trim_when_idle",
    "tune_collector",
]

log = structlog.get_logger("kthena_py.memory")

GC_PAUSES = Counter(
    "kthena_gc_pause_seconds_total",
    "Seconds the cyclic garbage collector held the process, by generation (automatic collections and ours).",
    ("generation",),
    registry=REGISTRY,
)
GC_LONGEST_PAUSE = Gauge(
    "kthena_gc_pause_longest_seconds",
    "The longest single pause of the cyclic garbage collector since the process started, by generation: how long "
    "one collection held every watch, reconcile and request of the process at once.",
    ("generation",),
    registry=REGISTRY,
)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    trim_fn: Callable[[int], int] = fn
    return trim_fn


def resident_mib() -> float:
    """This process's resident set size in MiB (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def trim() -> bool:
    """Return free heap memory to the operating system (glibc only); whether it was possible."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


class _CollectionTimer:
    """A ``gc.callbacks`` entry: each pause to :data:`GC_PAUSES`, the longest to :data:`GC_LONGEST_PAUSE`."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._started = 0.0
        self._children = [GC_PAUSES.labels(str(generation)) for generation in range(3)]
        self._longest_children = [GC_LONGEST_PAUSE.labels(str(generation)) for generation in range(3)]
        self._longest = [0.0, 0.0, 0.0]

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        generation = info.get("generation", 2)
        paused = self._clock() - self._started
        self._children[generation].inc(paused)
        if paused > self._longest[generation]:
            self._longest[generation] = paused
            self._longest_children[generation].set(paused)


def time_collections() -> None:
    """Count every later cyclic collection's pause in :data:`GC_PAUSES` (once per process; again does nothing)."""
    if not any(isinstance(cb, _CollectionTimer) for cb in gc.callbacks):
        gc.callbacks.append(_CollectionTimer())


def tune_collector(thresholds: tuple[int, int, int]) -> int:
    """Set the cyclic collector's thresholds, then :func:`freeze_startup`; how many objects were frozen."""
    gc.set_threshold(*thresholds)
    return freeze_startup()


def freeze_startup() -> int:
    """Collect once, then exempt every surviving object from later cyclic collections; how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


async def trim_when_idle(
    interval: float = 5.0,
    idle_share: float = 0.05,
    work: float = 0.5,
    every: float = 30.0,
    quiet: int = 2,
    *,
    cpu_time: Callable[[], float] = time.process_time,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    trimmer: Callable[[], bool] = trim,
) -> None:
    """Trim after ``quiet`` idle intervals following work, and every ``every`` seconds while idle (module docstring)."""
    last_cpu = cpu_time()
    done = 0.0
    since = 0.0
    idle_in_a_row = 0
    while True:
        await sleep(interval)
        since += interval
        cpu = cpu_time()
        used, last_cpu = cpu - last_cpu, cpu
        done += used
        idle_in_a_row = 0 if used / interval >= idle_share else idle_in_a_row + 1
        after_work = done >= work and idle_in_a_row >= quiet
        periodic = done < work and since >= every
        if idle_in_a_row == 0 or not (after_work or periodic):
            continue
        if done >= work:
            gc.collect()  # cyclic garbage of the burst (responses, tasks, tracebacks) holds memory until then
        done = since = 0.0
        before = resident_mib()
        if trimmer():
            log.debug("returned free memory", rss_before_mib=round(before, 1), rss_mib=round(resident_mib(), 1))
