"""The ModelServing controllers: ServingGroups, rollouts, gang scheduling and the ModelCache gate's condition.

ServingGroups cover pods, Services, recovery and status; the gate's ``ModelCached`` condition is reported for
ModelServings that name a ModelCache.
"""

from __future__ import annotations

from collections.abc import Iterable

from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS, CONTROLLER_REVISIONS, CRDS, PODGROUPS, PODS, QUEUES, SERVICES
from kthena_py.runtime.controller import Controller, spec_changed, spec_or_metadata_changed
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.reconcile import Request
from kthena_py.vocab.labels import SERVING_NAME

from ..components import MODELSERVING
from ..resources import MODELCACHES, MODELSERVINGS
from ..servingview import model_cache_changed, modelservings_of_cache, watch_model_caches
from .gang import CONTROLLER as GANG_CONTROLLER
from .gang import PodGroupReconciler
from .modelcache import ModelCacheGateReconciler
from .notify import RunningNotifier
from .observe import PODGROUP_CRD_SELECTOR, register_informers
from .predicates import existing_pod_changed, pod_change_matters
from .rollout import ROLLOUT_COALESCE, RolloutReconciler, unit_change_matters
from .scheduled import CONTROLLER as SCHEDULED_CONTROLLER
from .scheduled import ScheduledReconciler
from .scheduling import (
    SCHEDULING_COALESCE,
    podgroup_requests,
    podgroup_verdict_changed,
    queue_changed,
    queue_requests,
    register_scheduling_informers,
    scheduling_changed,
)
from .servinggroups import ServingGroupReconciler

__all__ = ["register"]


def register(manager: Manager, *, workers: int, eviction_budget: bool = False) -> list[Controller]:
    """Add the ModelServing controllers to ``manager``.

    Args:
        manager: The manager.
        workers: Concurrent reconciles per controller.
        eviction_budget: The eviction budget runs (its tracker ConfigMaps are cached): every ModelServing reconciler
            observes the units it records as disrupted, and they count as unavailable in every plan.
    """
    cache = manager.cache
    recorder = manager.recorder_for(MODELSERVING)
    register_informers(cache)
    register_scheduling_informers(cache)
    watch_model_caches(cache)
    cache_owners = modelservings_of_cache(cache)

    def every_modelserving(_: KubeObject) -> Iterable[Request]:
        return [Request(o["metadata"]["namespace"], o["metadata"]["name"]) for o in cache.list(MODELSERVINGS)]

    groups = (
        Controller(
            "modelserving",
            ServingGroupReconciler(manager.client, cache, recorder, trackers=eviction_budget),
            cache,
            workers=workers,
        )
        .for_(MODELSERVINGS, spec_or_metadata_changed)
        .owns(PODS, MODELSERVINGS, pod_change_matters(cache), urgent=existing_pod_changed)
        .owns(SERVICES, MODELSERVINGS, spec_or_metadata_changed)
        .owns(PODGROUPS, MODELSERVINGS, spec_changed)
        .owns(CONTROLLER_REVISIONS, MODELSERVINGS, spec_or_metadata_changed)
        .watches(CRDS, every_modelserving, field_selector=PODGROUP_CRD_SELECTOR)
    )
    podgroups = PodGroupReconciler(manager.client, cache, recorder, trackers=eviction_budget)
    gang = (
        Controller(GANG_CONTROLLER, podgroups, cache, workers=workers)
        .for_(MODELSERVINGS, spec_or_metadata_changed)
        # The echo of its own PodGroup write finds the plan carried out: it does not wake it again.
        .owns(PODGROUPS, MODELSERVINGS, podgroups.own_writes.passes(PODGROUPS, spec_changed))
        .watches(CRDS, every_modelserving, field_selector=PODGROUP_CRD_SELECTOR)
    )
    scheduled = (
        Controller(SCHEDULED_CONTROLLER, ScheduledReconciler(manager.client, cache, recorder), cache, workers=workers)
        .for_(MODELSERVINGS, spec_or_metadata_changed)
        .watches(CRDS, every_modelserving, field_selector=PODGROUP_CRD_SELECTOR)
        # Pods' verdicts, Volcano's PodGroup verdicts and queue positions, queue changes. A fleet's pods are created,
        # bound and judged in bursts: each burst is one look (SCHEDULING_COALESCE).
        .owns(PODS, MODELSERVINGS, scheduling_changed, coalesce=SCHEDULING_COALESCE)
        .watches(PODGROUPS, podgroup_requests(cache), podgroup_verdict_changed, coalesce=SCHEDULING_COALESCE)
        .watches(QUEUES, queue_requests(cache), queue_changed)
    )
    rollout = (
        Controller(
            "modelserving-rollout",
            RolloutReconciler(manager.client, cache, recorder, trackers=eviction_budget),
            cache,
            workers=workers,
        )
        .for_(MODELSERVINGS, spec_or_metadata_changed)
        # A unit's pods come, go and become ready together: one look per burst.
        .owns(PODS, MODELSERVINGS, unit_change_matters(cache), coalesce=ROLLOUT_COALESCE)
        .owns(CONTROLLER_REVISIONS, MODELSERVINGS, spec_or_metadata_changed)
    )
    # The serving gate: a ModelCache that changes opens or closes the gate of the ModelServings naming it.
    gate = (
        Controller(
            "modelserving-modelcache",
            ModelCacheGateReconciler(manager.client, cache, recorder),
            cache,
            workers=workers,
        )
        .for_(MODELSERVINGS, spec_or_metadata_changed)
        .watches(MODELCACHES, cache_owners, model_cache_changed)
    )
    for c in (groups, rollout, gang):
        c.watches(MODELCACHES, cache_owners, model_cache_changed)
    if eviction_budget:
        # A grant or a release in the tracker changes which units count as disrupted: every planner looks again.
        cache.select(CONFIGMAPS, SERVING_NAME)  # trackers only (the eviction budget selects the same)
        for c in (groups, rollout, gang):
            c.owns(CONFIGMAPS, MODELSERVINGS, tracker_records_changed)
    for c in (groups, rollout, gang, scheduled, gate):
        manager.add_controller(c)
    cache.informer(PODS).add_handler(RunningNotifier(cache, recorder, manager.responsible_for))
    return [groups, rollout, gang, scheduled, gate]


def tracker_records_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Whether an eviction tracker's records changed (a grant, a release or an expiry pruned)."""
    return old is None or old.get("data") != new.get("data")
