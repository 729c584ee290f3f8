"""Desired replicas from metric readings: tolerance, HPA missing-pod rules, maximum over metrics.

Guarantees (all arithmetic is exact, on :class:`fractions.Fraction`):

* Per metric, ``raw`` is the real-valued replica count the metric asks for: ``value / target`` for an external
  (Prometheus) total, ``average / target * pods`` for a per-pod reading. The metric's recommendation is
  ``current`` when ``|current - raw| < current * tolerancePercent / 100`` (the API's definition: scale only when
  the difference is at least the tolerance), else ``ceil(raw)``. With ``current == 0`` any data scales, so
  a Prometheus metric scales a target up from zero.
* Per-pod readings follow the Kubernetes HPA rules: unready pods (including replicas without a ready pod yet,
  i.e. ``current - reporting - missing``) count as zero load when the metric asks to scale up and are ignored
  when it asks to scale down, so they never block a scale-down; missing pods count as exactly at target when
  scaling down and as zero when scaling up. If those assumptions reverse the direction, or make a scale-down
  grow (or a scale-up shrink), the metric recommends ``current``.
* Over metrics, the recommendation is the maximum. As in the HPA, metrics without data never let the others
  scale down: if any metric lacks data, the result is at least ``current``. With no data at all the result is
  ``None`` (the caller holds).
* A zero target with a positive value asks for "unbounded" (:data:`UNBOUNDED`); the caller's clamp turns it
  into ``maxReplicas``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kthena_py.plan.autoscaling.spec import MetricTarget, exact
from kthena_py.plan.autoscaling.window import ExternalReading, PodReading, Reading

__all__ = [
    "UNBOUNDED",
    "MetricRecommendation",
    "Recommendation",
    "recommend",
    "recommend_metric",
    "utilization",
]

UNBOUNDED = 1_000_000_000
"""Replica count standing for "as many as allowed" (a zero target with load)."""


@dataclass(frozen=True)
class MetricRecommendation:
    """The recommendation of one metric.

    Attributes:
        name: Metric key.
        replicas: Recommended replicas (``None``: no data for this metric).
        raw: The real-valued replica count before tolerance and rounding (``None``: no data).
        reason: A human-readable explanation.
    """

    name: str
    replicas: int | None
    raw: Fraction | None
    reason: str


@dataclass(frozen=True)
class Recommendation:
    """The recommendation over all metrics.

    Attributes:
        replicas: Recommended replicas, unclamped (``None``: no metric had data).
        metrics: The per-metric recommendations, in the order of the targets.
        reasons: Human-readable explanations.
    """

    replicas: int | None
    metrics: tuple[MetricRecommendation, ...]
    reasons: tuple[str, ...]


def _ceil(value: Fraction) -> int:
    return min(max(math.ceil(value), 0), UNBOUNDED)


def _ratio(value: Fraction, target: Fraction) -> Fraction | None:
    """``value / target``; ``None`` stands for +infinity (zero target, positive value)."""
    if target == 0:
        return None if value > 0 else Fraction(0)
    return value / target


def _tolerated(current: int, raw: Fraction, tolerance_percent: int) -> bool:
    """True when the API's tolerance keeps ``current`` (``|current - raw| < current * tol / 100``)."""
    return abs(current - raw) * 100 < current * tolerance_percent


def _fmt(value: Fraction | float) -> str:
    return f"{float(value):.4g}"


def _external(name: str, value: Fraction, target: Fraction, current: int, tol: int) -> MetricRecommendation:
    raw = _ratio(value, target)
    if raw is None:
        return MetricRecommendation(name, UNBOUNDED, None, f"{name}: {_fmt(value)} against a zero target: unbounded")
    head = f"{name}: {_fmt(value)} / target {_fmt(target)} = {_fmt(raw)} replicas"
    if _tolerated(current, raw, tol):
        return MetricRecommendation(name, current, raw, f"{head}, within {tol}% of {current}: keep {current}")
    return MetricRecommendation(name, _ceil(raw), raw, f"{head} -> {_ceil(raw)}")


def _pods(name: str, reading: PodReading, target: Fraction, current: int, tol: int) -> MetricRecommendation:
    count = reading.reporting
    total = exact(reading.average) * count
    ratio = _ratio(total / count, target)
    if ratio is None:
        return MetricRecommendation(name, UNBOUNDED, None, f"{name}: load against a zero target: unbounded")
    missing = reading.missing
    unready = max(reading.unready, current - count - missing, 0)
    up = ratio >= 1
    add_unready = up and unready > 0
    head = f"{name}: {_fmt(reading.average)} per pod / target {_fmt(target)} over {count} pods"
    if not add_unready and missing == 0:
        raw = ratio * count
        if _tolerated(current, raw, tol):
            return MetricRecommendation(name, current, raw, f"{head} = {_fmt(raw)}, within {tol}%: keep {current}")
        return MetricRecommendation(name, _ceil(raw), raw, f"{head} = {_fmt(raw)} -> {_ceil(raw)}")
    pods = count + missing + (unready if add_unready else 0)
    if not up:
        total += missing * target
    new_ratio = total / pods / target
    raw = new_ratio * pods
    assumed = f"{missing} missing at {'zero' if up else 'target'}" + (
        f", {unready} unready at zero" if add_unready else ""
    )
    head = f"{head} ({assumed}) = {_fmt(raw)}"
    if (new_ratio >= 1) != up or new_ratio == 1:
        return MetricRecommendation(name, current, raw, f"{head}: direction unclear, keep {current}")
    if _tolerated(current, raw, tol):
        return MetricRecommendation(name, current, raw, f"{head}, within {tol}%: keep {current}")
    desired = _ceil(raw)
    if (up and desired < current) or (not up and desired > current):
        return MetricRecommendation(name, current, raw, f"{head} -> {desired} against the direction: keep {current}")
    return MetricRecommendation(name, desired, raw, f"{head} -> {desired}")


def recommend_metric(
    target: MetricTarget, reading: Reading | None, current: int, tolerance_percent: int
) -> MetricRecommendation:
    """Recommend replicas for one metric.

    Args:
        target: The metric and its target value.
        reading: The metric over the window (``None``: no data).
        current: Current replicas.
        tolerance_percent: ``spec.tolerancePercent``.

    Returns:
        The metric's recommendation.
    """
    name, goal = target.name, target.exact_target
    if reading is None:
        return MetricRecommendation(name, None, None, f"{name}: no data")
    if isinstance(reading, ExternalReading):
        if not math.isfinite(reading.value):
            return MetricRecommendation(name, None, None, f"{name}: non-finite value")
        return _external(name, exact(reading.value), goal, current, tolerance_percent)
    if reading.reporting <= 0 or not math.isfinite(reading.average):
        return MetricRecommendation(name, None, None, f"{name}: no pod reported it")
    return _pods(name, reading, goal, current, tolerance_percent)


def recommend(
    targets: Sequence[MetricTarget], readings: Mapping[str, Reading | None], current: int, tolerance_percent: int
) -> Recommendation:
    """Recommend replicas over all metrics (the maximum; missing metrics block scale-down).

    Args:
        targets: The metric targets.
        readings: Readings by metric key (absent or ``None``: no data).
        current: Current replicas.
        tolerance_percent: ``spec.tolerancePercent``.

    Returns:
        The combined recommendation (unclamped).
    """
    per_metric = tuple(recommend_metric(t, readings.get(t.name), current, tolerance_percent) for t in targets)
    values = [m.replicas for m in per_metric if m.replicas is not None]
    reasons = [m.reason for m in per_metric]
    if not values:
        return Recommendation(None, per_metric, (*reasons, "no metric has data: no recommendation"))
    best = max(values)
    if len(values) < len(per_metric) and best < current:
        reasons.append(f"some metrics have no data: no scale-down below {current}")
        best = current
    return Recommendation(best, per_metric, tuple(reasons))


def utilization(target: MetricTarget, reading: Reading | None, current: int) -> Fraction | None:
    """Return the load of one metric as a multiple of its target (the panic-mode trigger's measure).

    Per-pod readings give ``average / target``; an external total gives ``value / (target * current)``, the
    share of one replica. ``None`` means no data; a zero target (or zero replicas) with load gives a very large
    value.

    Args:
        target: The metric and its target.
        reading: The metric over the panic window.
        current: Current replicas.
    """
    goal = target.exact_target
    if reading is None:
        return None
    if isinstance(reading, ExternalReading):
        if not math.isfinite(reading.value):
            return None
        value, share = exact(reading.value), goal * current
    else:
        if reading.reporting <= 0 or not math.isfinite(reading.average):
            return None
        value, share = exact(reading.average), goal
    if share == 0:
        return Fraction(UNBOUNDED) if value > 0 else Fraction(0)
    return value / share
