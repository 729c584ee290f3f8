"""The ``Scheduled`` condition's reconciler (controller ``modelserving-scheduling``): one concern, one reconciler.

Guarantees: for every ModelServing (gang-scheduled or not) the condition says whether every pod is placed and, if
not, what it waits for; it is decided by :class:`~.scheduling.SchedulingReporter` from the cache (the ModelServing's
pods and PodGroups, Volcano's Queues, the PriorityClasses) and written under its own field manager
(``kthena-py-scheduling``) only when it changes. The reconcile plans nothing else: no planning state is built, so
the pod and PodGroup changes that move the condition (binding, verdicts, queue positions) cost a read of the
cache and a pure decision, not a PodGroup plan. A deleted ModelServing leaves the waiting gauge.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pydantic

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import is_deleting
from kthena_py.kube.resources import PODGROUPS, PODS
from kthena_py.plan.modelserving.core.naming import gang_applies
from kthena_py.plan.modelserving.core.types import Observed
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result, result_of
from kthena_py.vocab.owners import controlled_by

from ..resources import MODELSERVINGS
from .observe import ms_ref, parse_modelserving, podgroup_support
from .scheduling import SchedulingReporter

__all__ = ["CONTROLLER", "ScheduledReconciler"]

CONTROLLER = "modelserving-scheduling"


class ScheduledReconciler:
    """Keeps the ``Scheduled`` condition of one ModelServing in line with its pods and PodGroups."""

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.scheduling = SchedulingReporter(client, cache, recorder, wall_clock=wall_clock)

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: they leave this replica's waiting gauge."""
        self.scheduling.forget_namespaces(leaving)

    async def reconcile(self, request: Request) -> Result | None:
        """Decide the condition from the cache and write it if it changed."""
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            self.scheduling.forget(request)
            return None
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError:
            return None  # reported by the ServingGroup reconciler
        gang = gang_applies(ms.spec.scheduler_name, podgroup_support(self.cache))
        return result_of(await self.scheduling.report(obj, ms, self._placement(ms_ref(obj).uid), gang))

    def _placement(self, uid: str) -> Observed:
        """What the decision reads of the ModelServing's own objects: its pods and PodGroups."""
        return Observed(
            pods=tuple(o for o in self.cache.owned_by(PODS, uid) if controlled_by(o, uid)),
            podgroups=tuple(o for o in self.cache.owned_by(PODGROUPS, uid) if controlled_by(o, uid)),
        )
