"""Semantic validation of an AutoscalingPolicy (Kthena's validating webhook and CRD CEL rules).

Guarantees: pure; messages are the exact detail strings of autoscaler.md §5.2. Rules, in order: metrics,
targets (exactly one; ``targetRef`` kind and name), required metrics, metric sources, disaggregated roles and
ratio constraint, behaviour durations (0 to 30 minutes inclusive). Offline, a disaggregated role can only be
checked for a non-empty name: whether it exists in the ModelServing is a reconcile-time check.
"""

from __future__ import annotations

import math

from kthena_py.api.autoscaling import (
    AutoscalingPolicy,
    AutoscalingPolicyMetric,
    AutoscalingPolicyStablePolicy,
    DisaggregatedTarget,
    MetricSource,
    Target,
    target_ref_kind,
    target_ref_name,
)
from kthena_py.api.duration import Duration
from kthena_py.api.quantity import Quantity
from kthena_py.api.validation.errors import FieldError, invalid, required

__all__ = ["validate_autoscalingpolicy"]

_THIRTY_MINUTES_NS = 30 * 60 * 10**9


def _float(quantity: Quantity) -> float:
    """Go's ``AsFloat64Slow``: values beyond float64 range become infinite."""
    return float(quantity.value)


def _metrics(metrics: list[AutoscalingPolicyMetric] | None, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, metric in enumerate(metrics or []):
        target = _float(metric.target_value)
        if target <= 0 or math.isinf(target):
            message = "metric target value must be greater than 0 and not equal to infinity"
            errors.append(invalid(f"{path}[{index}].targetValue", metric.target_value, message))
        if metric.name in seen:
            message = f"duplicate metric name {metric.name} is not allowed"
            errors.append(invalid(f"{path}[{index}].name", metric.name, message))
        seen.add(metric.name)
    return errors


def _target_ref(target_ref: dict[str, object] | None, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = target_ref_kind(target_ref)
    if kind not in ("", "ModelServing"):
        errors.append(invalid(f"{path}.kind", kind, f"targetRef.kind must be ModelServing, but got {kind}"))
    name = target_ref_name(target_ref)
    if not name:
        errors.append(invalid(f"{path}.name", name, "targetRef.name must be set, but got empty"))
    return errors


def _sources(sources: dict[str, MetricSource] | None, names: set[str], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, source in (sources or {}).items():
        if key not in names:
            errors.append(invalid(f"{path}[{key}]", key, "metricSources key must match an effective metric name"))
        if source.pod is None and source.prometheus is None:
            errors.append(invalid(f"{path}[{key}]", "object", "one metric source backend config is required"))
        if source.pod is not None and source.prometheus is not None:
            errors.append(invalid(f"{path}[{key}]", "object", "pod and prometheus configs are mutually exclusive"))
    return errors


def _target(target: Target | None, path: str, names: set[str]) -> list[FieldError]:
    errors = _target_ref(target.target_ref if target else None, f"{path}.targetRef")
    if target is not None:
        errors.extend(_sources(target.metric_sources, names, f"{path}.metricSources"))
    return errors


def _bounds(minimum: int, maximum: int, path: str) -> list[FieldError]:
    if minimum > maximum:
        return [invalid(f"{path}.minReplicas", minimum, "minReplicas must be <= maxReplicas")]
    return []


def _disaggregated(policy: AutoscalingPolicy, target: DisaggregatedTarget) -> list[FieldError]:
    path = "spec.disaggregatedTarget"
    errors = _target_ref(target.target_ref, f"{path}.targetRef")
    spec_names = {metric.name for metric in policy.spec.metrics or []}
    for name, role in target.roles.items():
        role_path = f"{path}.roles[{name}]"
        if not name:
            message = "role name must refer to a ModelServing.spec.template.roles[].name and must not be empty"
            errors.append(invalid(role_path, name, message))
        errors.extend(_bounds(role.min_replicas, role.max_replicas, role_path))
        errors.extend(_metrics(role.metrics, f"{role_path}.metrics"))
        effective = {metric.name for metric in role.metrics} if role.metrics else spec_names
        fixed = role.min_replicas == role.max_replicas
        if not fixed and not effective:
            message = "metrics must be set on every non-fixed role when spec.metrics is empty"
            errors.append(required(f"{role_path}.metrics", message))
        if not fixed and effective and not role.metric_sources:
            message = "metricSources must be set on every non-fixed role when metrics are configured"
            errors.append(required(f"{role_path}.metricSources", message))
        errors.extend(_sources(role.metric_sources, effective, f"{role_path}.metricSources"))
    ratio = target.ratio_constraint
    if ratio is None:
        return errors
    if len(target.roles) < 2:
        message = "roles must contain at least two entries when ratioConstraint is configured"
        errors.append(invalid(path, "object", message))
    ratio_path = f"{path}.ratioConstraint"
    if ratio.numerator_role == ratio.denominator_role:
        errors.append(invalid(ratio_path, "object", "numeratorRole and denominatorRole must differ"))
    numerator = target.roles.get(ratio.numerator_role)
    denominator = target.roles.get(ratio.denominator_role)
    if numerator is None:
        errors.append(invalid(f"{ratio_path}.numeratorRole", ratio.numerator_role, "numeratorRole must exist in roles"))
    if denominator is None:
        message = "denominatorRole must exist in roles"
        errors.append(invalid(f"{ratio_path}.denominatorRole", ratio.denominator_role, message))
    low, high = _float(ratio.min_ratio), _float(ratio.max_ratio)
    if ratio.min_ratio > ratio.max_ratio:
        errors.append(invalid(f"{ratio_path}.minRatio", ratio.min_ratio, "minRatio must be <= maxRatio"))
    if math.isinf(low) or math.isinf(high):
        errors.append(invalid(ratio_path, "object", "ratio values must be finite"))
    elif low < 0 or high <= 0:
        errors.append(invalid(ratio_path, "object", "minRatio must be >= 0 and maxRatio must be > 0"))
    if numerator is None or denominator is None:
        return errors
    if (numerator.min_replicas == 0) != (denominator.min_replicas == 0):
        errors.append(invalid(ratio_path, "object", "ratio roles must be scalable-to-zero together"))
    unreachable = "ratioConstraint is not achievable within role replica bounds"
    if denominator.max_replicas > 0 and numerator.min_replicas / denominator.max_replicas > high:
        errors.append(invalid(ratio_path, "object", unreachable))
    if denominator.min_replicas > 0 and numerator.max_replicas / denominator.min_replicas < low:
        errors.append(invalid(ratio_path, "object", unreachable))
    return errors


def _duration(value: Duration | None, path: str, message: str) -> list[FieldError]:
    if value is not None and (value.nanoseconds < 0 or value.nanoseconds > _THIRTY_MINUTES_NS):
        return [invalid(path, value, message)]
    return []


def _stable(policy: AutoscalingPolicyStablePolicy | None, path: str) -> list[FieldError]:
    if policy is None:
        return []
    return [
        *_duration(policy.period, f"{path}.period", "stable policy period must be between 0 and 30 minutes"),
        *_duration(
            policy.stabilization_window,
            f"{path}.stabilizationWindow",
            "stable policy stabilization window must be between 0 and 30 minutes",
        ),
    ]


def _behavior(policy: AutoscalingPolicy) -> list[FieldError]:
    behavior = policy.spec.behavior
    if behavior is None:
        return []
    path = "spec.behavior"
    errors = _stable(behavior.scale_down, f"{path}.scaleDown")
    scale_up = behavior.scale_up
    if scale_up is not None:
        errors.extend(_stable(scale_up.stable_policy, f"{path}.scaleUp.stablePolicy"))
        panic = scale_up.panic_policy
        if panic is not None:
            panic_path = f"{path}.scaleUp.panicPolicy"
            message = "panic policy period must be between 0 and 30 minutes"
            errors.extend(_duration(panic.period, f"{panic_path}.period", message))
            message = "panic policy panic mode hold must be between 0 and 30 minutes"
            errors.extend(_duration(panic.panic_mode_hold, f"{panic_path}.panicModeHold", message))
    return errors


def validate_autoscalingpolicy(policy: AutoscalingPolicy, old: AutoscalingPolicy | None = None) -> list[FieldError]:
    """Validate an AutoscalingPolicy as Kthena's admission webhook and CEL rules would.

    Args:
        policy: The new object, schema-valid and with CRD defaults applied.
        old: The stored object for an UPDATE (no rule depends on it today).

    Returns:
        All field errors, empty when the policy is acceptable.
    """
    spec = policy.spec
    errors = _metrics(spec.metrics, "spec.metrics")
    targets = [spec.homogeneous_target, spec.heterogeneous_target, spec.disaggregated_target]
    count = sum(target is not None for target in targets)
    names = {metric.name for metric in spec.metrics or []}
    if count != 1:
        message = "exactly one of homogeneousTarget, heterogeneousTarget, or disaggregatedTarget must be set"
        errors.append(invalid("spec", count, message))
    elif spec.homogeneous_target is not None:
        path = "spec.homogeneousTarget"
        errors.extend(_target(spec.homogeneous_target.target, f"{path}.target", names))
        errors.extend(_bounds(spec.homogeneous_target.min_replicas, spec.homogeneous_target.max_replicas, path))
    elif spec.heterogeneous_target is not None:
        for index, param in enumerate(spec.heterogeneous_target.params or []):
            path = f"spec.heterogeneousTarget.params[{index}]"
            errors.extend(_target(param.target, f"{path}.target", names))
            errors.extend(_bounds(param.min_replicas, param.max_replicas, path))
    elif spec.disaggregated_target is not None:
        errors.extend(_disaggregated(policy, spec.disaggregated_target))
    if (spec.homogeneous_target or spec.heterogeneous_target) and not spec.metrics:
        errors.append(required("spec.metrics", "at least one metric must be set"))
    errors.extend(_behavior(policy))
    return errors
