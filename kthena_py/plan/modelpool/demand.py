"""Demand for ModelPool members: the shared annotation format between activators and the pool controller.

Guarantees:

* Demand for member ``M`` is the annotation ``demand.modelpool.kthena-py.io/M`` on the pool: the time of the
  latest request an activator saw for ``M``, RFC 3339 UTC with milliseconds (``2026-12-03T11:00:00.123Z``).
* :func:`format_demand_time` always writes that exact shape; :func:`parse_demand_time` reads it back (and any
  RFC 3339 time with or without fraction or offset), and answers ``None`` for anything it cannot read, never
  raising: an unreadable annotation is no demand, not an error.
* :func:`demand_of` maps member names to epoch seconds, skipping unreadable values and empty member names.
* Demand is live while ``now - t <= DEMAND_LIVE_SECONDS`` (:func:`is_live`); activators refresh it every
  :data:`DEMAND_REFRESH_SECONDS` while a request is held, so a held request keeps its demand live with margin.
* Requests to a resident member are recorded at most every :data:`RESIDENT_RECENCY_SECONDS` (recency for the
  least-recently-used choice, not demand for a swap).
* The pool controller records when it swapped a member out (``released.modelpool.kthena-py.io/<member>``,
  :func:`released_of`); :func:`asks_for_swap` counts a member's demand only when it is live *and* later than that:
  requests seen before the member was swapped out were served by it, so they never swap it back in (without this,
  two members whose demand is still live would take each other's slot in turn).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kthena_py.vocab.labels import MODELPOOL_DEMAND_PREFIX, MODELPOOL_RELEASED_PREFIX

__all__ = [
    "DEMAND_LIVE_SECONDS",
    "DEMAND_REFRESH_SECONDS",
    "RESIDENT_RECENCY_SECONDS",
    "asks_for_swap",
    "demand_annotation",
    "demand_of",
    "format_demand_time",
    "is_live",
    "parse_demand_time",
    "released_annotation",
    "released_of",
]

DEMAND_REFRESH_SECONDS = 10.0
"""An activator rewrites a member's demand this often while any request for it is held."""
DEMAND_LIVE_SECONDS = 30.0
"""Demand older than this is expired: the pool controller no longer swaps for it."""
RESIDENT_RECENCY_SECONDS = 30.0
"""An activator records a request to a resident member at most this often (recency only)."""


def demand_annotation(member: str) -> str:
    """The annotation key carrying the demand time of ``member``."""
    return MODELPOOL_DEMAND_PREFIX + member


def format_demand_time(epoch: float) -> str:
    """``epoch`` as RFC 3339 UTC with exactly three fraction digits (truncated, never rounded up) and a ``Z``."""
    seconds, millis = divmod(math.floor(epoch * 1000), 1000)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis:03d}Z"


def parse_demand_time(text: object) -> float | None:
    """Epoch seconds of an RFC 3339 time (a naive time is read as UTC), or ``None`` when unreadable."""
    if not isinstance(text, str) or not text.strip():
        return None
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def released_annotation(member: str) -> str:
    """The annotation key carrying the time the pool controller swapped ``member`` out."""
    return MODELPOOL_RELEASED_PREFIX + member


def demand_of(pool: Mapping[str, Any]) -> dict[str, float]:
    """Member name -> epoch seconds of its latest recorded request, from a pool object (a raw dict)."""
    return _times(pool, MODELPOOL_DEMAND_PREFIX)


def released_of(pool: Mapping[str, Any]) -> dict[str, float]:
    """Member name -> epoch seconds when the pool controller last swapped it out."""
    return _times(pool, MODELPOOL_RELEASED_PREFIX)


def asks_for_swap(member: str, demand: Mapping[str, float], released: Mapping[str, float], now: float) -> bool:
    """Whether ``member``'s demand is live and was recorded after it was last swapped out."""
    when = demand.get(member)
    return is_live(when, now) and (member not in released or (when is not None and when > released[member]))


def _times(pool: Mapping[str, Any], prefix: str) -> dict[str, float]:
    metadata = pool.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return {}
    demand: dict[str, float] = {}
    for key, raw in annotations.items():
        if not isinstance(key, str) or not key.startswith(prefix):
            continue
        member = key[len(prefix) :]
        when = parse_demand_time(raw)
        if member and when is not None:
            demand[member] = when
    return demand


def is_live(when: float | None, now: float) -> bool:
    """Whether a demand time ``when`` still asks for a swap at ``now``."""
    return when is not None and now - when <= DEMAND_LIVE_SECONDS
