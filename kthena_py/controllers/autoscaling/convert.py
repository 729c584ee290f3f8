"""Read an AutoscalingPolicy (API model or raw object) into the planners' frozen inputs.

Guarantees:

* Pure: no I/O, no clock.
* Defaults are the CRD's (the planners' :mod:`~kthena_py.plan.autoscaling.spec` mirrors them): an absent
  ``behavior`` or ``scaleDown``/``stablePolicy`` is the default stable policy, an absent ``panicPolicy`` means no
  panic mode. Whatever a mutating webhook stored in the object wins, since it is read from there.
* Numbers are kept exact: metric targets and ratio bounds are read from the quantity's exact decimal value.
* Every inconsistency the planners refuse (``minReplicas > maxReplicas``, a duration beyond 30 minutes, ...) is
  raised as :class:`PolicyError` with a readable message, so the reconciler reports it instead of crashing.
* :func:`target_refs` reads the targets of a *raw* cached object without validating it (for event mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.api.autoscaling import (
    AutoscalingPolicy,
    AutoscalingPolicyBehavior,
    AutoscalingPolicyMetric,
    AutoscalingPolicyPanicPolicy,
    AutoscalingPolicyStablePolicy,
    MetricSource,
    RoleRatioConstraint,
    target_ref_kind,
    target_ref_name,
)
from kthena_py.api.common import API_VERSION, GROUP
from kthena_py.plan.autoscaling import (
    Behavior,
    CostParam,
    MetricTarget,
    PanicPolicy,
    RatioConstraint,
    RoleSpec,
    ScaleUpPolicy,
    ScalingSpec,
    StablePolicy,
)

__all__ = [
    "PolicyError",
    "TargetKey",
    "behavior",
    "cost_params",
    "metric_targets",
    "parse_policy",
    "ratio_constraint",
    "resolve_target",
    "role_specs",
    "scaling_spec",
    "target_refs",
]


class PolicyError(ValueError):
    """The policy cannot be turned into planner inputs (the message says why)."""


@dataclass(frozen=True, order=True)
class TargetKey:
    """A ModelServing named by a ``targetRef``: namespace (defaulted to the policy's) and name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_policy(obj: Mapping[str, Any]) -> AutoscalingPolicy:
    """Parse a cached AutoscalingPolicy (its status is ignored: only the spec drives decisions).

    Raises:
        pydantic.ValidationError: The spec does not match the API.
    """
    return AutoscalingPolicy.model_validate(
        {
            "apiVersion": obj.get("apiVersion", API_VERSION),
            "kind": "AutoscalingPolicy",
            "metadata": obj.get("metadata") or {},
            "spec": obj.get("spec") or {},
        }
    )


def resolve_target(
    target_ref: Mapping[str, Any] | None, policy_namespace: str, *, same_namespace: bool = False
) -> TargetKey:
    """Return the ModelServing a ``targetRef`` names (Kthena's rules, autoscaler.md §1.7).

    ``same_namespace``: the manager caches only its own namespaces (per-range informers, ``--shard-informers``), so
    a target in another namespace than the policy's cannot be read and is refused.

    Raises:
        PolicyError: The kind is neither empty nor ``ModelServing``, the ``apiVersion`` is of another group,
            the name is empty, or (``same_namespace``) the namespace is another than the policy's.
    """
    ref = dict(target_ref or {})
    kind = target_ref_kind(ref)
    name = target_ref_name(ref)
    if kind not in ("", "ModelServing"):
        raise PolicyError(f"target ref kind {kind}, name: {name} not supported")
    api_version = ref.get("apiVersion")
    if isinstance(api_version, str) and api_version:
        group = api_version.rpartition("/")[0]
        if group != GROUP:
            raise PolicyError(f"target ref group {group}, kind {kind or 'ModelServing'}, name: {name} not supported")
    if not name:
        raise PolicyError("targetRef.name must be set, but got empty")
    namespace = ref.get("namespace")
    key = TargetKey(namespace if isinstance(namespace, str) and namespace else policy_namespace, name)
    if same_namespace and key.namespace != policy_namespace:
        raise PolicyError(
            f"targetRef.namespace {key.namespace} is not the policy's namespace {policy_namespace}: a sharded manager "
            "with per-range informers reads only its own namespaces; create the policy in its target's namespace"
        )
    return key


def _stable(api: AutoscalingPolicyStablePolicy | None) -> StablePolicy:
    if api is None:
        return StablePolicy()
    return StablePolicy(
        instances=api.instances,
        percent=api.percent,
        period=api.period.seconds,
        select_policy=api.select_policy,
        stabilization_window=None if api.stabilization_window is None else api.stabilization_window.seconds,
    )


def _panic(api: AutoscalingPolicyPanicPolicy | None) -> PanicPolicy | None:
    if api is None:
        return None
    return PanicPolicy(
        percent=api.percent,
        period=None if api.period is None else api.period.seconds,
        panic_threshold_percent=api.panic_threshold_percent,
        panic_mode_hold=api.panic_mode_hold.seconds,
    )


def behavior(api: AutoscalingPolicyBehavior | None) -> Behavior:
    """Return ``spec.behavior`` as the planners' :class:`Behavior`.

    Raises:
        PolicyError: A value is out of range (e.g. a duration beyond 30 minutes).
    """
    try:
        if api is None:
            return Behavior()
        up = api.scale_up
        return Behavior(
            scale_up=ScaleUpPolicy(
                stable_policy=_stable(None if up is None else up.stable_policy),
                panic_policy=_panic(None if up is None else up.panic_policy),
            ),
            scale_down=_stable(api.scale_down),
        )
    except ValueError as err:
        raise PolicyError(f"behavior: {err}") from err


def metric_targets(metrics: list[AutoscalingPolicyMetric] | None) -> tuple[MetricTarget, ...]:
    """Return metric targets with their exact decimal values.

    Raises:
        PolicyError: A name is empty, a target negative, or a name repeated.
    """
    try:
        targets = tuple(MetricTarget(m.name, m.target_value.value) for m in metrics or [])
    except ValueError as err:
        raise PolicyError(f"metrics: {err}") from err
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise PolicyError(f"metrics: duplicate metric names in {names}")
    return targets


def scaling_spec(
    policy: AutoscalingPolicy,
    metrics: tuple[MetricTarget, ...],
    min_replicas: int,
    max_replicas: int,
) -> ScalingSpec:
    """Return the single-unit spec (homogeneous target, heterogeneous total or one role simulated alone).

    Raises:
        PolicyError: The planner refuses the values.
    """
    try:
        return ScalingSpec(
            metrics=metrics,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            tolerance_percent=policy.spec.tolerance_percent,
            behavior=behavior(policy.spec.behavior),
        )
    except ValueError as err:
        raise PolicyError(str(err)) from err


def role_specs(policy: AutoscalingPolicy) -> dict[str, RoleSpec]:
    """Return the roles of a disaggregated target, by name.

    Raises:
        PolicyError: The policy has no disaggregated target, or a role's values are refused.
    """
    target = policy.spec.disaggregated_target
    if target is None:
        raise PolicyError("the policy has no disaggregatedTarget")
    roles: dict[str, RoleSpec] = {}
    for name, role in target.roles.items():
        try:
            roles[name] = RoleSpec(role.min_replicas, role.max_replicas, metric_targets(role.metrics))
        except ValueError as err:
            raise PolicyError(f"role {name}: {err}") from err
    return roles


def ratio_constraint(api: RoleRatioConstraint | None) -> RatioConstraint | None:
    """Return the ratio constraint with exact bounds (``None`` when unset).

    Raises:
        PolicyError: The constraint is inconsistent.
    """
    if api is None:
        return None
    try:
        return RatioConstraint(api.numerator_role, api.denominator_role, api.min_ratio.value, api.max_ratio.value)
    except ValueError as err:
        raise PolicyError(f"ratioConstraint: {err}") from err


def cost_params(
    policy: AutoscalingPolicy, *, same_namespace: bool = False
) -> list[tuple[CostParam, TargetKey, Mapping[str, MetricSource]]]:
    """Return the params of a heterogeneous target: optimizer input, target and metric sources, in spec order.

    Each param is named ``<namespace>/<name>`` of its target (Kthena's ``HeterogeneousTargetKey``).

    Raises:
        PolicyError: No heterogeneous target, a target ref is unusable, a target repeats, or bounds are refused.
    """
    target = policy.spec.heterogeneous_target
    if target is None or not target.params:
        raise PolicyError("the policy has no heterogeneousTarget params")
    namespace = policy.namespace or "default"
    out: list[tuple[CostParam, TargetKey, Mapping[str, MetricSource]]] = []
    seen: set[TargetKey] = set()
    for index, param in enumerate(target.params):
        ref = None if param.target is None else param.target.target_ref
        try:
            key = resolve_target(ref, namespace, same_namespace=same_namespace)
        except PolicyError as err:
            raise PolicyError(f"heterogeneousTarget.params[{index}]: {err}") from err
        if key in seen:
            raise PolicyError(f"heterogeneousTarget.params[{index}]: target {key} is listed twice")
        seen.add(key)
        try:
            cost = CostParam(str(key), param.cost or 0, param.min_replicas, param.max_replicas)
        except ValueError as err:
            raise PolicyError(f"heterogeneousTarget.params[{index}]: {err}") from err
        sources = {} if param.target is None else dict(param.target.metric_sources or {})
        out.append((cost, key, sources))
    return out


def _ref_key(ref: Any, namespace: str) -> TargetKey | None:
    if not isinstance(ref, Mapping):
        return None
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        return None
    ns = ref.get("namespace")
    return TargetKey(ns if isinstance(ns, str) and ns else namespace, name)


def target_refs(obj: Mapping[str, Any]) -> tuple[str, list[TargetKey]]:
    """Return the target type (``homogeneous``, ``heterogeneous``, ``disaggregated`` or ``""``) and targets.

    Reads a raw cached object leniently (malformed parts are skipped), for mapping ModelServing events to the
    policies that target them.
    """
    spec = obj.get("spec") or {}
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    if not isinstance(spec, Mapping):
        return "", []
    homogeneous = spec.get("homogeneousTarget")
    if isinstance(homogeneous, Mapping):
        key = _ref_key((homogeneous.get("target") or {}).get("targetRef"), namespace)
        return "homogeneous", [key] if key else []
    heterogeneous = spec.get("heterogeneousTarget")
    if isinstance(heterogeneous, Mapping):
        keys = []
        for param in heterogeneous.get("params") or []:
            if isinstance(param, Mapping):
                key = _ref_key((param.get("target") or {}).get("targetRef"), namespace)
                if key:
                    keys.append(key)
        return "heterogeneous", keys
    disaggregated = spec.get("disaggregatedTarget")
    if isinstance(disaggregated, Mapping):
        key = _ref_key(disaggregated.get("targetRef"), namespace)
        return "disaggregated", [key] if key else []
    return "", []
