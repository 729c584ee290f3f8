"""Disaggregated targets: per-role metrics and decisions, the ratio constraint, one guarded JSON patch.

A pass: the target ModelServing from the cache; every configured role must exist in
``spec.template.roles`` (its ``replicas``, absent = 1, is the role's current count); the non-fixed roles are
collected concurrently (each with its own ``metricSources``, pod sources restricted to the role's entry pods;
one replica of a role = one role ordinal across ServingGroups); then
:func:`~kthena_py.plan.autoscaling.decide_disaggregated` (per-role behaviour, exact ratio repair).

Guarantees:

* One JSON patch per pass, only when some role changes: a ``test`` of ``/metadata/uid`` (never a replacement
  ModelServing), and per changed role a ``test`` of ``/spec/template/roles/<i>/name`` followed by an ``add`` of
  ``/spec/template/roles/<i>/replicas``; if the roles were reordered meanwhile the patch fails as a whole and the
  next pass recomputes.
* A role without data holds its count while the others still scale (Kthena abandons the whole pass).
* The histories are committed only after the patch succeeded, with the counts actually applied.
* ``status.disaggregatedStatus``: per role (by name) the count seen, the count decided before the ratio repair,
  the mode and ``lastScaleTime``; ``ratioStatus`` (``currentRatio`` of the final counts, shortest decimal) when
  a constraint is set; ``ratioAdjusted`` when the repair changed a count. One ``SuccessfulRescale`` event per
  pass that changed roles, naming each change and the metric values of every changed role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from kthena_py.api.autoscaling import AutoscalingPolicy
from kthena_py.kube import ApiError, NotFound
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.plan.autoscaling import (
    MetricSample,
    ScalingSpec,
    WindowState,
    decide_disaggregated,
    role_metrics,
)
from kthena_py.vocab.conditions import REASON_RATIO_SATISFIED, REASON_RATIO_UNSATISFIABLE

from ..resources import MODELSERVINGS
from .base import (
    Outcome,
    PolicyReconciler,
    describe_metrics,
    metrics_condition,
    pods_of,
    reconciled,
    spec_replicas,
    target_found,
    target_invalid,
    target_missing,
)
from .collector import Backend, Collected
from .convert import PolicyError, behavior, metric_targets, ratio_constraint, resolve_target, role_specs
from .metrics import SCALING_ACTIONS
from .status import RATIO_VIOLATED, ConditionUpdate, rfc3339, scaling_entry

__all__ = ["role_patch", "role_replicas", "scale_disaggregated", "unit_of"]

log = structlog.get_logger("kthena_py.autoscaling")


def unit_of(role: str) -> str:
    """The history unit of a role."""
    return f"role/{role}"


def role_replicas(ms: KubeObject) -> dict[str, tuple[int, int]]:
    """``{role name: (index in spec.template.roles, replicas)}`` of a ModelServing (absent replicas = 1)."""
    roles = ((ms.get("spec") or {}).get("template") or {}).get("roles") or []
    out: dict[str, tuple[int, int]] = {}
    for index, role in enumerate(roles):
        if isinstance(role, Mapping) and isinstance(role.get("name"), str):
            out.setdefault(role["name"], (index, spec_replicas(role)))
    return out


def role_patch(ms: KubeObject, replicas: Mapping[str, int]) -> list[dict[str, Any]]:
    """Return the JSON patch setting role replicas (empty when nothing changes).

    Args:
        ms: The cached ModelServing.
        replicas: Wanted replicas by role name (roles absent from the ModelServing are ignored).
    """
    ops: list[dict[str, Any]] = []
    for name, (index, current) in sorted(role_replicas(ms).items(), key=lambda item: item[1][0]):
        wanted = replicas.get(name)
        if wanted is None or wanted == current:
            continue
        ops.append({"op": "test", "path": f"/spec/template/roles/{index}/name", "value": name})
        ops.append({"op": "add", "path": f"/spec/template/roles/{index}/replicas", "value": wanted})
    if ops:
        ops.insert(0, {"op": "test", "path": "/metadata/uid", "value": meta(ms).get("uid")})
    return ops


async def scale_disaggregated(rec: PolicyReconciler, obj: KubeObject, policy: AutoscalingPolicy) -> Outcome:
    """One pass of a disaggregated policy (see the module docstring)."""
    deps = rec.deps
    target = policy.spec.disaggregated_target
    if target is None:
        raise PolicyError("the policy has no disaggregatedTarget")
    namespace = policy.namespace or "default"
    try:
        key = resolve_target(target.target_ref, namespace, same_namespace=deps.same_namespace_targets())
    except PolicyError as err:
        return target_invalid(str(err), requeue=False)
    ms = deps.cache.get(MODELSERVINGS, key.name, key.namespace)
    if ms is None:
        return target_missing([key])
    roles = role_specs(policy)
    constraint = ratio_constraint(target.ratio_constraint)
    shared = behavior(policy.spec.behavior)
    spec_metrics = metric_targets(policy.spec.metrics)
    present = role_replicas(ms)
    absent = sorted(name for name in roles if name not in present)
    if absent:
        return target_invalid(f"role {absent[0]} not found in model serving {key}")
    current = {name: present[name][1] for name in roles}
    specs: dict[str, ScalingSpec] = {}
    for name, role in roles.items():
        try:
            specs[name] = ScalingSpec(
                metrics=role_metrics(role, spec_metrics),
                min_replicas=role.min_replicas,
                max_replicas=role.max_replicas,
                tolerance_percent=policy.spec.tolerance_percent,
                behavior=shared,
            )
        except ValueError as err:
            raise PolicyError(f"role {name}: {err}") from err
    memory = rec.store.open(obj)
    rec.store.retain_units(memory, [unit_of(name) for name in roles])
    pods = pods_of(deps.cache, key)
    active = sorted(name for name, role in roles.items() if not role.fixed)

    def backends(name: str) -> list[Backend]:
        sources = dict(target.roles[name].metric_sources or {})
        return [Backend(key.namespace, key.name, name, current[name], pods, sources)]

    units = {unit_of(name): (backends(name), specs[name].metrics) for name in active}
    collected = await rec.collect_units(obj, memory, units)
    collections: dict[str, Collected] = {name: collected[unit_of(name)] for name in active}
    now = deps.wall_clock()
    states = {
        name: rec.store.state(memory, unit_of(name), now, current[name], shared.horizon) for name in sorted(roles)
    }
    samples: dict[str, Mapping[str, MetricSample | None]] = {name: c.samples for name, c in collections.items()}
    try:
        decision = decide_disaggregated(
            roles,
            current,
            now,
            samples,
            states,
            spec_metrics=spec_metrics,
            constraint=constraint,
            tolerance_percent=policy.spec.tolerance_percent,
            behavior=shared,
        )
    except ValueError as err:
        raise PolicyError(str(err)) from err
    final = decision.replicas()
    conditions = [target_found(), metrics_condition({name: collections.get(name) for name in sorted(roles)})]
    ops = role_patch(ms, final)
    changed = [decided for decided in decision.roles if decided.final != decided.current]
    scaled_at = None
    if ops:
        try:
            await deps.client.patch(
                MODELSERVINGS, key.name, ops, key.namespace, patch_type="json", field_manager=rec.field_manager
            )
        except NotFound:
            for name, state in states.items():
                memory.units[unit_of(name)] = state
            return target_missing([key])
        except ApiError as err:
            for decided in decision.roles:  # keep the observations, not the history of an unapplied decision
                memory.units[unit_of(decided.name)] = WindowState(decided.state.metrics, states[decided.name].history)
            sizes = ", ".join(f"{r.name} {r.current}->{r.final}" for r in changed)
            return rec.scale_refused(obj, conditions, f"cannot scale {key} ({sizes}): {err}")
        scaled_at = rfc3339(now)
    for decided in decision.roles:
        memory.units[unit_of(decided.name)] = decided.state
    await rec.checkpoint(obj, memory)

    label_ns, label_policy = namespace, policy.name
    labels = {f"{key}/{decided.name}" for decided in decision.roles}
    deps.series.retain(label_ns, label_policy, labels)
    summaries: dict[str, str] = {}
    for decided in decision.roles:
        label = f"{key}/{decided.name}"
        deps.series.target(
            label_ns, label_policy, label, current=decided.current, desired=decided.final, panic=decided.mode == "Panic"
        )
        summary, values = describe_metrics(specs[decided.name], decided.state, now, decided.mode)
        summaries[decided.name] = summary
        for metric in specs[decided.name].metrics:
            deps.series.metric(label_ns, label_policy, label, metric.name, values.get(metric.name))
    if changed:
        for decided in changed:
            direction = "up" if decided.final > decided.current else "down"
            SCALING_ACTIONS.labels(label_ns, label_policy, f"{key}/{decided.name}", direction).inc()
        sizes = ", ".join(f"{r.name} {r.current}->{r.final} ({r.mode})" for r in changed)
        ratio = f"; ratio adjusted to {decision.current_ratio}" if decision.ratio_adjusted else ""
        why = "; ".join(f"{r.name}: {summaries[r.name] or 'fixed'}" for r in changed)
        deps.recorder.event(obj, "Normal", "SuccessfulRescale", f"New sizes for {key}: {sizes}{ratio}; {why}")
        log.info(
            "scaled roles",
            target=str(key),
            replicas=final,
            reasons={r.name: list(r.reasons) for r in changed},
            ratio=list(decision.reasons),
        )

    old = ((obj.get("status") or {}).get("disaggregatedStatus") or {}).get("roles") or []
    previous = {str(e.get("name")): e for e in old if isinstance(e, Mapping)}
    entries = [
        scaling_entry(
            decided.name,
            decided.current,
            decided.desired,
            decided.mode,
            previous=previous.get(decided.name),
            scaled_at=scaled_at if decided.final != decided.current else None,
        )
        for decided in decision.roles
    ]
    status: dict[str, Any] = {"roles": entries}
    if constraint is not None:
        status["ratioStatus"] = {
            "numeratorRole": constraint.numerator_role,
            "denominatorRole": constraint.denominator_role,
            "currentRatio": decision.current_ratio,
        }
    status["ratioAdjusted"] = decision.ratio_adjusted
    if constraint is not None and decision.ratio is not None:
        if decision.ratio.satisfied:
            message = f"{constraint.numerator_role}/{constraint.denominator_role} within the constraint"
            conditions.append(ConditionUpdate(RATIO_VIOLATED, "False", REASON_RATIO_SATISFIED, message))
        else:
            message = (
                f"no {constraint.numerator_role}/{constraint.denominator_role} pair within the roles' replica bounds"
                " satisfies the ratio constraint"
            )
            conditions.append(ConditionUpdate(RATIO_VIOLATED, "True", REASON_RATIO_UNSATISFIABLE, message))
    conditions.append(reconciled("disaggregated"))
    return Outcome(conditions, target={"disaggregatedStatus": status})
