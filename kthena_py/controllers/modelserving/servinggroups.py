"""The ServingGroup reconciler: groups, role instances, pods, headless Services, recovery, status.

Guarantees: each reconcile reads only the informer cache, calls the pure planner
:func:`~kthena_py.plan.modelserving.servinggroups.plan_servinggroups` and applies its plan; it
keeps no state between reconciles, so a restarted manager continues exactly where the cluster is.
An invalid spec (which admission should have rejected) is reported as a Warning event and a
terminal error, never retried in a loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pydantic
import structlog

from kthena_py.kube import KubeClient
from kthena_py.kube.objects import is_deleting
from kthena_py.plan.modelserving.plugins import PluginError
from kthena_py.plan.modelserving.servinggroups import plan_servinggroups
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventRecorder
from kthena_py.runtime.reconcile import Request, Result, TerminalError

from ..resources import MODELSERVINGS
from .apply import PlanApplier
from .observe import ms_ref, observe, parse_modelserving, podgroup_support

FIELD_MANAGER = "kthena-py-servinggroups"

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
        self.applier = PlanApplier(client, recorder, FIELD_MANAGER, cache)
        self._now = wall_clock

    async def reconcile(self, request: Request) -> Result | None:
        """Plan and apply one ModelServing."""
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            return None  # children are garbage-collected through their ownerReferences
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError as exc:
            self.recorder.event(obj, "Warning", "InvalidSpec", f"spec cannot be read: {exc}")
            raise TerminalError(f"invalid spec: {exc}") from exc
        ref = ms_ref(obj)
        support = podgroup_support(self.cache)
        try:
            plan = plan_servinggroups(ms, ref, observe(self.cache, ref), support, self._now())
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
        writes = await self.applier.apply(plan, obj)
        if writes:
            log.info("applied plan", writes=writes, reasons=list(plan.reasons))
        return Result(requeue_after=plan.requeue_after) if plan.requeue_after else None
