"""Where a Python manager's CPU goes: py-spy attached for a window, its samples grouped by component.

Used by ``bench/converge.py --profile DIR``. py-spy samples the process's Python stacks (not idle waits) at
``rate`` per second; the raw (collapsed) output is kept, and :func:`breakdown` groups its samples two ways:

* **by stage** (inclusive, the outermost kthena_py frame that names one): a controller's reconcile, the informers'
  watch handling, the workqueue, Events, the HTTP client, the webhook and metrics servers; samples with no
  kthena_py frame at all are the event loop's own (asyncio/uvloop callbacks, aiohttp's transport). py-spy counts a
  thread as busy while the kernel has woken it but no core is free, and such a sample's stack is the event loop's
  wait: on a machine whose cores are saturated this share is an upper bound, not CPU. A native py-spy profile of
  the manager at 300 ModelServings on a saturated machine had 11.5 % of its busy samples inside ``epoll_pwait``
  while the manager's system time was 6 % of its CPU (``bench/converge.py`` prints the split by mode);
  ``--native`` (perf) counts only time on a core;
* **by activity** (the innermost frame that names one): JSON encoding/decoding, logging, Prometheus metrics,
  pydantic, deep copies, the planners (``kthena_py.plan``), aiohttp, asyncio itself, the rest.

Nothing here is asserted: it prints shares of samples, to point at what to cut.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

__all__ = ["Recording", "attach", "breakdown", "report"]


class Recording:
    """A sampling profiler's process (py-spy, perf) recording into ``out`` until :meth:`stop`."""

    def __init__(self, proc: subprocess.Popen[bytes], out: Path) -> None:
        self._proc = proc
        self.out = out

    @classmethod
    def start(cls, cmd: list[str], out: Path) -> Recording:
        return cls(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)

    def stop(self) -> Path | None:
        """End the recording (SIGINT, as at a terminal: both write their output then); the output, if any."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        return self.out if self.out.exists() and self.out.stat().st_size > 0 else None


def attach(pid: int, out: Path, rate: int = 100) -> Recording | None:
    """``py-spy record`` attached to ``pid``; ``None`` when py-spy is absent."""
    exe = shutil.which("py-spy")
    if exe is None:
        return None
    cmd = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--output", str(out)]
    cmd.append("--nonblocking")  # never pause the manager to read its stacks
    return Recording.start(cmd, out)


# (substring of a frame's file, stage name), first match from the outermost frame wins
_STAGES: tuple[tuple[str, str], ...] = (
    ("kthena_py/runtime/informer", "informers"),
    ("kthena_py/runtime/cache", "informers"),
    ("kthena_py/runtime/workqueue", "workqueue"),
    ("kthena_py/runtime/events", "events"),
    ("kthena_py/runtime/httpserver", "http servers (metrics, probes)"),
    ("kthena_py/runtime/webhook", "http servers (metrics, probes)"),
    ("kthena_py/runtime/timeline", "timeline (--timeline-file)"),
    ("kthena_py/runtime/looplag", "loop-lag probe"),
    ("kthena_py/kube/", "client requests"),
)

# (substring of a frame, activity), first match from the innermost frame wins
_ACTIVITIES: tuple[tuple[str, str], ...] = (
    ("json/", "json"),
    ("orjson", "json"),
    ("structlog/", "logging"),
    ("logging/", "logging"),
    ("prometheus_client/", "metrics"),
    ("pydantic", "pydantic"),
    ("copy.py", "deepcopy"),
    ("kthena_py/plan/", "planners"),
    ("aiohttp/", "aiohttp"),
    ("yarl/", "aiohttp"),
    ("multidict/", "aiohttp"),
    ("asyncio/", "asyncio"),
    ("uvloop", "asyncio"),
)


def _frames(stack: str) -> list[str]:
    return [f for f in stack.split(";") if f]


def _stage(frames: list[str]) -> str:
    for frame in frames:
        if "kthena_py/controllers/" in frame:
            rest = frame.split("kthena_py/controllers/", 1)[1]
            return "reconcile: " + rest.split(".py", 1)[0]  # package/module: one reconciler each
        for needle, stage in _STAGES:
            if needle in frame:
                return stage
    if any("kthena_py/" in f for f in frames):
        return "other kthena_py"
    return "event loop (no kthena_py frame; includes waits for a core)"


def _activity(frames: list[str]) -> str:
    for frame in reversed(frames):
        for needle, activity in _ACTIVITIES:
            if needle in frame:
                return activity
        if "kthena_py/" in frame:
            return "kthena_py code"
    return "other"


def _samples(lines: Iterable[str]) -> Iterable[tuple[list[str], int]]:
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            yield _frames(stack), int(count)


def breakdown(lines: Iterable[str]) -> tuple[Counter[str], Counter[str], int]:
    """(samples by stage, samples by activity, total samples) of py-spy's raw output lines."""
    stages: Counter[str] = Counter()
    activities: Counter[str] = Counter()
    total = 0
    for frames, count in _samples(lines):
        stages[_stage(frames)] += count
        activities[_activity(frames)] += count
        total += count
    return stages, activities, total


def _shares(counter: Counter[str], total: int) -> str:
    return ", ".join(f"{name} {100 * n / total:.0f} %" for name, n in counter.most_common() if 100 * n / total >= 0.5)


def report(raw: Path, rate: int = 100) -> str:
    """Two lines: the shares by stage and by activity, with the samples' CPU seconds."""
    stages, activities, total = breakdown(raw.read_text(errors="replace").splitlines())
    if not total:
        return "no samples"
    return (
        f"{total} samples (~{total / rate:.1f} s on CPU)\n"
        f"      by stage: {_shares(stages, total)}\n"
        f"      by activity: {_shares(activities, total)}"
    )
