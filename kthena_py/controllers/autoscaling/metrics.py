"""Prometheus metrics of the autoscaler, registered in :data:`kthena_py.runtime.metrics.REGISTRY`.

Guarantees:

* Every name starts with ``kthena_autoscaler_``. Per-policy series carry ``namespace`` and ``policy`` (the
  AutoscalingPolicy) and, where it applies, ``target``: ``<namespace>/<ModelServing>`` or
  ``<namespace>/<ModelServing>/<role>`` for a disaggregated role.
* Gauges of a policy are removed when the policy is deleted or its targets change (:class:`PolicySeries`), so no
  stale series outlives its policy. Counters are kept (they are cumulative by nature).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from kthena_py.runtime.metrics import REGISTRY

__all__ = [
    "COLLECT_SECONDS",
    "CURRENT_REPLICAS",
    "DESIRED_REPLICAS",
    "METRIC_VALUE",
    "PANIC_MODE",
    "SCALING_ACTIONS",
    "SCRAPE_ERRORS",
    "PolicySeries",
]

_TARGET_LABELS: Final = ("namespace", "policy", "target")

DESIRED_REPLICAS: Final = Gauge(
    "kthena_autoscaler_desired_replicas",
    "Replicas the last pass decided for a target (after behaviour limits, bounds and the ratio constraint).",
    _TARGET_LABELS,
    registry=REGISTRY,
)
CURRENT_REPLICAS: Final = Gauge(
    "kthena_autoscaler_current_replicas",
    "Replicas of a target (spec.replicas, or the role's replicas) seen by the last pass, before it scaled.",
    _TARGET_LABELS,
    registry=REGISTRY,
)
PANIC_MODE: Final = Gauge(
    "kthena_autoscaler_panic_mode",
    "1 while a target is in panic mode, else 0.",
    _TARGET_LABELS,
    registry=REGISTRY,
)
METRIC_VALUE: Final = Gauge(
    "kthena_autoscaler_metric_value",
    "A metric over the stable window: per replica for pod sources, the total for Prometheus sources.",
    ("namespace", "policy", "target", "metric"),
    registry=REGISTRY,
)
SCRAPE_ERRORS: Final = Counter(
    "kthena_autoscaler_scrape_errors_total",
    "Failed metric reads: pod scrapes (source=pod) and Prometheus queries (source=prometheus).",
    ("namespace", "policy", "source"),
    registry=REGISTRY,
)
SCALING_ACTIONS: Final = Counter(
    "kthena_autoscaler_scaling_actions_total",
    "Replica changes applied to a target, by direction (up or down).",
    ("namespace", "policy", "target", "direction"),
    registry=REGISTRY,
)
COLLECT_SECONDS: Final = Histogram(
    "kthena_autoscaler_collect_duration_seconds",
    "Time one pass spent collecting metrics (all pod scrapes and queries of one policy).",
    ("controller",),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)

_GAUGES: Final = (DESIRED_REPLICAS, CURRENT_REPLICAS, PANIC_MODE)


class PolicySeries:
    """The gauge series written for each policy, so they can be removed with it."""

    def __init__(self) -> None:
        self._targets: dict[tuple[str, str], set[str]] = {}
        self._metrics: dict[tuple[str, str], set[tuple[str, str]]] = {}

    def target(self, namespace: str, policy: str, target: str, *, current: int, desired: int, panic: bool) -> None:
        """Set the replica and panic gauges of one target."""
        self._targets.setdefault((namespace, policy), set()).add(target)
        CURRENT_REPLICAS.labels(namespace, policy, target).set(current)
        DESIRED_REPLICAS.labels(namespace, policy, target).set(desired)
        PANIC_MODE.labels(namespace, policy, target).set(1 if panic else 0)

    def metric(self, namespace: str, policy: str, target: str, metric: str, value: float | None) -> None:
        """Set (or, for ``None``, remove) the value gauge of one metric."""
        key = (namespace, policy)
        if value is None:
            if (target, metric) in self._metrics.get(key, set()):
                self._metrics[key].discard((target, metric))
                METRIC_VALUE.remove(namespace, policy, target, metric)
            return
        self._metrics.setdefault(key, set()).add((target, metric))
        METRIC_VALUE.labels(namespace, policy, target, metric).set(value)

    def retain(self, namespace: str, policy: str, targets: set[str]) -> None:
        """Remove the series of targets the policy no longer has."""
        key = (namespace, policy)
        for target in self._targets.get(key, set()) - targets:
            for gauge in _GAUGES:
                gauge.remove(namespace, policy, target)
            self._targets[key].discard(target)
        for target, metric in list(self._metrics.get(key, set())):
            if target not in targets:
                self.metric(namespace, policy, target, metric, None)

    def forget(self, namespace: str, policy: str) -> None:
        """Remove every gauge series of a deleted policy."""
        self.retain(namespace, policy, set())
        self._targets.pop((namespace, policy), None)
        self._metrics.pop((namespace, policy), None)

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Remove the series of every policy in the namespaces ``leaving`` accepts."""
        for namespace, policy in [key for key in {*self._targets, *self._metrics} if leaving(key[0])]:
            self.forget(namespace, policy)
