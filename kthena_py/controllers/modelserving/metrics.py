"""Prometheus metrics of the ModelServing controllers, registered in :data:`kthena_py.runtime.metrics.REGISTRY`.

Guarantees:

* ``kthena_modelserving_waiting{reason,resource}`` is the number of ModelServings whose ``Scheduled`` condition
  is ``False`` with a blocking reason (``InsufficientGPU``, ``InsufficientResources``, ``QueueFull``,
  ``NotEnqueued``, ``Unschedulable``; not ``Scheduling``), by that reason and the resource it names (``""`` when
  none). It is recomputed from each reconcile's decision (a restarted leader rebuilds it as it reconciles its
  ModelServings), a deleted ModelServing leaves it, and a series that falls to 0 is removed.
* ``kthena_modelserving_time_to_schedule_seconds{reason}`` gets one sample per ``Scheduled`` transition from
  ``False`` to ``True``: how long the condition had been ``False`` (from its ``lastTransitionTime`` to the last
  pod's binding), labelled with the reason it last had (``Scheduling`` when nothing blocked the pods).
* ``kthena_modelserving_echoes_skipped_total{controller}`` counts the watch events that only echoed a reconciler's
  own write and so did not wake it again (:mod:`.echoes`).
* Only the leader reconciles, so only the leader exports non-empty series; with ``--sharding`` each replica counts
  the ModelServings of the namespaces it owns and forgets those it gives away (:meth:`WaitingSeries.forget_namespaces`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from kthena_py.runtime.metrics import REGISTRY

__all__ = ["ECHOES_SKIPPED", "SERIES", "TIME_TO_SCHEDULE", "WAITING", "WaitingSeries"]

WAITING: Final = Gauge(
    "kthena_modelserving_waiting",
    "ModelServings whose pods wait to be scheduled, by the Scheduled condition's reason and the resource it names.",
    ("reason", "resource"),
    registry=REGISTRY,
)
TIME_TO_SCHEDULE: Final = Histogram(
    "kthena_modelserving_time_to_schedule_seconds",
    "Seconds a ModelServing's Scheduled condition was False before every pod was placed, by its last reason.",
    ("reason",),
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
    registry=REGISTRY,
)

ECHOES_SKIPPED: Final = Counter(
    "kthena_modelserving_echoes_skipped_total",
    "Watch events that only echoed a reconciler's own write and did not wake it again, by controller.",
    ("controller",),
    registry=REGISTRY,
)


class WaitingSeries:
    """The wait of each ModelServing, kept in :data:`WAITING` as counts by (reason, resource)."""

    def __init__(self, gauge: Gauge = WAITING) -> None:
        self._gauge = gauge
        self._by_ms: dict[tuple[str, str], tuple[str, str]] = {}
        self._counts: dict[tuple[str, str], int] = {}

    def set(self, namespace: str, name: str, wait: tuple[str, str] | None) -> None:
        """Record that ``namespace/name`` waits with ``(reason, resource)`` (``None``: it does not wait)."""
        key = (namespace, name)
        old = self._by_ms.get(key)
        if old == wait:
            return
        if old is not None:
            del self._by_ms[key]
            self._count(old, -1)
        if wait is not None:
            self._by_ms[key] = wait
            self._count(wait, +1)

    def forget(self, namespace: str, name: str) -> None:
        """The ModelServing is gone."""
        self.set(namespace, name, None)

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: stop counting their ModelServings."""
        for namespace, name in [key for key in self._by_ms if leaving(key[0])]:
            self.set(namespace, name, None)

    def _count(self, labels: tuple[str, str], delta: int) -> None:
        count = self._counts.get(labels, 0) + delta
        if count > 0:
            self._counts[labels] = count
            self._gauge.labels(*labels).set(count)
            return
        self._counts.pop(labels, None)
        with contextlib.suppress(KeyError):
            self._gauge.remove(*labels)


SERIES: Final = WaitingSeries()
"""The process's one view of waiting ModelServings (every reporter shares it)."""
