"""The ServingGroup reconciler: groups, role instances, pods, headless Services, recovery, status.

Guarantees: each reconcile reads only the informer cache, calls the pure planner
:func:`~kthena_py.plan.modelserving.groups.servinggroups.plan_servinggroups` and applies its plan; it
keeps no state between reconciles (beyond the pacing of refused writes), so a restarted manager
continues exactly where the cluster is. An invalid spec (which admission should have rejected) is
reported as a Warning event and a terminal error, never retried in a loop. It plans from the same observation as the
rollout and gang reconcilers (:func:`~.observe.observe_serving`: with the eviction budget running, the units its
tracker records as disrupted count as not ready), and looks again when the first such record expires.

Refused child writes (:mod:`.failures`) are reported on the ``ReplicaFailure`` condition (field
manager ``kthena-py-servinggroups-failures``) and retried when their backoff ends; the planner is told
which pods were refused (from that condition and the backoff) and which names are held by another
owner's pods, so that it completes a partly created unit instead of tearing it down, and waits for a
same-named predecessor's pods to go instead of looping on AlreadyExists.

A status change that only reports progress (a group became ready, the others are still starting) waits
:data:`~.pacing.PROGRESS_DELAY_SECONDS` for what follows it (:mod:`.pacing`): the reconcile asks to be run again when
it is due. Every other status change, ``Available`` turning True among them, is written at once.

A reconcile does not hold its worker while the cache catches up with its writes: the applier's wait is handed
to the controller as the result's ``settle``, and the key stays in progress until it ends.

Pods follow their PodGroup within one reconcile: a plan that holds a new group's pods back until its PodGroup is
observed (gang scheduling) is applied, then the reconcile waits (at most :data:`PODGROUP_WAIT_SECONDS`) for the gang
reconciler's PodGroups to reach the cache and plans once more, instead of waiting for a queue round trip. Volcano
then sees a gang's PodGroup and pods together, not a PodGroup without pods for a scheduling cycle or more.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pydantic
import structlog

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import is_deleting, meta, uid_of
from kthena_py.kube.resources import PODGROUPS
from kthena_py.plan.modelserving.core.plugins import PluginError
from kthena_py.plan.modelserving.core.types import Plan
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.clock import Clock
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result, TerminalError, result_of
from kthena_py.vocab.conditions import REASON_INVALID_SPEC
from kthena_py.vocab.owners import controller_uid

from ..resources import MODELSERVINGS
from .apply import ApplyOutcome, PlanApplier
from .failures import REPLICA_FAILURE, ChildFailure, FailureCondition, refused_pods
from .observe import foreign_pods, ms_ref, observe_serving, parse_modelserving, podgroup_support
from .pacing import PROGRESS_DELAY_SECONDS, ProgressPacer

FIELD_MANAGER = "kthena-py-servinggroups"
FAILURE_FIELD_MANAGER = "kthena-py-servinggroups-failures"
PODGROUP_WAIT_SECONDS = 2.0
"""How long a reconcile that holds pods back for their PodGroups waits for the gang reconciler to create them."""

log = structlog.get_logger("kthena_py.modelserving")


class ServingGroupReconciler:
    """Drives one ModelServing's pods and Services towards its spec."""

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        *,
        wall_clock: Callable[[], float] = time.time,
        podgroup_wait: float = PODGROUP_WAIT_SECONDS,
        trackers: bool = False,
        progress_delay: float = PROGRESS_DELAY_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self.cache = cache
        self.recorder = recorder
        self.applier = PlanApplier(
            client,
            recorder,
            FIELD_MANAGER,
            cache,
            failures=FailureCondition(client, REPLICA_FAILURE, FAILURE_FIELD_MANAGER),
            wall_clock=wall_clock,
            pacer=ProgressPacer(progress_delay, clock),
        )
        self._now = wall_clock
        self.podgroup_wait = podgroup_wait
        self.trackers = trackers

    async def reconcile(self, request: Request) -> Result | None:
        """Plan and apply one ModelServing (twice when its new groups' PodGroups appear meanwhile)."""
        outcome, plan, expiry = await self._pass(request, last=False)
        if plan is None or outcome is None:
            return None
        if plan.awaiting_podgroups and await self._podgroups_observed(plan.awaiting_podgroups, request.namespace):
            # The gang reconciler created them meanwhile: create the pods now rather than a queue round trip later.
            again, replanned, expiry = await self._pass(request, last=True)
            if replanned is None or again is None:
                return None
            outcome, plan = again, replanned
        # A disruption record that expires changes readiness (status, scale-down order, surge): look again then.
        return result_of(plan.requeue_after, expiry, outcome.retry_after, outcome.status_due_in, settle=outcome.settle)

    async def _pass(self, request: Request, *, last: bool) -> tuple[ApplyOutcome | None, Plan | None, float | None]:
        """One plan-and-apply from the cache (``(None, None)``: nothing to do for this object).

        The wait for the cache to show the writes is left to the controller (the outcome's ``settle``) unless
        another pass may follow (``last`` is false and the plan holds pods back for their PodGroups): that pass
        must plan from a cache that shows this one's writes.
        """
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            if obj is not None:
                self.applier.forget(obj)
            elif self.applier.pacer is not None:
                self.applier.pacer.settled((request.namespace, request.name))
            return None, None, None  # children are garbage-collected through their ownerReferences
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError as exc:
            self.recorder.event(obj, "Warning", REASON_INVALID_SPEC, f"spec cannot be read: {exc}")
            raise TerminalError(f"invalid spec: {exc}") from exc
        ref = ms_ref(obj)
        support = podgroup_support(self.cache)
        held = foreign_pods(self.cache, ref)
        now = self._now()
        seen = observe_serving(self.cache, ref, now, trackers=self.trackers)
        observed = dataclasses.replace(
            seen.observed,
            refused_pods=refused_pods(obj) | self.applier.tracker.refused_names(ref.uid, "Pod"),
            foreign_pods=frozenset(str(meta(p).get("name", "")) for p in held),
        )
        try:
            plan = plan_servinggroups(ms, ref, observed, support, now)
        except PluginError as exc:
            self.recorder.event(obj, "Warning", "PluginFailed", str(exc))
            raise TerminalError(str(exc)) from exc
        if ms.spec.scheduler_name == "volcano" and not support.crd_served and plan.creates:
            self.recorder.event(
                obj,
                "Warning",
                "PodGroupCRDMissing",
                "schedulerName is volcano but the PodGroup CRD (podgroups.scheduling.volcano.sh) is not installed: "
                "pods are created without gang scheduling; install Volcano or set another schedulerName",
            )
        defer = last or not plan.awaiting_podgroups
        outcome = await self.applier.apply(plan, obj, waiting=[_held(p) for p in held], defer_observation=defer)
        if outcome.writes:
            log.info("applied plan", writes=outcome.writes, reasons=list(plan.reasons))
        return outcome, plan, seen.disruption_ends_in

    async def _podgroups_observed(self, names: tuple[str, ...], namespace: str) -> bool:
        """Wait (at most ``podgroup_wait`` seconds) until the cache holds every PodGroup in ``names``."""
        return await self.cache.wait_for(
            [(PODGROUPS, name, namespace) for name in names],
            lambda: all(self.cache.get(PODGROUPS, name, namespace) is not None for name in names),
            self.podgroup_wait,
        )


def _held(pod: dict[str, object]) -> ChildFailure:
    """The report of a pod name held by another owner's pod."""
    owner = controller_uid(pod) or "none"
    state = "being deleted" if is_deleting(pod) else "not being deleted"
    cause = (
        f"the name is held by a pod of another owner (uid {uid_of(pod)}, owner uid {owner}, {state}); "
        "waiting for it to go"
    )
    return ChildFailure("create", "Pod", str(meta(pod).get("name", "")), cause)
