"""The ``autoscaling`` reconciler: homogeneous targets here, disaggregated ones in :mod:`.disaggregated`.

A homogeneous pass: the target ModelServing from the cache (``spec.replicas``, absent = 1), one collection over
its entry pods or Prometheus sources, :func:`~kthena_py.plan.autoscaling.decide`, and, when the decision differs
from the current count, a patch of the ModelServing's ``scale`` subresource.

Guarantees:

* At most one scale write per pass, and none when the decision equals ``spec.replicas``.
* Every scaling action is recorded as a ``Normal`` ``SuccessfulRescale`` event on the policy, naming the old and
  new count, the mode and the metric values (over the window the decision used) that caused it.
* The history is committed only after the scale write succeeded; a failed write keeps the previous history
  (the metric windows keep the new samples: they are observations) and reports ``Ready=False/ScaleFailed``.
* ``status.homogeneousStatus``: the target's name, the count seen, the count decided, the mode and the time of
  the last change made by this controller.
"""

from __future__ import annotations

from typing import ClassVar

import structlog

from kthena_py.api.autoscaling import AutoscalingPolicy
from kthena_py.kube import ApiError, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.plan.autoscaling import WindowState, decide

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
from .convert import PolicyError, metric_targets, resolve_target, scaling_spec
from .disaggregated import scale_disaggregated
from .metrics import SCALING_ACTIONS
from .status import rfc3339, scaling_entry

__all__ = ["FIELD_MANAGER", "UNIT", "TargetReconciler"]

FIELD_MANAGER = "kthena-py-autoscaler"
UNIT = "homogeneous"

log = structlog.get_logger("kthena_py.autoscaling")


class TargetReconciler(PolicyReconciler):
    """Scales the target of a homogeneous or disaggregated AutoscalingPolicy."""

    controller: ClassVar[str] = "autoscaling"
    field_manager: ClassVar[str] = FIELD_MANAGER
    target_types: ClassVar[frozenset[str]] = frozenset({"homogeneous", "disaggregated"})

    async def run_pass(self, obj: KubeObject, policy: AutoscalingPolicy) -> Outcome:
        """One pass of a homogeneous or disaggregated policy."""
        if policy.spec.disaggregated_target is not None:
            return await scale_disaggregated(self, obj, policy)
        return await self._homogeneous(obj, policy)

    async def _homogeneous(self, obj: KubeObject, policy: AutoscalingPolicy) -> Outcome:
        deps = self.deps
        target = policy.spec.homogeneous_target
        if target is None:
            raise PolicyError("the policy has no homogeneousTarget")
        namespace = policy.namespace or "default"
        try:
            ref = None if target.target is None else target.target.target_ref
            key = resolve_target(ref, namespace, same_namespace=deps.same_namespace_targets())
        except PolicyError as err:
            return target_invalid(str(err), requeue=False)
        ms = deps.cache.get(MODELSERVINGS, key.name, key.namespace)
        if ms is None:
            return target_missing([key])
        metrics = metric_targets(policy.spec.metrics)
        spec = scaling_spec(policy, metrics, target.min_replicas, target.max_replicas)
        current = spec_replicas(ms.get("spec"))
        sources = {} if target.target is None else dict(target.target.metric_sources or {})
        memory = self.store.open(obj)
        self.store.retain_units(memory, [UNIT])
        backend = Backend(key.namespace, key.name, None, current, pods_of(deps.cache, key), sources)
        collection = (await self.collect_units(obj, memory, {UNIT: ([backend], metrics)}))[UNIT]
        now = deps.wall_clock()
        state = self.store.state(memory, UNIT, now, current, spec.behavior.horizon)
        decision = decide(spec, current, now, collection.samples, state)
        summary, values = describe_metrics(spec, decision.state, now, decision.mode)
        conditions = [target_found(), metrics_condition({"": collection})]
        scaled_at = None
        desired = decision.desired
        if desired != current:
            try:
                await deps.client.set_scale(MODELSERVINGS, key.name, key.namespace, desired)
            except NotFound:
                memory.units[UNIT] = WindowState(decision.state.metrics, state.history)
                return target_missing([key])
            except ApiError as err:
                memory.units[UNIT] = WindowState(decision.state.metrics, state.history)
                return self.scale_refused(obj, conditions, f"cannot scale {key} from {current} to {desired}: {err}")
            scaled_at = rfc3339(now)
            direction = "up" if desired > current else "down"
            SCALING_ACTIONS.labels(namespace, policy.name, str(key), direction).inc()
            deps.recorder.event(
                obj,
                "Normal",
                "SuccessfulRescale",
                f"New size: {desired} (was {current}) for {key}, {decision.mode} mode; {summary}",
            )
            log.info("scaled", target=str(key), current=current, desired=desired, reasons=list(decision.reasons))
        memory.units[UNIT] = decision.state
        await self.checkpoint(obj, memory)
        label = str(key)
        deps.series.retain(namespace, policy.name, {label})
        deps.series.target(
            namespace, policy.name, label, current=current, desired=desired, panic=decision.mode == "Panic"
        )
        for metric in spec.metrics:
            deps.series.metric(namespace, policy.name, label, metric.name, values.get(metric.name))
        previous = (obj.get("status") or {}).get("homogeneousStatus")
        entry = scaling_entry(key.name, current, desired, decision.mode, previous=previous, scaled_at=scaled_at)
        conditions.append(reconciled("homogeneous"))
        return Outcome(conditions, target={"homogeneousStatus": entry})
