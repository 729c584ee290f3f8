"""The full decision of one pass for one scaling unit: windows, panic mode, behaviour, bounds.

Guarantees:

* Pure and deterministic: ``decide(spec, current, now, samples, state)`` depends only on its arguments and
  returns a new :class:`~kthena_py.plan.autoscaling.window.WindowState`; the caller stores it (the history part
  level-based, e.g. in an annotation; the metric windows in memory).
* Order of a pass: append the samples to the metric windows; read the stable and panic windows; recommend
  (:mod:`~kthena_py.plan.autoscaling.recommend`); decide the mode; correct
  (:mod:`~kthena_py.plan.autoscaling.behavior`); clamp to ``[minReplicas, maxReplicas]``; record the
  recommendation and the result in the history.
* Panic mode (only with a ``panicPolicy`` whose ``panicModeHold`` is positive and whose threshold is set) is
  entered when some metric over the panic window reaches ``panicThresholdPercent`` of its target (the API's
  definition; see :func:`~kthena_py.plan.autoscaling.recommend.utilization`), and lasts until
  ``panicModeHold`` after the last pass that triggered it. In panic mode the panic window's recommendation is
  used, never below ``current``, limited by the panic rate limit; stabilization windows are skipped.
* With no data at all the pass holds ``current`` (clamped to the bounds) and records no recommendation.
* Bounds win over behaviour: a ``current`` outside ``[min, max]`` is brought back in one pass; the reasons say
  so. Otherwise the result never leaves the behaviour box reported in :attr:`Decision.allowed`.
* A fresh or lost history is seeded with ``current`` at ``now``: after a restart that lost the history, the
  first scale-down waits one ``scaleDown.stabilizationWindow`` and scale-up limits are measured from ``current``.
* A target raised from zero (the activator's 0 -> 1 write, or any other) is not sent back to zero before one
  stable window has passed since the pass that first saw it (:mod:`~kthena_py.plan.autoscaling.wake`): the
  metrics get a whole window of observations taken after the wake-up (the held request included) first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from kthena_py.plan.autoscaling.behavior import correct
from kthena_py.plan.autoscaling.recommend import Recommendation, recommend, utilization
from kthena_py.plan.autoscaling.spec import ScalingSpec
from kthena_py.plan.autoscaling.wake import guard_zero
from kthena_py.plan.autoscaling.window import MetricSample, Reading, WindowState

__all__ = ["Decision", "Mode", "decide", "record_applied"]

Mode = Literal["Stable", "Panic"]


@dataclass(frozen=True)
class Decision:
    """The outcome of one pass.

    Attributes:
        desired: Replicas to apply (within bounds).
        mode: ``"Stable"`` or ``"Panic"``.
        recommended: The stable-window recommendation before behaviour and bounds (``None``: no data).
        allowed: ``(low, high)``: every count the behaviour limits and bounds allow this pass (``desired`` is in
            it; a ratio repair that leaves it must say so).
        reasons: Human-readable explanations, in the order they were applied.
        state: The state to store for the next pass (assumes ``desired`` is applied; see :func:`record_applied`).
    """

    desired: int
    mode: Mode
    recommended: int | None
    allowed: tuple[int, int]
    reasons: tuple[str, ...]
    state: WindowState


def _clamp(value: int, low: int, high: int) -> int:
    return min(max(value, low), high)


def _readings(spec: ScalingSpec, state: WindowState, now: float, length: float) -> dict[str, Reading | None]:
    return {m.name: state.metrics.reading(m.name, now, length, spec.quantile) for m in spec.metrics}


def _panic_triggered(
    spec: ScalingSpec, readings: Mapping[str, Reading | None], current: int
) -> tuple[bool, str | None]:
    panic = spec.behavior.scale_up.panic_policy
    if panic is None or panic.panic_threshold_percent is None or panic.panic_mode_hold <= 0:
        return False, None
    threshold = Fraction(panic.panic_threshold_percent, 100)
    for metric in spec.metrics:
        load = utilization(metric, readings.get(metric.name), current)
        if load is not None and load >= threshold:
            return True, (
                f"panic: {metric.name} at {float(load) * 100:.0f}% of target >= {panic.panic_threshold_percent}%"
            )
    return False, None


def _horizon(spec: ScalingSpec) -> float:
    return spec.behavior.horizon


def record_applied(state: WindowState, spec: ScalingSpec, now: float, replicas: int) -> WindowState:
    """Return ``state`` with ``replicas`` recorded as the count applied at ``now`` (e.g. after a ratio repair).

    Args:
        state: The state returned in :attr:`Decision.state` for the pass at ``now``.
        spec: The spec of the pass.
        now: Time of the pass.
        replicas: The count actually applied.
    """
    history = state.history.record(now, None, replicas, _horizon(spec))
    return WindowState(state.metrics, history)


def decide(
    spec: ScalingSpec,
    current: int,
    now: float,
    samples: Mapping[str, MetricSample | None],
    state: WindowState | None = None,
) -> Decision:
    """Decide the replica count of one scaling unit for the pass at ``now``.

    Args:
        spec: Metrics, bounds, tolerance, behaviour and windows.
        current: Current replicas (``spec.replicas`` of the target).
        now: Time of the pass in seconds (any epoch, consistent across passes).
        samples: This pass's samples by metric key (absent or ``None``: no data this pass).
        state: The state returned by the previous pass (``None``: fresh).

    Returns:
        The decision, including the state for the next pass.
    """
    state = state or WindowState()
    metrics = state.metrics.add(now, samples).prune(now, spec.stable_window)
    history = state.history
    reasons: list[str] = []
    if history.empty:
        history = history.record(now, current, current, _horizon(spec))
        reasons.append(f"no scaling history: seeded with the current {current} replicas")
    working = WindowState(metrics, history)
    stable = recommend(spec.metrics, _readings(spec, working, now, spec.stable_window), current, spec.tolerance_percent)
    reasons.extend(f"stable window: {r}" for r in stable.reasons)

    panic_readings = _readings(spec, working, now, spec.panic_window)
    triggered, why = _panic_triggered(spec, panic_readings, current)
    panic_until = history.panic_until
    policy = spec.behavior.scale_up.panic_policy
    if triggered and policy is not None:
        panic_until = now + policy.panic_mode_hold
        reasons.append(f"{why}: panic mode until {panic_until:g}")
    in_panic = policy is not None and policy.panic_mode_hold > 0 and panic_until is not None and now <= panic_until
    if in_panic and not triggered:
        reasons.append(f"panic mode held until {panic_until:g}")
    history = history.with_panic_until(panic_until)

    target: int | None = stable.replicas
    if in_panic:
        fast: Recommendation = recommend(spec.metrics, panic_readings, current, spec.tolerance_percent)
        reasons.extend(f"panic window: {r}" for r in fast.reasons)
        if fast.replicas is not None:
            target = fast.replicas

    correction = correct(history, now, current if target is None else target, current, spec.behavior, in_panic)
    high = spec.max_replicas if correction.high is None else correction.high
    allowed = (
        _clamp(correction.low, spec.min_replicas, spec.max_replicas),
        _clamp(high, spec.min_replicas, spec.max_replicas),
    )
    if target is None:
        desired = _clamp(current, spec.min_replicas, spec.max_replicas)
        reasons.append(f"no recommendation: hold {desired}")
    else:
        reasons.extend(correction.reasons)
        desired = _clamp(correction.replicas, spec.min_replicas, spec.max_replicas)
        if desired != correction.replicas:
            reasons.append(f"bounds [{spec.min_replicas}, {spec.max_replicas}]: {correction.replicas} -> {desired}")
    desired, guarded = guard_zero(desired, state.history, current, now, spec.stable_window, spec.max_replicas)
    if guarded is not None:
        reasons.append(guarded)
        allowed = (min(allowed[0], desired), max(allowed[1], desired))
    reasons.append(f"desired {desired} (current {current}, {'Panic' if in_panic else 'Stable'} mode)")
    history = history.record(now, stable.replicas, desired, _horizon(spec))
    return Decision(
        desired=desired,
        mode="Panic" if in_panic else "Stable",
        recommended=stable.replicas,
        allowed=allowed,
        reasons=tuple(reasons),
        state=WindowState(metrics, history),
    )
