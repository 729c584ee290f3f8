"""How late the manager's event loop runs what is due: the measure of how busy its one thread is.

Every watch event, reconcile and API response of the manager runs on one asyncio thread. When that thread
is busy (a fleet's watch events being decoded, many reconciles planning at once), a response that has
arrived waits for it too, and from outside that wait looks like a slow API server. This module tells the
two apart.

Guarantees:

* :func:`watch_lag` runs forever (cancel it to stop): it asks to wake up every ``interval`` seconds and
  observes how much later than that it woke (never below 0) in the histogram
  ``kthena_event_loop_lag_seconds``; with a timeline open (:mod:`.timeline`), a lag of at least
  ``record_over`` seconds is also a ``loop_lag`` record (``lag``: seconds), so it can be lined up with the
  reconciles and writes around it.
* It costs one wake-up per interval and changes nothing the manager computes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from prometheus_client import Histogram

from . import timeline
from .metrics import REGISTRY

__all__ = ["EVENT_LOOP_LAG", "watch_lag"]

EVENT_LOOP_LAG: Final = Histogram(
    "kthena_event_loop_lag_seconds",
    "How much later than asked the manager's event loop woke a periodic probe (time the loop was busy).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=REGISTRY,
)


async def watch_lag(
    interval: float = 0.1,
    record_over: float = 0.05,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Observe the event loop's lag every ``interval`` seconds (module docstring)."""
    while True:
        asked = monotonic()
        await sleep(interval)
        lag = max(0.0, monotonic() - asked - interval)
        EVENT_LOOP_LAG.observe(lag)
        if lag >= record_over and timeline.enabled():
            timeline.record("loop_lag", lag=round(lag, 4))
