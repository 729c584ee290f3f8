"""Prometheus metrics of the eviction budget, registered in :data:`kthena_py.runtime.metrics.REGISTRY`.

Guarantees:

* Every name starts with ``kthena_eviction_``. ``requests_total`` counts every eviction the webhook answered, by
  ``decision`` (allowed, denied) and ``reason`` (:data:`~kthena_py.plan.modelserving.eviction.ALLOWED_REASONS`,
  :data:`~kthena_py.plan.modelserving.eviction.DENIED_REASONS`); ``tracker_writes_total`` the tracker writes by
  ``result`` (ok, conflict, error). The webhook's latency is ``controller_runtime_webhook_latency_seconds`` with
  ``webhook="/validate-eviction"``.
* The budget gauges (``ready_units``, ``min_available``, ``disruptions_allowed``) carry ``namespace``,
  ``modelserving`` and ``budget`` (``*`` at ServingGroup level, ``<group>/<role>`` at Role level); the reconciler
  removes the series of a budget that no longer exists, so none outlives its ModelServing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

from prometheus_client import Counter, Gauge

from kthena_py.runtime.metrics import REGISTRY

__all__ = ["DISRUPTIONS_ALLOWED", "MIN_AVAILABLE", "READY_UNITS", "REQUESTS", "TRACKER_WRITES", "BudgetSeries"]

REQUESTS: Final = Counter(
    "kthena_eviction_requests_total",
    "Evictions answered by the eviction webhook, by decision (allowed, denied) and reason.",
    ("decision", "reason"),
    registry=REGISTRY,
)
TRACKER_WRITES: Final = Counter(
    "kthena_eviction_tracker_writes_total",
    "Writes of disruption tracker ConfigMaps by result (ok, conflict: decided again, error).",
    ("result",),
    registry=REGISTRY,
)
_BUDGET_LABELS: Final = ("namespace", "modelserving", "budget")
READY_UNITS: Final = Gauge(
    "kthena_eviction_ready_units",
    "Ready units (ServingGroups or role instances) of an eviction budget, disrupted ones not counted.",
    _BUDGET_LABELS,
    registry=REGISTRY,
)
MIN_AVAILABLE: Final = Gauge(
    "kthena_eviction_min_available",
    "The resolved minAvailable of an eviction budget.",
    _BUDGET_LABELS,
    registry=REGISTRY,
)
DISRUPTIONS_ALLOWED: Final = Gauge(
    "kthena_eviction_disruptions_allowed",
    "How many more units of an eviction budget may be disrupted now.",
    _BUDGET_LABELS,
    registry=REGISTRY,
)


class BudgetSeries:
    """Remembers which budget series were exported per ModelServing, to remove the stale ones."""

    def __init__(self) -> None:
        self._exported: dict[tuple[str, str], set[str]] = {}

    def set(self, namespace: str, ms: str, values: dict[str, tuple[int, int, int]]) -> None:
        """Export ``budget -> (ready, min_available, allowed)`` and drop the budgets not in ``values``."""
        key = (namespace, ms)
        for budget in self._exported.get(key, set()) - set(values):
            for gauge in (READY_UNITS, MIN_AVAILABLE, DISRUPTIONS_ALLOWED):
                with contextlib.suppress(KeyError):
                    gauge.remove(namespace, ms, budget)
        for budget, (ready, minimum, allowed) in values.items():
            READY_UNITS.labels(namespace, ms, budget).set(ready)
            MIN_AVAILABLE.labels(namespace, ms, budget).set(minimum)
            DISRUPTIONS_ALLOWED.labels(namespace, ms, budget).set(allowed)
        if values:
            self._exported[key] = set(values)
        else:
            self._exported.pop(key, None)

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Remove the budgets of the namespaces ``leaving`` accepts (another replica reconciles them now)."""
        for namespace, ms in [key for key in self._exported if leaving(key[0])]:
            self.set(namespace, ms, {})
