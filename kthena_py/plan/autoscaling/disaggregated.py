"""One pass for a disaggregated target: a decision per role, then the ratio repair.

Guarantees:

* Roles are processed in name order. A *fixed* role (``0 < minReplicas == maxReplicas``) gets no metrics and is
  kept at its size. Any other role uses its own ``metrics`` when non-empty, else ``spec.metrics`` (replaced,
  never merged), and goes through :func:`~kthena_py.plan.autoscaling.decide.decide` with its own state.
* A role without data holds its current count (clamped); the other roles still scale and the ratio repair
  still applies (Kthena abandons the whole pass instead).
* The ratio repair (:func:`~kthena_py.plan.autoscaling.ratio.repair_ratio`) receives every role's behaviour box;
  the final counts never exceed a role's bounds, and a count outside its behaviour box is reported in
  :attr:`DisaggregatedDecision.reasons` and :attr:`RoleDecision.limits_exceeded`.
* Each role's returned state records the **final** count (after the repair) as applied, so later rate limits
  are measured from what was actually applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kthena_py.plan.autoscaling.decide import Mode, decide, record_applied
from kthena_py.plan.autoscaling.ratio import RatioResult, repair_ratio
from kthena_py.plan.autoscaling.spec import Behavior, MetricTarget, RatioConstraint, RoleSpec, ScalingSpec
from kthena_py.plan.autoscaling.window import MetricSample, WindowState

__all__ = ["DisaggregatedDecision", "RoleDecision", "decide_disaggregated", "role_metrics"]


@dataclass(frozen=True)
class RoleDecision:
    """The outcome of one role.

    Attributes:
        name: Role name.
        current: Current replicas of the role.
        recommended: Stable-window recommendation (``None``: no data or fixed).
        desired: Count after behaviour and bounds, before the ratio repair (the status' ``desiredReplicas``).
        final: Count to apply.
        mode: ``"Stable"`` or ``"Panic"``.
        limits_exceeded: True when ``final`` lies outside the role's behaviour box (to satisfy the ratio).
        reasons: Human-readable explanations of the role's decision.
        state: The role's state for the next pass.
    """

    name: str
    current: int
    recommended: int | None
    desired: int
    final: int
    mode: Mode
    limits_exceeded: bool
    reasons: tuple[str, ...]
    state: WindowState


@dataclass(frozen=True)
class DisaggregatedDecision:
    """The outcome of one pass over all roles.

    Attributes:
        roles: Per-role outcomes, sorted by name.
        ratio: The ratio repair (``None`` without a constraint).
        reasons: Ratio-level explanations.
    """

    roles: tuple[RoleDecision, ...]
    ratio: RatioResult | None
    reasons: tuple[str, ...] = field(default=())

    @property
    def ratio_adjusted(self) -> bool:
        """``status.disaggregatedStatus.ratioAdjusted``."""
        return self.ratio is not None and self.ratio.adjusted

    @property
    def current_ratio(self) -> str:
        """``status.disaggregatedStatus.ratioStatus.currentRatio``."""
        return "" if self.ratio is None else self.ratio.current_ratio

    def replicas(self) -> dict[str, int]:
        """Final replicas per role."""
        return {role.name: role.final for role in self.roles}


def role_metrics(role: RoleSpec, spec_metrics: tuple[MetricTarget, ...]) -> tuple[MetricTarget, ...]:
    """The metrics of a role: none when fixed, its own when set, else ``spec.metrics``."""
    if role.fixed:
        return ()
    return role.metrics or spec_metrics


def decide_disaggregated(
    roles: Mapping[str, RoleSpec],
    current: Mapping[str, int],
    now: float,
    samples: Mapping[str, Mapping[str, MetricSample | None]],
    states: Mapping[str, WindowState | None],
    *,
    spec_metrics: tuple[MetricTarget, ...] = (),
    constraint: RatioConstraint | None = None,
    tolerance_percent: int = 10,
    behavior: Behavior | None = None,
    stable_window: float = 60.0,
    panic_window: float = 6.0,
    quantile: float = 0.95,
) -> DisaggregatedDecision:
    """Decide every role of a disaggregated target for the pass at ``now``.

    Args:
        roles: Role specs by name.
        current: Current replicas by role (a missing role raises ``KeyError``).
        now: Time of the pass in seconds.
        samples: This pass's samples by role, then by metric key.
        states: Each role's state from the previous pass (absent or ``None``: fresh).
        spec_metrics: ``spec.metrics`` (inherited by roles without their own metrics).
        constraint: ``ratioConstraint``.
        tolerance_percent: ``spec.tolerancePercent``.
        behavior: ``spec.behavior`` (shared by all roles; ``None``: defaults).
        stable_window: Stable window in seconds.
        panic_window: Panic window in seconds.
        quantile: Quantile taken from histogram metrics.

    Returns:
        The per-role decisions and the ratio repair.
    """
    behavior = behavior or Behavior()
    decided: dict[str, tuple[ScalingSpec, int, int | None, int, Mode, tuple[int, int], tuple[str, ...], WindowState]]
    decided = {}
    for name in sorted(roles):
        role = roles[name]
        spec = ScalingSpec(
            metrics=role_metrics(role, spec_metrics),
            min_replicas=role.min_replicas,
            max_replicas=role.max_replicas,
            tolerance_percent=tolerance_percent,
            behavior=behavior,
            stable_window=stable_window,
            panic_window=panic_window,
            quantile=quantile,
        )
        now_replicas = current[name]
        state = states.get(name) or WindowState()
        if role.fixed:
            fixed = role.min_replicas
            why = (f"fixed role: {fixed} replicas",)
            decided[name] = (spec, now_replicas, None, fixed, "Stable", (fixed, fixed), why, state)
            continue
        decision = decide(spec, now_replicas, now, samples.get(name, {}), state)
        decided[name] = (
            spec,
            now_replicas,
            decision.recommended,
            decision.desired,
            decision.mode,
            decision.allowed,
            decision.reasons,
            decision.state,
        )
    ratio = None
    finals = {name: entry[3] for name, entry in decided.items()}
    exceeded: tuple[str, ...] = ()
    if constraint is not None:
        ratio = repair_ratio(
            finals,
            {name: (roles[name].min_replicas, roles[name].max_replicas) for name in roles},
            constraint,
            {name: entry[5] for name, entry in decided.items()},
        )
        finals = dict(ratio.replicas)
        exceeded = ratio.limits_exceeded
    results = []
    for name, (spec, now_replicas, recommended, desired, mode, _, reasons, state) in decided.items():
        final = finals[name]
        if final != desired and not roles[name].fixed:
            state = record_applied(state, spec, now, final)
        results.append(
            RoleDecision(name, now_replicas, recommended, desired, final, mode, name in exceeded, reasons, state)
        )
    return DisaggregatedDecision(tuple(results), ratio, () if ratio is None else ratio.reasons)
