"""The pool reconciler: read the pool and its members live, plan, record the intent, then scale.

Guarantees:

* Each pass reads the pool with a live GET and its members with live lists (:mod:`.observe`): the recorded
  intent and the replica counts it acts on are what the API server holds, never a cache behind its own writes.
* A victim's release time is recorded (annotation ``released.modelpool.kthena-py.io/<member>``) before the status
  that releases it, so demand it had before it was swapped out never swaps it back in.
* The intent is recorded in the status *before* any replica write; a failed status write makes no replica write
  (the pass is retried with backoff). A kill at any point resumes from the status
  (:mod:`kthena_py.plan.modelpool.swap`).
* A pool being deleted is left alone (its members keep their replicas).
* Idle checks run only when the planner asks for them, the residents concurrently.
* The ModelPools and AutoscalingPolicies of the namespace are listed live each pass
  (:mod:`kthena_py.plan.modelpool.conflicts`): a member an older pool also lists is planned out of this pool
  (not scaled, never resident) but still observed, so its pods count in the slot guard; without the
  AutoscalingPolicy CRD there is no policy. Conflicts are re-read at least every :data:`RESYNC_SECONDS`.
* Members removed from ``spec.members`` stay observed while the status lists them and they are up
  (:func:`~kthena_py.plan.modelpool.view.former_members`): counted in the slot guard, never scaled.
* A swap turning stalled (``Ready`` reason ``SwapStalled``), and ``MembersValid`` turning to
  ``MemberInAnotherPool`` or ``MemberAutoscaled``, each record one Warning Event of that reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from kthena_py.api.modelpool import (
    CONDITION_MEMBERS_VALID,
    CONDITION_READY,
    REASON_MEMBER_AUTOSCALED,
    REASON_MEMBER_IN_ANOTHER_POOL,
)
from kthena_py.kube import KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.plan.modelpool.conflicts import MemberConflicts, managed_spec, member_conflicts
from kthena_py.plan.modelpool.demand import demand_of, released_of
from kthena_py.plan.modelpool.idle import FAILED, IdleResult
from kthena_py.plan.modelpool.status import render_status
from kthena_py.plan.modelpool.swap import Decision, plan
from kthena_py.plan.modelpool.view import PoolSpec, former_members, parse_spec, parse_state
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.vocab.conditions import REASON_SWAP_STALLED
from kthena_py.vocab.pods import is_terminating

from ..resources import AUTOSCALINGPOLICIES, MODELPOOLS
from . import metrics
from .apply import record_released, scale_member, write_status
from .idlecheck import IdleProber
from .observe import Observed, observe

__all__ = ["RESYNC_SECONDS", "PoolReconciler"]

log = structlog.get_logger("kthena_py.modelpool")

_WARNED = (
    (CONDITION_READY, REASON_SWAP_STALLED),
    (CONDITION_MEMBERS_VALID, REASON_MEMBER_IN_ANOTHER_POOL),
    (CONDITION_MEMBERS_VALID, REASON_MEMBER_AUTOSCALED),
)
"""Condition reasons announced by a Warning Event of the same reason when they appear."""

RESYNC_SECONDS = 30.0
"""A pool is looked at again at least this often (drift missed by a watch, demand that expired)."""


class PoolReconciler:
    """Reconciles one ModelPool per call."""

    def __init__(
        self,
        client: KubeApi,
        recorder: EventSink,
        prober: IdleProber,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.prober = prober
        self.clock = clock

    async def _verdicts(self, spec: PoolSpec, observed: Observed, names: tuple[str, ...]) -> dict[str, IdleResult]:
        async def one(name: str) -> IdleResult:
            serving = observed.servings.get(name)
            if serving is None:
                return IdleResult(FAILED, "no ModelServing")
            return await self.prober.verdict(spec, serving, observed.pods.get(name, []))

        results = await asyncio.gather(*(one(n) for n in names))
        return dict(zip(names, results, strict=True))

    async def _conflicts(self, pool: KubeObject, namespace: str) -> MemberConflicts:
        pools = (await self.client.list(MODELPOOLS, namespace)).items
        try:
            policies = (await self.client.list(AUTOSCALINGPOLICIES, namespace)).items
        except NotFound:  # the AutoscalingPolicy CRD is not installed
            policies = []
        return member_conflicts(pool, pools, policies)

    async def reconcile(self, request: Request) -> Result | None:
        """One pass over one pool (see the module docstring)."""
        try:
            pool = await self.client.get(MODELPOOLS, request.name, request.namespace)
        except NotFound:
            return None
        if is_terminating(pool):
            return None
        spec = parse_spec(pool)
        state = parse_state(pool)
        demand = demand_of(pool)
        released = released_of(pool)
        conflicts = await self._conflicts(pool, request.namespace)
        former = former_members(pool, spec)
        observed = await observe(self.client, request.namespace, spec, former)
        managed = managed_spec(spec, conflicts)
        now = self.clock()
        decision = plan(managed, state, observed.members, demand, now, released=released)
        if decision.needs_probe:
            verdicts = await self._verdicts(spec, observed, decision.needs_probe)
            log.debug("idle check", pool=str(request), verdicts={k: v.verdict for k, v in verdicts.items()})
            decision = plan(managed, state, observed.members, demand, now, verdicts, released=released)
        status = render_status(
            spec=spec,
            state=decision.state,
            members=observed.members,
            demand=demand,
            previous=pool.get("status") or {},
            completed=decision.completed,
            generation=meta(pool).get("generation"),
            namespace=request.namespace,
            now=now,
            conflicts=conflicts,
            former=former,
        )
        if decision.released:
            await record_released(self.client, pool, decision.released)
        await write_status(self.client, pool, status)
        for name, replicas in decision.replicas.items():
            await scale_member(self.client, request.namespace, name, replicas)
            log.info("scaled pool member", pool=str(request), member=name, replicas=replicas)
        self._report(pool, request, state.deferred_reason, decision)
        self._warn_on_turn(pool, request, status)
        return Result(requeue_after=min(decision.requeue_after or RESYNC_SECONDS, RESYNC_SECONDS))

    def _warn_on_turn(self, pool: KubeObject, request: Request, status: Mapping[str, Any]) -> None:
        """One Warning Event when a condition turns to a reason a user must act on (not once per pass)."""
        before = pool.get("status") or {}
        for kind, reason in _WARNED:
            now = _condition(status, kind)
            if now.get("reason") == reason and _condition(before, kind).get("reason") != reason:
                self.recorder.event(pool, "Warning", reason, str(now.get("message")))
                log.warning("pool needs attention", pool=str(request), reason=reason, message=now.get("message"))

    def _report(self, pool: KubeObject, request: Request, deferred_before: str | None, decision: Decision) -> None:
        labels: tuple[Any, ...] = (request.namespace, request.name)
        for event in decision.events:
            self.recorder.event(pool, event.type, event.reason, event.message)
            log.info("pool event", pool=str(request), reason=event.reason, message=event.message)
        if decision.completed is not None:
            metrics.SWAPS.labels(*labels, "completed").inc()
            metrics.observe_swap(decision.completed)
        if decision.abandoned is not None:
            metrics.SWAPS.labels(*labels, "abandoned").inc()
        reason = decision.state.deferred_reason
        if reason is not None and reason != deferred_before and decision.abandoned is None:
            metrics.SWAPS.labels(*labels, "deferred").inc()


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return {}
