"""Frozen inputs of the autoscaling planners (a plain-data mirror of the AutoscalingPolicy API).

Guarantees:

* Every class is a frozen dataclass whose fields and defaults mirror the API reference (CRD defaults, not the
  mutating webhook's: a controller that wants the webhook defaults applies them before building these objects).
  Durations are seconds (``float``); ``None`` for an optional duration means "not set" and counts as 0.
* Construction validates ranges (``ValueError`` with a readable message), so the planners never see a negative
  percent, an unknown ``selectPolicy``, ``minReplicas > maxReplicas`` or a non-finite target.
* Numbers that decide integer boundaries (metric targets, ratio bounds, costs) are kept exactly: ``Decimal``,
  ``Fraction`` and ``int`` are exact; a ``float`` is read as the decimal it prints as (``0.7`` is 7/10, not the
  nearest binary double), which is what a user who wrote ``0.7`` meant. See :func:`exact`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Literal

__all__ = [
    "Behavior",
    "CostParam",
    "MetricTarget",
    "Number",
    "PanicPolicy",
    "RatioConstraint",
    "RoleSpec",
    "ScaleUpPolicy",
    "ScalingSpec",
    "SelectPolicy",
    "StablePolicy",
    "exact",
]

Number = int | float | Decimal | Fraction
"""A numeric input; see :func:`exact` for how each type is read."""

SelectPolicy = Literal["Or", "And"]

_MAX_DURATION = 30 * 60.0


def exact(value: Number | str) -> Fraction:
    """Return ``value`` as an exact fraction.

    Args:
        value: An ``int``, ``Fraction``, ``Decimal``, decimal string, or ``float`` (read through its shortest
            ``repr``, so ``0.7`` becomes ``7/10``).

    Returns:
        The exact rational value.

    Raises:
        ValueError: If the value is NaN or infinite, or the string is not a decimal number.
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, int | Fraction):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number {value!r}")
        return Fraction(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"non-finite number {value!r}")
        return Fraction(value)
    try:
        parsed = Decimal(value)
    except ArithmeticError as err:
        raise ValueError(f"not a decimal number: {value!r}") from err
    return exact(parsed)


def _check_duration(name: str, value: float | None) -> None:
    if value is not None and not (0 <= value <= _MAX_DURATION):
        raise ValueError(f"{name} must be between 0 and 30 minutes, got {value!r}")


def _check_percent(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")


def _check_replicas(min_replicas: int, max_replicas: int) -> None:
    if min_replicas < 0:
        raise ValueError(f"minReplicas must be >= 0, got {min_replicas}")
    if max_replicas < min_replicas:
        raise ValueError(f"minReplicas ({min_replicas}) must be <= maxReplicas ({max_replicas})")


@dataclass(frozen=True)
class MetricTarget:
    """One entry of ``spec.metrics`` (or of a role's ``metrics``).

    Attributes:
        name: The metric key (the key of ``metricSources``).
        target: The target value (a number or a decimal string): per replica for pod metrics, the per-replica
            share of the total for external (Prometheus) metrics, the latency itself for histogram metrics.
    """

    name: str
    target: Number | str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("metric name must not be empty")
        if exact(self.target) < 0:
            raise ValueError(f"metric {self.name}: target must be >= 0, got {self.target!r}")

    @property
    def exact_target(self) -> Fraction:
        """The target as an exact fraction."""
        return exact(self.target)


@dataclass(frozen=True)
class StablePolicy:
    """``AutoscalingPolicyStablePolicy``: the limits of one scaling direction outside panic mode.

    Attributes:
        instances: Replicas that may be added (or removed) per ``period``.
        percent: Percentage of the replica count that may be added (or removed) per ``period``.
        period: Length in seconds of the rate-limit window; 0 disables the limits.
        select_policy: ``Or``: the more permissive of the two limits applies; ``And``: the stricter one.
        stabilization_window: Seconds of recommendation history considered (``None``/0: none).
    """

    instances: int = 1
    percent: int = 100
    period: float = 15.0
    select_policy: SelectPolicy = "Or"
    stabilization_window: float | None = None

    def __post_init__(self) -> None:
        if self.instances < 0:
            raise ValueError(f"instances must be >= 0, got {self.instances}")
        _check_percent("percent", self.percent, 0, 1000)
        if self.select_policy not in ("Or", "And"):
            raise ValueError(f"selectPolicy must be Or or And, got {self.select_policy!r}")
        _check_duration("period", self.period)
        _check_duration("stabilizationWindow", self.stabilization_window)


@dataclass(frozen=True)
class PanicPolicy:
    """``AutoscalingPolicyPanicPolicy``: fast scale-up while a burst lasts.

    Attributes:
        percent: Percentage of the replica count that may be added per ``period`` in panic mode.
        period: Rate-limit window in seconds (``None``/0: no limit in panic mode).
        panic_threshold_percent: Panic mode is entered when a metric reaches this percentage of its target
            (``None``: never).
        panic_mode_hold: Seconds panic mode lasts after the last trigger; 0 disables panic mode.
    """

    percent: int = 1000
    period: float | None = None
    panic_threshold_percent: int | None = 200
    panic_mode_hold: float = 60.0

    def __post_init__(self) -> None:
        _check_percent("percent", self.percent, 0, 1000)
        if self.panic_threshold_percent is not None:
            _check_percent("panicThresholdPercent", self.panic_threshold_percent, 110, 1000)
        _check_duration("period", self.period)
        _check_duration("panicModeHold", self.panic_mode_hold)


@dataclass(frozen=True)
class ScaleUpPolicy:
    """``AutoscalingPolicyScaleUpPolicy``: the stable policy, plus an optional panic policy."""

    stable_policy: StablePolicy = field(default_factory=StablePolicy)
    panic_policy: PanicPolicy | None = None


@dataclass(frozen=True)
class Behavior:
    """``AutoscalingPolicyBehavior``."""

    scale_up: ScaleUpPolicy = field(default_factory=ScaleUpPolicy)
    scale_down: StablePolicy = field(default_factory=StablePolicy)

    @property
    def horizon(self) -> float:
        """The longest history (seconds) any limit of this behaviour looks at."""
        spans = [
            self.scale_down.period,
            self.scale_down.stabilization_window or 0.0,
            self.scale_up.stable_policy.period,
            self.scale_up.stable_policy.stabilization_window or 0.0,
        ]
        if self.scale_up.panic_policy is not None:
            spans.append(self.scale_up.panic_policy.period or 0.0)
        return max(spans)


@dataclass(frozen=True)
class ScalingSpec:
    """Everything the single-target decision needs (a homogeneous target, a heterogeneous total or one role).

    Attributes:
        metrics: Metric targets; an empty tuple means the target is fixed (it never has data).
        min_replicas: Lower bound (wins over every behaviour limit).
        max_replicas: Upper bound (wins over every behaviour limit).
        tolerance_percent: ``spec.tolerancePercent``.
        behavior: ``spec.behavior``.
        stable_window: Seconds of metric samples averaged for the stable recommendation.
        panic_window: Seconds of metric samples averaged for the panic trigger and panic recommendation.
        quantile: Quantile (0..1) taken from histogram metrics.
    """

    metrics: tuple[MetricTarget, ...]
    min_replicas: int
    max_replicas: int
    tolerance_percent: int = 10
    behavior: Behavior = field(default_factory=Behavior)
    stable_window: float = 60.0
    panic_window: float = 6.0
    quantile: float = 0.95

    def __post_init__(self) -> None:
        _check_replicas(self.min_replicas, self.max_replicas)
        _check_percent("tolerancePercent", self.tolerance_percent, 0, 100)
        if not 0 < self.panic_window <= self.stable_window:
            raise ValueError("windows must satisfy 0 < panic_window <= stable_window")
        if not 0 <= self.quantile <= 1:
            raise ValueError(f"quantile must be in [0, 1], got {self.quantile}")
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate metric names in {names}")


@dataclass(frozen=True)
class RoleSpec:
    """One entry of ``disaggregatedTarget.roles``.

    Attributes:
        min_replicas: Lower bound of the role.
        max_replicas: Upper bound of the role.
        metrics: Role-level metrics; they replace ``spec.metrics`` for this role when non-empty.
    """

    min_replicas: int
    max_replicas: int
    metrics: tuple[MetricTarget, ...] = ()

    def __post_init__(self) -> None:
        _check_replicas(self.min_replicas, self.max_replicas)

    @property
    def fixed(self) -> bool:
        """A fixed role (``0 < minReplicas == maxReplicas``) needs no metrics and never changes."""
        return self.max_replicas > 0 and self.min_replicas == self.max_replicas


@dataclass(frozen=True)
class RatioConstraint:
    """``RoleRatioConstraint``: ``min_ratio <= replicas[numerator] / replicas[denominator] <= max_ratio``.

    The bounds are stored as exact fractions (see :func:`exact`).
    """

    numerator_role: str
    denominator_role: str
    min_ratio: Fraction
    max_ratio: Fraction

    def __init__(self, numerator_role: str, denominator_role: str, min_ratio: Number | str, max_ratio: Number | str):
        low, high = exact(min_ratio), exact(max_ratio)
        if numerator_role == denominator_role:
            raise ValueError("numeratorRole and denominatorRole must differ")
        if low < 0 or high <= 0:
            raise ValueError("minRatio must be >= 0 and maxRatio must be > 0")
        if low > high:
            raise ValueError("minRatio must be <= maxRatio")
        object.__setattr__(self, "numerator_role", numerator_role)
        object.__setattr__(self, "denominator_role", denominator_role)
        object.__setattr__(self, "min_ratio", low)
        object.__setattr__(self, "max_ratio", high)


@dataclass(frozen=True)
class CostParam:
    """One entry of ``heterogeneousTarget.params`` as the optimizer sees it.

    Attributes:
        name: A unique key of the target (e.g. ``namespace/name``).
        cost: Relative cost of one replica (any non-negative number; read exactly).
        min_replicas: Lower bound.
        max_replicas: Upper bound.
    """

    name: str
    cost: Number
    min_replicas: int
    max_replicas: int

    def __post_init__(self) -> None:
        _check_replicas(self.min_replicas, self.max_replicas)
        if exact(self.cost) < 0:
            raise ValueError(f"{self.name}: cost must be >= 0, got {self.cost!r}")

    @property
    def exact_cost(self) -> Fraction:
        """The cost as an exact fraction."""
        return exact(self.cost)
