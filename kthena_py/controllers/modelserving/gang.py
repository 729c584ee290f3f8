"""The gang-scheduling reconciler: one Volcano PodGroup per ServingGroup.

Guarantees: PodGroups exist (and match the spec) for every ServingGroup the ServingGroup reconciler
will create pods for, whenever ``schedulerName`` is ``volcano`` and Volcano's PodGroup CRD is
served; they are recreated if deleted and removed with their group. With any other scheduler, or
without the CRD, this reconciler writes nothing. Refused PodGroup writes are reported on the
``PodGroupFailure`` condition (field manager ``kthena-py-gang-failures``) and retried with backoff.
Decisions come from the pure planner :func:`~kthena_py.plan.modelserving.render.podgroups.plan_podgroups`, planned
from the same observation as the other ModelServing reconcilers (:func:`~.observe.observe_serving`, disrupted units
included), so the PodGroups follow the groups the ServingGroup reconciler wants; a reconcile looks again when the
first eviction record expires.

The ``Scheduled`` condition is another concern, kept by its own reconciler (:mod:`.scheduled`).

Its own writes do not wake it: the watch event that shows a PodGroup exactly as this reconciler created or updated
it is held back from its queue (:attr:`PodGroupReconciler.own_writes`, wired in by the controller's PodGroup watch),
since the look it would ask for finds the plan carried out. Any other change of a PodGroup wakes it as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pydantic

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import is_deleting
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result, result_of

from ..resources import MODELSERVINGS
from .apply import PlanApplier
from .echoes import OwnWrites
from .failures import GANG_FAILURE, FailureCondition
from .observe import ms_ref, observe_serving, parse_modelserving, podgroup_support

CONTROLLER = "modelserving-gang"
FIELD_MANAGER = "kthena-py-gang"
FAILURE_FIELD_MANAGER = "kthena-py-gang-failures"


class PodGroupReconciler:
    """Keeps the PodGroups of one ModelServing in line with its spec."""

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        *,
        trackers: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.trackers = trackers
        self._now = wall_clock
        self.own_writes = OwnWrites(CONTROLLER)
        """The PodGroups this reconciler wrote, whose watch echoes do not wake it (:mod:`.echoes`)."""
        self.applier = PlanApplier(
            client,
            recorder,
            FIELD_MANAGER,
            cache,
            failures=FailureCondition(client, GANG_FAILURE, FAILURE_FIELD_MANAGER),
            on_written=self.own_writes.remember,
        )

    async def reconcile(self, request: Request) -> Result | None:
        """Plan and apply the PodGroups of one ModelServing."""
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            return None
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError:
            return None  # reported by the ServingGroup reconciler
        ref = ms_ref(obj)
        seen = observe_serving(self.cache, ref, self._now(), trackers=self.trackers)
        support = podgroup_support(self.cache)
        plan = plan_podgroups(ms, ref, seen.observed, support)
        outcome = await self.applier.apply(plan, obj, defer_observation=True)
        # A disruption record that expires can change which groups are wanted: look again then.
        return result_of(plan.requeue_after, seen.disruption_ends_in, outcome.retry_after, settle=outcome.settle)
