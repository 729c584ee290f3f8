"""When the activator records demand for a ModelPool member, and the write that records it.

The record is the pool annotation ``demand.modelpool.kthena-py.io/<member>`` (the time of the latest request an
activator saw, :mod:`kthena_py.plan.modelpool.demand`); the pool controller swaps a non-resident member in while
that time is recent, and uses it as recency when it picks a resident to swap out.

Guarantees (the rate limits of the contract with the pool controller):

* A request **held** for a member (:data:`HELD`) records at once unless the latest record is at most
  :data:`HELD_MIN_AGE_SECONDS` (1 s) old; while any request for it stays held the record is refreshed once it is
  :data:`~kthena_py.plan.modelpool.demand.DEMAND_REFRESH_SECONDS` old (:data:`REFRESH`), so demand stays live for
  as long as a request waits, whichever activator replica holds it.
* A request **served** by a resident member (:data:`RESIDENT`) records at most once per
  :data:`~kthena_py.plan.modelpool.demand.RESIDENT_RECENCY_SECONDS`.
* "The latest record" is the later of the time cached from the API (any replica's write) and this process's own
  last write (its informer may not have delivered it yet), so several replicas do not multiply writes by much
  and one replica never writes faster than the limits.
* A member the pool controller swapped out (``released.modelpool.kthena-py.io/<member>``,
  :func:`~kthena_py.plan.modelpool.demand.released_of`) no longer counts demand recorded at or before that time
  (:func:`~kthena_py.plan.modelpool.demand.asks_for_swap`). So a held or refreshing request whose latest record is
  not after the member's release records at once, whatever the record's age (:func:`demand_due_in` with
  ``released``), and :func:`record_time` picks a time whose written form reads back strictly after the release
  (``now``, or one millisecond past the release when this clock is not ahead of it): the write always asks for a
  swap. A resident member's recency is not affected (it is resident again, whatever its release says).
* :func:`demand_patch` is a JSON merge patch of that one annotation: nothing else of the pool is touched.
* Pure: times are passed in; nothing here reads a clock.
"""

from __future__ import annotations

from typing import Any, Literal

from kthena_py.plan.modelpool.demand import (
    DEMAND_REFRESH_SECONDS,
    RESIDENT_RECENCY_SECONDS,
    demand_annotation,
    format_demand_time,
    parse_demand_time,
)

__all__ = [
    "HELD",
    "HELD_MIN_AGE_SECONDS",
    "REFRESH",
    "RESIDENT",
    "DemandKind",
    "demand_due_in",
    "demand_patch",
    "latest_record",
    "min_age",
    "record_time",
    "stale_after_release",
]

DemandKind = Literal["held", "refresh", "resident"]
HELD: DemandKind = "held"
"""A request just started to wait for a member with no Ready backend."""
REFRESH: DemandKind = "refresh"
"""Requests for the member are still held."""
RESIDENT: DemandKind = "resident"
"""A request was forwarded to a Ready backend of the member."""

HELD_MIN_AGE_SECONDS = 1.0
"""A held request records its demand at once unless the latest record is at most this old."""


def min_age(kind: DemandKind) -> float:
    """How old the latest record must be before a request of ``kind`` writes a new one."""
    if kind == HELD:
        return HELD_MIN_AGE_SECONDS
    if kind == REFRESH:
        return DEMAND_REFRESH_SECONDS
    return RESIDENT_RECENCY_SECONDS


def latest_record(cached: float | None, written: float | None) -> float | None:
    """The later of the cached record and this process's own last write (``None`` when neither exists)."""
    if cached is None:
        return written
    if written is None:
        return cached
    return max(cached, written)


def stale_after_release(latest: float | None, released: float | None) -> bool:
    """Whether the member was swapped out at ``released`` and no record (``latest``) came after that."""
    return released is not None and (latest is None or latest <= released)


def demand_due_in(latest: float | None, now: float, kind: DemandKind, released: float | None = None) -> float:
    """Seconds until a request of ``kind`` should write a record (``0``: now); ``latest`` from :func:`latest_record`.

    A held request writes when the latest record is *older* than 1 s; refreshes and recency writes when it is at
    least their interval old. A record in the future (another replica's clock ahead) waits until it is that old.
    A held or refreshing request writes at once when the member was released (``released``, epoch seconds) and
    the latest record is not after that: the pool controller would not count it.
    """
    if latest is None or (kind != RESIDENT and stale_after_release(latest, released)):
        return 0.0
    age = now - latest
    limit = min_age(kind)
    if kind == HELD:
        return 0.0 if age > limit else limit - age + 1e-3
    return max(0.0, limit - age)


def record_time(now: float, released: float | None) -> float:
    """The time to record at ``now``: ``now``, or the first millisecond whose written form is after ``released``.

    The record is written with millisecond resolution (truncated), so the answer is checked through the written
    form: ``parse_demand_time(format_demand_time(record_time(now, r))) > r`` for every ``r``.
    """
    if released is None:
        return now
    when = max(now, released)
    for _ in range(4):  # truncation and float rounding cost at most two steps
        written = parse_demand_time(format_demand_time(when))
        if written is not None and written > released:
            break
        when += 0.001
    return when


def demand_patch(member: str, now: float) -> dict[str, Any]:
    """The merge patch recording a request for ``member`` at ``now`` (epoch seconds)."""
    return {"metadata": {"annotations": {demand_annotation(member): format_demand_time(now)}}}
