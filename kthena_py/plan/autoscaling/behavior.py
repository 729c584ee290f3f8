"""Behaviour limits: stabilization windows and rate limits (instances / percent per period, Or / And).

Guarantees:

* Stabilization (stable mode only), as in the Kubernetes HPA: the result is ``current`` raised to the lowest
  recommendation of the scale-up window and lowered to the highest recommendation of the scale-down window
  (both windows include the new recommendation; a missing or zero window holds only it).
* Rate limits are a box ``[low, high]`` that always contains ``current``:

  - scale-up, stable mode: from ``base`` = the **lowest** replica count in effect during the last
    ``scaleUp.stablePolicy.period``, ``high = max(base + instances, base + base * percent // 100)`` for ``Or``
    and ``min(...)`` for ``And``. With ``base == 0`` the percent rule allows nothing, so only the instances rule
    applies (otherwise ``And`` could never leave zero);
  - scale-up, panic mode: ``high = base + base * percent // 100`` over the panic period, no limit when
    ``base == 0``; and ``low = current``: panic mode never scales down;
  - scale-down: from ``base`` = the **highest** replica count in effect during the last ``scaleDown.period``,
    ``low = min(base - instances, base - base * percent // 100)`` for ``Or``, ``max(...)`` for ``And``
    (never below 0);
  - a zero (or unset) period disables that direction's limit.

* Every value returned by :func:`correct` lies in that box; min/max bounds are applied afterwards by the caller
  and win over the box (the box is clamped too, so it always holds the final answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from kthena_py.plan.autoscaling.spec import Behavior, StablePolicy
from kthena_py.plan.autoscaling.window import ScalingHistory

__all__ = ["Correction", "correct", "panic_ceiling", "scale_down_floor", "scale_up_ceiling", "stabilize"]


@dataclass(frozen=True)
class Correction:
    """The recommendation after behaviour limits.

    Attributes:
        replicas: Corrected replicas (not yet clamped to min/max).
        low: Lowest count the limits allow this pass.
        high: Highest count the limits allow this pass (``None``: unlimited).
        reasons: Human-readable explanations of every limit that changed the value.
    """

    replicas: int
    low: int
    high: int | None
    reasons: tuple[str, ...]


def stabilize(
    history: ScalingHistory, now: float, recommendation: int, current: int, behavior: Behavior
) -> tuple[int, str | None]:
    """Apply the stabilization windows (HPA semantics).

    Args:
        history: Past recommendations.
        now: Time of this pass.
        recommendation: This pass's recommendation.
        current: Current replicas.
        behavior: The behaviour.

    Returns:
        The stabilized value and, when it differs from the recommendation, a reason.
    """
    up_window = behavior.scale_up.stable_policy.stabilization_window or 0.0
    down_window = behavior.scale_down.stabilization_window or 0.0
    up_floor = min([recommendation, *history.recommendations_within(now, up_window)])
    down_ceiling = max([recommendation, *history.recommendations_within(now, down_window)])
    value = min(max(current, up_floor), down_ceiling)
    if value == recommendation:
        return value, None
    if value > recommendation:
        return value, f"scale-down stabilization ({down_window:g}s): highest recent recommendation allows {value}"
    return value, f"scale-up stabilization ({up_window:g}s): lowest recent recommendation allows {value}"


def _base(history: ScalingHistory, now: float, period: float, current: int, lowest: bool) -> int:
    values = [current, *history.replicas_in_effect(now, period)]
    return min(values) if lowest else max(values)


def scale_up_ceiling(history: ScalingHistory, now: float, current: int, policy: StablePolicy) -> int | None:
    """Highest replica count the stable scale-up policy allows now (``None``: unlimited)."""
    if policy.period <= 0:
        return None
    base = _base(history, now, policy.period, current, lowest=True)
    by_instances = base + policy.instances
    if base == 0:
        return max(by_instances, current)
    by_percent = base + base * policy.percent // 100
    bound = max(by_instances, by_percent) if policy.select_policy == "Or" else min(by_instances, by_percent)
    return max(bound, current)


def scale_down_floor(history: ScalingHistory, now: float, current: int, policy: StablePolicy) -> int:
    """Lowest replica count the scale-down policy allows now (0 when unlimited)."""
    if policy.period <= 0:
        return 0
    base = _base(history, now, policy.period, current, lowest=False)
    by_instances = base - policy.instances
    by_percent = base - base * policy.percent // 100
    bound = min(by_instances, by_percent) if policy.select_policy == "Or" else max(by_instances, by_percent)
    return min(max(bound, 0), current)


def panic_ceiling(history: ScalingHistory, now: float, current: int, behavior: Behavior) -> int | None:
    """Highest replica count panic mode allows now (``None``: unlimited)."""
    panic = behavior.scale_up.panic_policy
    if panic is None or not panic.period:
        return None
    base = _base(history, now, panic.period, current, lowest=True)
    if base == 0:
        return None
    return max(base + base * panic.percent // 100, current)


def correct(
    history: ScalingHistory, now: float, recommendation: int, current: int, behavior: Behavior, panic: bool
) -> Correction:
    """Apply stabilization (stable mode) and rate limits to a recommendation.

    Args:
        history: The scaling history before this pass.
        now: Time of this pass.
        recommendation: The recommendation (unclamped).
        current: Current replicas.
        behavior: The behaviour.
        panic: Whether this pass is in panic mode.

    Returns:
        The corrected value with the box of allowed values.
    """
    reasons: list[str] = []
    if panic:
        high = panic_ceiling(history, now, current, behavior)
        value = max(recommendation, current)
        if recommendation < current:
            reasons.append(f"panic mode never scales down: keep {current}")
        if high is not None and value > high:
            reasons.append(f"panic rate limit: at most {high}")
            value = high
        return Correction(value, current, high, tuple(reasons))
    value, why = stabilize(history, now, recommendation, current, behavior)
    if why:
        reasons.append(why)
    up = behavior.scale_up.stable_policy
    high = scale_up_ceiling(history, now, current, up)
    low = scale_down_floor(history, now, current, behavior.scale_down)
    if high is not None and value > high:
        reasons.append(
            f"scale-up limit ({up.instances} instances {up.select_policy} {up.percent}% per {up.period:g}s):"
            f" at most {high}"
        )
        value = high
    if value < low:
        down = behavior.scale_down
        reasons.append(
            f"scale-down limit ({down.instances} instances {down.select_policy} {down.percent}% per"
            f" {down.period:g}s): at least {low}"
        )
        value = low
    return Correction(value, low, high, tuple(reasons))
