"""The rollout reconciler: rolling updates of ServingGroups or role instances, within one budget.

Guarantees: each reconcile reads only the informer cache, calls the pure planner
:func:`~kthena_py.plan.modelserving.rollout.rollout.plan_rollout` and applies its plan with its own field manager
(``kthena-py-rollout``): it takes outdated units down (UID preconditions) or patches them in place (UID-guarded
merge patches that carry the per-pod in-place state), and server-side applies the ``UpdateInProgress`` and
``CoordinatedRoleRolloutBlocked`` conditions, which it alone owns. It never creates anything: the ServingGroup
reconciler re-creates every missing unit at its target revision. Nothing is remembered between reconciles, so a
restarted manager resumes a rollout from the cluster alone (in-place progress lives in pod annotations); the
key is held (the result's ``settle``, with the worker released) until the cache shows its writes, so the next step
is planned from a cache that already counts them as unavailable. A requeue brings the next step back when an
in-place update's deadline comes, or (while a rollout condition is written) when the first eviction record of
the observation (:func:`~.observe.observe_serving`, the one the ServingGroup and gang reconcilers plan from too)
expires. The metrics count the plan's typed :class:`~kthena_py.plan.modelserving.rollout.rollout.RolloutStep`.

A pod change wakes it :data:`ROLLOUT_COALESCE` seconds later, and every change of that burst rides on the same
reconcile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import pydantic
import structlog
from prometheus_client import Counter

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject, is_deleting, label_of, labels_of, namespace_of
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core.plugins import PluginError
from kthena_py.plan.modelserving.rollout.rollout import RolloutStep, plan_rollout
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Predicate, became_ready_only, pod_state_changed
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.reconcile import Request, Result, result_of
from kthena_py.vocab.owners import controller_uid

from ..resources import MODELSERVINGS
from .apply import PlanApplier
from .notify import GROUP, ROLE_ID, pod_ready
from .observe import ms_ref, observe_serving, parse_modelserving, podgroup_support

FIELD_MANAGER = "kthena-py-rollout"
ROLLOUT_COALESCE = 0.5
"""Seconds the rollout reconciler lets pod changes gather before it looks (one look per burst).

A unit's pods are created, deleted and become ready together, and a step waits on units that take seconds to
minutes to start, so half a second more costs a rollout nothing. At 100 ModelServings being created, pod changes
woke the reconciler 864 times until Available without it (about once per pod)."""

UNITS_UPDATED: Final = Counter(
    "kthena_rollout_units_total",
    "Units (ServingGroups or role instances) a rollout moved, by how: inplace, recreate, or fallback (InPlace was "
    "asked for but the unit had to be recreated).",
    ("namespace", "modelserving", "method"),
    registry=REGISTRY,
)
DEADLINES_EXCEEDED: Final = Counter(
    "kthena_rollout_progress_deadline_exceeded_total",
    "Units updated in place that were not Ready on their new images within progressDeadlineSeconds.",
    ("namespace", "modelserving"),
    registry=REGISTRY,
)

log = structlog.get_logger("kthena_py.modelserving.rollout")


def unit_change_matters(cache: SharedCache) -> Predicate:
    """Pod changes that can move a rollout: everything but a pod becoming Ready before its role instance is."""
    cache.index_label(PODS, GROUP)

    def predicate(old: KubeObject | None, new: KubeObject) -> bool:
        if not pod_state_changed(old, new):
            return False
        if old is None or not became_ready_only(old, new):
            return True
        labels = labels_of(new)
        group, role_id = labels.get(GROUP), labels.get(ROLE_ID)
        owner = controller_uid(new)
        if not group or not role_id:
            return True
        return all(
            pod_ready(p)
            for p in cache.by_label(PODS, GROUP, group, namespace_of(new))
            if label_of(p, ROLE_ID) == role_id and not is_deleting(p) and controller_uid(p) == owner
        )

    return predicate


class RolloutReconciler:
    """Moves outdated ServingGroups or role instances of one ModelServing to its update revision."""

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
        self.applier = PlanApplier(client, recorder, FIELD_MANAGER, cache)
        self.trackers = trackers
        self._now = wall_clock

    async def reconcile(self, request: Request) -> Result | None:
        """Plan and apply one rollout step."""
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            return None
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError:
            return None  # reported by the ServingGroup reconciler
        ref = ms_ref(obj)
        now = self._now()
        seen = observe_serving(self.cache, ref, now, trackers=self.trackers)
        try:
            plan = plan_rollout(ms, ref, seen.observed, podgroup_support(self.cache), now)
        except PluginError:
            return None  # reported by the ServingGroup reconciler
        outcome = await self.applier.apply(plan, obj, defer_observation=True)
        if outcome.writes:
            log.info("rollout step", writes=outcome.writes, reasons=list(plan.reasons))
        if plan.step is not None:
            _count(plan.step, ref.namespace, ref.name)
        # A disruption record that expires frees budget: look again then (as for in-place deadlines); a refused write
        # is tried again when its backoff ends, as in the other ModelServing reconcilers.
        return result_of(
            plan.requeue_after,
            seen.disruption_ends_in if plan.status is not None else None,
            outcome.retry_after,
            settle=outcome.settle,
        )


def _count(step: RolloutStep, namespace: str, name: str) -> None:
    """Count the units one step moved, by how, and the in-place updates it found past their deadline."""
    patched, fallback = len(step.in_place), len(step.fallbacks)
    recreated = len(step.take_down) - patched - fallback
    for method, count in (("inplace", patched), ("recreate", recreated), ("fallback", fallback)):
        if count > 0:
            UNITS_UPDATED.labels(namespace, name, method).inc(count)
    if step.missed_deadline:
        DEADLINES_EXCEEDED.labels(namespace, name).inc(len(step.missed_deadline))
