"""Replay a load trace through the real decision code with a virtual clock.

Guarantees:

* Pure: :func:`simulate` calls :func:`~kthena_py.plan.autoscaling.decide.decide` once per virtual sync period,
  passing the state it returned last time, exactly as a controller would; no clock is read.
* The metric value seen at time ``t`` is the value of the last trace point at or before ``t`` (step function);
  before the first point there is no data.
* ``source="external"``: each value is a Prometheus-style total for the whole target (scale from zero works).
  ``source="pods"``: each value is the total load, spread evenly over the *ready* replicas; replicas become
  ready ``ready_delay`` seconds after they were added (scale-downs remove not-yet-ready replicas first), and
  with no ready replica there is no data, as with real pod scraping.
* Applying a decision is instantaneous: the next pass sees ``desired`` as its current replica count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from kthena_py.plan.autoscaling.decide import Mode, decide
from kthena_py.plan.autoscaling.spec import ScalingSpec
from kthena_py.plan.autoscaling.window import ExternalSample, MetricSample, PodSample, WindowState

__all__ = ["TimelinePoint", "TracePoint", "simulate"]


@dataclass(frozen=True)
class TracePoint:
    """A load observation: metric values (by metric key) from ``time`` on."""

    time: float
    values: Mapping[str, float]


@dataclass(frozen=True)
class TimelinePoint:
    """The outcome of one virtual pass.

    Attributes:
        time: Virtual time of the pass.
        current: Replicas before the pass.
        ready: Ready replicas before the pass.
        desired: Replicas after the pass.
        recommended: The stable recommendation (``None``: no data).
        mode: ``"Stable"`` or ``"Panic"``.
        values: The metric values the pass saw.
        reasons: The decision's explanations.
    """

    time: float
    current: int
    ready: int
    desired: int
    recommended: int | None
    mode: Mode
    values: Mapping[str, float]
    reasons: tuple[str, ...]


def _value_at(trace: Sequence[TracePoint], time: float) -> Mapping[str, float]:
    seen: Mapping[str, float] = {}
    for point in trace:
        if point.time > time:
            break
        seen = point.values
    return seen


def simulate(
    spec: ScalingSpec,
    trace: Sequence[TracePoint],
    initial_replicas: int,
    *,
    sync_period: float = 15.0,
    start: float | None = None,
    end: float | None = None,
    source: Literal["external", "pods"] = "external",
    ready_delay: float = 0.0,
) -> tuple[TimelinePoint, ...]:
    """Replay ``trace`` and return the replica timeline.

    Args:
        spec: The scaling spec.
        trace: Load observations (sorted by time on entry).
        initial_replicas: Replicas at ``start`` (all ready).
        sync_period: Seconds between passes (> 0).
        start: First pass (default: the first trace point; must be given for an empty trace).
        end: Last pass at or before this time (default: the last trace point).
        source: How values reach the decision (see the module docstring).
        ready_delay: Seconds before an added replica is ready (``source="pods"`` only).

    Returns:
        One point per pass, in time order.

    Raises:
        ValueError: If ``sync_period`` is not positive or the range is undefined.
    """
    if sync_period <= 0:
        raise ValueError("sync_period must be > 0")
    points = sorted(trace, key=lambda p: p.time)
    if start is None or end is None:
        if not points:
            raise ValueError("start and end are required for an empty trace")
        start = points[0].time if start is None else start
        end = points[-1].time if end is None else end
    replicas = initial_replicas
    ready_at = [start] * initial_replicas  # when each replica became (or becomes) ready, oldest first
    state: WindowState | None = None
    timeline: list[TimelinePoint] = []
    step = 0
    while (now := start + step * sync_period) <= end:
        step += 1
        values = _value_at(points, now)
        ready = sum(1 for t in ready_at if t <= now)
        samples: dict[str, MetricSample | None] = {}
        for metric in spec.metrics:
            value = values.get(metric.name)
            if value is None:
                continue
            if source == "external":
                samples[metric.name] = ExternalSample(value)
            elif ready > 0:
                samples[metric.name] = PodSample(total=value, reporting=ready, unready=replicas - ready)
        decision = decide(spec, replicas, now, samples, state)
        state = decision.state
        timeline.append(
            TimelinePoint(
                now,
                replicas,
                ready,
                decision.desired,
                decision.recommended,
                decision.mode,
                dict(values),
                decision.reasons,
            )
        )
        if decision.desired > replicas:
            ready_at.extend([now + ready_delay] * (decision.desired - replicas))
        elif decision.desired < replicas:
            ready_at.sort()
            del ready_at[decision.desired :]  # drop the newest (least ready) replicas first
        replicas = decision.desired
    return tuple(timeline)
