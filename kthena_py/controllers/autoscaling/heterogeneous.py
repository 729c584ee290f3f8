"""The ``autoscaling-heterogeneous`` reconciler: one replica total, split over ModelServings of different cost.

A pass, as Kthena computes it (autoscaler.md §2): ``current = Σ spec.replicas`` of the params' ModelServings,
bounds ``[Σ minReplicas, Σ maxReplicas]``; the metrics are collected over all targets together (pod metrics:
one replica per ServingGroup of any target, averaged; Prometheus metrics: summed over targets, utilization-like
names replica-weighted); :func:`~kthena_py.plan.autoscaling.decide` gives the total ``K``; then
:func:`~kthena_py.plan.autoscaling.optimize` splits ``K`` over the params (Kthena's block greedy, moved to the
nearest allocation that keeps the API's cost promise ``cost <= max(P, 100)/100 x C*``).

Guarantees:

* Each ModelServing is patched through its ``scale`` subresource only when its own count changes (so a
  rebalance at constant ``K`` touches only the targets that move); the patches of a pass run concurrently.
* The history (of the total) is committed only when every patch of the pass succeeded; after a partial failure
  the next pass starts from what the cluster then shows.
* ``status.heterogeneousStatus``: one entry per param, named ``<namespace>/<name>``, with the count seen, the
  count allocated and the (shared) mode. One ``SuccessfulRescale`` event per pass that changed any target,
  with the total, each change and the metric values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import ClassVar

import structlog

from kthena_py.api.autoscaling import AutoscalingPolicy
from kthena_py.kube import ApiError, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.plan.autoscaling import WindowState, decide, optimize

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
from .collector import Backend
from .convert import PolicyError, cost_params, metric_targets, scaling_spec
from .metrics import SCALING_ACTIONS
from .status import rfc3339, scaling_entry

__all__ = ["FIELD_MANAGER", "UNIT", "HeterogeneousReconciler"]

FIELD_MANAGER = "kthena-py-autoscaler-heterogeneous"
UNIT = "heterogeneous"

log = structlog.get_logger("kthena_py.autoscaling")


class HeterogeneousReconciler(PolicyReconciler):
    """Scales the ModelServings of a heterogeneous AutoscalingPolicy."""

    controller: ClassVar[str] = "autoscaling-heterogeneous"
    field_manager: ClassVar[str] = FIELD_MANAGER
    target_types: ClassVar[frozenset[str]] = frozenset({"heterogeneous"})

    async def run_pass(self, obj: KubeObject, policy: AutoscalingPolicy) -> Outcome:
        """One pass of a heterogeneous policy (see the module docstring)."""
        deps = self.deps
        target = policy.spec.heterogeneous_target
        if target is None:
            raise PolicyError("the policy has no heterogeneousTarget")
        namespace = policy.namespace or "default"
        try:
            params = cost_params(policy, same_namespace=deps.same_namespace_targets())
        except PolicyError as err:
            return target_invalid(str(err), requeue=False)
        objects = {key: deps.cache.get(MODELSERVINGS, key.name, key.namespace) for _, key, _ in params}
        absent = [key for key, ms in objects.items() if ms is None]
        if absent:
            return target_missing(absent)
        current = {param.name: spec_replicas((objects[key] or {}).get("spec")) for param, key, _ in params}
        total = sum(current.values())
        metrics = metric_targets(policy.spec.metrics)
        low = sum(param.min_replicas for param, _, _ in params)
        high = sum(param.max_replicas for param, _, _ in params)
        spec = scaling_spec(policy, metrics, low, high)
        memory = self.store.open(obj)
        self.store.retain_units(memory, [UNIT])
        backends = [
            Backend(key.namespace, key.name, None, current[param.name], pods_of(deps.cache, key), sources)
            for param, key, sources in params
        ]
        collection = (await self.collect_units(obj, memory, {UNIT: (backends, metrics)}))[UNIT]
        now = deps.wall_clock()
        state = self.store.state(memory, UNIT, now, total, spec.behavior.horizon)
        decision = decide(spec, total, now, collection.samples, state)
        allocation = optimize([param for param, _, _ in params], decision.desired, target.cost_expansion_rate_percent)
        conditions = [target_found(), metrics_condition({"": collection})]
        moves = [(param, key) for param, key, _ in params if allocation[param.name] != current[param.name]]
        results = await asyncio.gather(
            *(deps.client.set_scale(MODELSERVINGS, key.name, key.namespace, allocation[p.name]) for p, key in moves),
            return_exceptions=True,
        )
        failed: list[str] = []
        gone = []
        for (param, key), result in zip(moves, results, strict=True):
            if isinstance(result, NotFound):
                gone.append(key)
            elif isinstance(result, ApiError):
                failed.append(f"{key} to {allocation[param.name]}: {result}")
            elif isinstance(result, BaseException):
                raise result
        applied = [(param, key) for (param, key), r in zip(moves, results, strict=True) if not isinstance(r, Exception)]
        scaled_at = rfc3339(now) if applied else None
        summary, values = describe_metrics(spec, decision.state, now, decision.mode)
        if applied:
            for param, _ in applied:
                direction = "up" if allocation[param.name] > current[param.name] else "down"
                SCALING_ACTIONS.labels(namespace, policy.name, param.name, direction).inc()
            sizes = ", ".join(f"{p.name} {current[p.name]}->{allocation[p.name]}" for p, _ in applied)
            deps.recorder.event(
                obj,
                "Normal",
                "SuccessfulRescale",
                f"New total: {decision.desired} (was {total}), {decision.mode} mode: {sizes}; {summary}",
            )
            log.info("scaled", total=decision.desired, allocation=allocation, reasons=list(decision.reasons))
        if gone or failed:
            memory.units[UNIT] = WindowState(decision.state.metrics, state.history)
            if gone:
                return target_missing(gone)
            return self.scale_refused(obj, conditions, "cannot scale " + "; ".join(failed))
        memory.units[UNIT] = decision.state
        await self.checkpoint(obj, memory)

        labels = {param.name for param, _, _ in params}
        deps.series.retain(namespace, policy.name, labels | {"total"})
        deps.series.target(
            namespace, policy.name, "total", current=total, desired=decision.desired, panic=decision.mode == "Panic"
        )
        for param, _, _ in params:
            deps.series.target(
                namespace,
                policy.name,
                param.name,
                current=current[param.name],
                desired=allocation[param.name],
                panic=decision.mode == "Panic",
            )
        for metric in spec.metrics:
            deps.series.metric(namespace, policy.name, "total", metric.name, values.get(metric.name))
        old = (obj.get("status") or {}).get("heterogeneousStatus") or []
        previous: dict[str, Mapping[str, object]] = {str(e.get("name")): e for e in old if isinstance(e, Mapping)}
        entries = [
            scaling_entry(
                param.name,
                current[param.name],
                allocation[param.name],
                decision.mode,
                previous=previous.get(param.name),
                scaled_at=scaled_at if allocation[param.name] != current[param.name] else None,
            )
            for param, _, _ in params
        ]
        conditions.append(reconciled("heterogeneous"))
        return Outcome(conditions, target={"heterogeneousStatus": entries})
