"""Download progress: counters, and the rate and ETA derived from them (pure).

Guarantees:

* :class:`Progress` is the one mutable tally (bytes and files done of total, phase); it is fed by the transfer
  layer and read by the reporters (terminal bar, log lines, ``GET /progress``); bytes are counted with
  :meth:`Progress.add_bytes`, which is safe to call from the transfer threads (no update is lost);
* :func:`snapshot` computes the rate over a sliding window of ``(time, bytes)`` samples the caller records
  with its own clock, and the ETA from it; both are ``None`` until there is a rate to speak of, and the ETA is
  ``None`` when the total is unknown;
* :func:`should_log` bounds the cadence of structured progress lines.
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

WINDOW_SECONDS = 10.0


class Phase(enum.StrEnum):
    """Where a run is."""

    STARTING = "Starting"
    LISTING = "Listing"
    DOWNLOADING = "Downloading"
    VERIFYING = "Verifying"
    COMPLETE = "Complete"
    FAILED = "Failed"


@dataclass
class Progress:
    """The running tally of one download."""

    phase: Phase = Phase.STARTING
    bytes_done: int = 0
    bytes_total: int | None = None
    files_done: int = 0
    files_total: int = 0
    samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=256))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_bytes(self, count: int) -> None:
        """Count ``count`` more bytes done (negative to take back a restarted file's bytes); thread-safe."""
        with self._lock:
            self.bytes_done += count

    def record(self, now: float) -> None:
        """Record a ``(now, bytes_done)`` sample and drop those older than the window."""
        self.samples.append((now, self.bytes_done))
        while len(self.samples) > 2 and now - self.samples[0][0] > WINDOW_SECONDS:
            self.samples.popleft()


@dataclass(frozen=True)
class Snapshot:
    """Progress at one moment, as ``GET /progress`` serves it."""

    phase: Phase
    bytes_done: int
    bytes_total: int | None
    files_done: int
    files_total: int
    rate: float | None
    eta: float | None

    def to_json(self) -> dict[str, Any]:
        """The JSON document (camelCase keys)."""
        return {
            "phase": self.phase.value,
            "bytesDone": self.bytes_done,
            "bytesTotal": self.bytes_total,
            "filesDone": self.files_done,
            "filesTotal": self.files_total,
            "rateBytesPerSecond": None if self.rate is None else round(self.rate, 1),
            "etaSeconds": None if self.eta is None else round(self.eta, 1),
        }


def rate_of(samples: deque[tuple[float, int]] | list[tuple[float, int]]) -> float | None:
    """Bytes per second between the oldest and newest sample; ``None`` with under 2 samples or no elapsed time."""
    if len(samples) < 2:
        return None
    (t0, b0), (t1, b1) = samples[0], samples[-1]
    if t1 <= t0:
        return None
    return max(0.0, (b1 - b0) / (t1 - t0))


def snapshot(progress: Progress) -> Snapshot:
    """The current snapshot of ``progress``."""
    rate = rate_of(progress.samples)
    eta: float | None = None
    if rate and progress.bytes_total is not None:
        eta = max(0.0, (progress.bytes_total - progress.bytes_done) / rate)
    return Snapshot(
        progress.phase,
        progress.bytes_done,
        progress.bytes_total,
        progress.files_done,
        progress.files_total,
        rate,
        eta,
    )


def should_log(last_logged: float | None, now: float, interval: float) -> bool:
    """Whether a periodic progress line is due (at most one per ``interval`` seconds)."""
    return last_logged is None or now - last_logged >= interval
