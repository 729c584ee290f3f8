"""An opt-in timeline of the manager's work, to find where latency goes (``kthena-py manager --timeline-file``).

Guarantees:

* Off by default. While off, every hook costs one attribute read and a branch: nothing is built,
  formatted or written.
* While on, each :func:`record` appends one JSON object on its own line to the file: ``t`` (epoch
  seconds, float, from ``time.time()``, so it lines up with other processes on the same machine),
  ``stage`` and the fields given. The stages the runtime records: ``watch`` (an informer applied a watch
  event: ``kind``, ``namespace``, ``name``, ``type``, ``rv``), ``enqueue`` (a watch handler asked for a
  reconcile: ``controller``, ``key``, ``kind``, ``name``), ``start`` and ``end`` of a reconcile
  (``controller``, ``key``; ``end`` adds ``outcome``), ``status`` (a status write took effect:
  ``manager``, ``key``, ``true``: the condition types now True), and ``loop_lag`` (the event loop woke a
  periodic probe at least 50 ms late: ``lag``, see :mod:`.looplag`).
* Records are buffered and flushed at least every :data:`FLUSH_SECONDS` and on :func:`close`, so a reader
  sees each record within about that time.
* Recording never raises into the caller: an I/O error turns the timeline off.
"""

from __future__ import annotations

import contextlib
import time
from typing import IO, Any

from pydantic_core import PydanticSerializationError, to_json

__all__ = ["FLUSH_SECONDS", "close", "enabled", "open_file", "record"]

FLUSH_SECONDS = 0.5


class _Timeline:
    def __init__(self) -> None:
        self.file: IO[str] | None = None
        self.last_flush = 0.0


_state = _Timeline()


def enabled() -> bool:
    """Whether a timeline is being written."""
    return _state.file is not None


def open_file(path: str) -> None:
    """Start writing the timeline to ``path`` (appending)."""
    close()
    _state.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until close()
    _state.last_flush = time.monotonic()


def record(stage: str, **fields: Any) -> None:
    """Append one record (a no-op while no timeline is open)."""
    f = _state.file
    if f is None:
        return
    try:
        f.write(to_json({"t": time.time(), "stage": stage, **fields}).decode() + "\n")
        now = time.monotonic()
        if now - _state.last_flush >= FLUSH_SECONDS:
            f.flush()
            _state.last_flush = now
    except (OSError, ValueError, TypeError, PydanticSerializationError):
        _state.file = None


def close() -> None:
    """Flush and stop writing."""
    f, _state.file = _state.file, None
    if f is not None:
        with contextlib.suppress(OSError):
            f.close()
