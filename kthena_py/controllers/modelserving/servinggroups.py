"""The ServingGroup reconciler: groups, role instances, pods, headless Services, recovery, status.

Guarantees: each reconcile reads only the informer cache, calls the pure planner
:func:`~kthena_py.plan.modelserving.servinggroups.plan_servinggroups` and applies its plan; it
keeps no state between reconciles (beyond the pacing of refused writes), so a restarted manager
continues exactly where the cluster is. An invalid spec (which admission should have rejected) is
reported as a Warning event and a terminal error, never retried in a loop.

Refused child writes (:mod:`.failures`) are reported on the ``ReplicaFailure`` condition (field
manager ``kthena-py-servinggroups-failures``) and retried when their backoff ends; the planner is told
which pods were refused (from that condition and the backoff) and which names are held by another
owner's pods, so that it completes a partly created unit instead of tearing it down, and waits for a
same-named predecessor's pods to go instead of looping on AlreadyExists.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pydantic
import structlog

from kthena_py.kube import KubeClient
from kthena_py.kube.objects import controller_ref, is_deleting, meta, uid_of
from kthena_py.plan.modelserving.plugins import PluginError
from kthena_py.plan.modelserving.servinggroups import plan_servinggroups
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventRecorder
from kthena_py.runtime.reconcile import Request, Result, TerminalError

from ..resources import MODELSERVINGS
from .apply import PlanApplier
from .failures import REPLICA_FAILURE, ChildFailure, FailureCondition, refused_pods
from .observe import foreign_pods, ms_ref, observe, parse_modelserving, podgroup_support

FIELD_MANAGER = "kthena-py-servinggroups"
FAILURE_FIELD_MANAGER = "kthena-py-servinggroups-failures"

log = structlog.get_logger("kthena_py.modelserving")


class ServingGroupReconciler:
    """Drives one ModelServing's pods and Services towards its spec."""

    def __init__(
        self,
        client: KubeClient,
        cache: SharedCache,
        recorder: EventRecorder,
        *,
        wall_clock: Callable[[], float] = time.time,
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
        )
        self._now = wall_clock

    async def reconcile(self, request: Request) -> Result | None:
        """Plan and apply one ModelServing."""
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            if obj is not None:
                self.applier.tracker.forget_owner(uid_of(obj))
            return None  # children are garbage-collected through their ownerReferences
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError as exc:
            self.recorder.event(obj, "Warning", "InvalidSpec", f"spec cannot be read: {exc}")
            raise TerminalError(f"invalid spec: {exc}") from exc
        ref = ms_ref(obj)
        support = podgroup_support(self.cache)
        held = foreign_pods(self.cache, ref)
        observed = dataclasses.replace(
            observe(self.cache, ref),
            refused_pods=refused_pods(obj) | self.applier.tracker.refused_names(ref.uid, "Pod"),
            foreign_pods=frozenset(str(meta(p).get("name", "")) for p in held),
        )
        try:
            plan = plan_servinggroups(ms, ref, observed, support, self._now())
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
        outcome = await self.applier.apply(plan, obj, waiting=[_held(p) for p in held])
        if outcome.writes:
            log.info("applied plan", writes=outcome.writes, reasons=list(plan.reasons))
        requeue = min((t for t in (plan.requeue_after, outcome.retry_after) if t), default=None)
        return Result(requeue_after=requeue) if requeue else None


def _held(pod: dict[str, object]) -> ChildFailure:
    """The report of a pod name held by another owner's pod."""
    owner = (controller_ref(pod) or {}).get("uid") or "none"
    state = "being deleted" if is_deleting(pod) else "not being deleted"
    cause = (
        f"the name is held by a pod of another owner (uid {uid_of(pod)}, owner uid {owner}, {state}); "
        "waiting for it to go"
    )
    return ChildFailure("create", "Pod", str(meta(pod).get("name", "")), cause)
