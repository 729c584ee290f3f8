"""The eviction budget reconciler: shows each ModelServing's budget and garbage-collects its tracker.

For every ModelServing with ``rolloutStrategy.evictionStrategy`` it keeps the ``DisruptionAllowed`` condition
(:mod:`kthena_py.plan.modelserving.eviction.report`) up to date, and prunes the tracker ConfigMap: expired
entries and entries whose unit is ready again with a replacement pod go, an empty tracker is deleted.

Guarantees:

* Reads only the informer cache (ModelServings, their pods and revisions, tracker ConfigMaps); decisions are the
  pure functions of :mod:`kthena_py.plan.modelserving.eviction`; ``now`` is the wall clock.
* The condition is written with server-side apply on the status subresource as field manager ``kthena-py-eviction``
  (:meth:`~kthena_py.runtime.statuswrite.StatusWriter.apply`; ``conditions`` is a list-map keyed by ``type``), so
  it never touches the conditions or fields of other reconcilers; it is written only when it changes (a restart on a
  converged cluster writes nothing) and removed when the evictionStrategy is.
* Tracker writes name the ``resourceVersion`` they were computed from; a conflict with the webhook (or another
  writer) requeues the ModelServing instead of overwriting a grant.
* Expired entries are dropped on the cached view; a recovered unit is released only on pods listed from the API
  server after the tracker version being written back was stored (one LIST, made only when the cached view
  suggests a release), so a cache that has not yet seen a granted pod go never releases its unit.
* Requeues itself for the earliest expiry of a recorded disruption, or the end of its hold, so the condition and
  the tracker follow the TTL and the holds without any event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pydantic
import structlog

from kthena_py.kube import ApiError, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, is_deleting, meta
from kthena_py.kube.resources import CONFIGMAPS
from kthena_py.plan.modelserving.eviction import (
    CONDITION_TYPE,
    budget_condition,
    budget_statuses,
    expire,
    next_expiry,
    prune,
    tracker_name,
    unit_index,
)
from kthena_py.plan.modelserving.groups.status import set_condition
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.runtime.statuswrite import StatusWriter

from ..resources import MODELSERVINGS
from ..servingview import ms_ref, parse_modelserving
from .metrics import TRACKER_WRITES, BudgetSeries
from .tracker import TrackerConflict, TrackerStore, owned_entries
from .view import observe_cached, observe_live, planning_state

__all__ = ["FIELD_MANAGER", "EvictionBudgetReconciler", "condition_of"]

FIELD_MANAGER = "kthena-py-eviction"

log = structlog.get_logger("kthena_py.eviction")


def condition_of(obj: KubeObject) -> dict[str, Any] | None:
    """The ``DisruptionAllowed`` condition of a ModelServing object, if any."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == CONDITION_TYPE:
            return condition
    return None


class EvictionBudgetReconciler:
    """Keeps one ModelServing's ``DisruptionAllowed`` condition and tracker current."""

    def __init__(self, client: KubeApi, cache: SharedCache, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.cache = cache
        self.store = TrackerStore(client, FIELD_MANAGER)
        self.status_writer = StatusWriter(client, MODELSERVINGS, FIELD_MANAGER)
        self.series = BudgetSeries()
        self._now = wall_clock

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: drop what is kept for them here."""
        self.series.forget_namespaces(leaving)

    async def reconcile(self, request: Request) -> Result | None:
        """Reconcile one ModelServing."""
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            self.series.set(request.namespace, request.name, {})
            return None  # the tracker goes with the ModelServing (ownerReference)
        try:
            ms = parse_modelserving(obj)
        except pydantic.ValidationError:
            return None  # the ServingGroup reconciler reports an unreadable spec
        ref = ms_ref(obj)
        strategy = ms.spec.rollout_strategy.eviction_strategy if ms.spec.rollout_strategy else None
        tracker = self.cache.get(CONFIGMAPS, tracker_name(ref.name), ref.namespace)
        now = self._now()
        state = planning_state(ms, ref, observe_cached(self.cache, ref))
        entries = owned_entries(tracker, ref)
        pruned = prune(entries, unit_index(state), now)
        if pruned != expire(entries, now):  # a release: confirm it on the cluster as it is now
            live = planning_state(ms, ref, await observe_live(self.client, self.cache, obj, ref))
            pruned = prune(entries, unit_index(live), now)
        if tracker is not None and (pruned != entries or not pruned):
            try:
                wrote = await self.store.write(ref, tracker, pruned)
            except TrackerConflict:
                TRACKER_WRITES.labels("conflict").inc()
                return Result(requeue_after=0.5)  # the webhook wrote meanwhile: look again once the cache has it
            if wrote:
                TRACKER_WRITES.labels("ok").inc()
                log.info("tracker pruned", dropped=sorted(set(entries) - set(pruned)), left=len(pruned))
        if strategy is None:
            self.series.set(ref.namespace, ref.name, {})
            await self._remove_condition(obj)
        else:
            disrupted = frozenset(key for key, entry in pruned.items() if now < entry.expires_at)
            statuses = budget_statuses(state, strategy, disrupted)
            self.series.set(
                ref.namespace,
                ref.name,
                {(f"{s.group}/{s.role}" if s.role else "*"): (s.ready, s.min_available, s.allowed) for s in statuses},
            )
            status, reason, message = budget_condition(strategy.protection_level, statuses)
            previous = ms.status.conditions if ms.status else None
            condition = set_condition(previous, CONDITION_TYPE, status, reason, message, ref.generation, now)
            await self._apply_condition(obj, condition)
        expiry = next_expiry(pruned, now)
        return Result(requeue_after=max(0.5, expiry - now + 0.5)) if expiry is not None else None

    async def _apply_condition(self, obj: KubeObject, condition: dict[str, Any]) -> None:
        if (await self.status_writer.apply(obj, {"conditions": [condition]})).written:
            log.info("budget condition", status=condition["status"], message=condition["message"])

    async def _remove_condition(self, obj: KubeObject) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        for index, condition in enumerate(conditions):
            if isinstance(condition, dict) and condition.get("type") == CONDITION_TYPE:
                md = meta(obj)
                patch = [
                    {"op": "test", "path": f"/status/conditions/{index}/type", "value": CONDITION_TYPE},
                    {"op": "remove", "path": f"/status/conditions/{index}"},
                ]
                try:
                    await self.client.patch(
                        MODELSERVINGS,
                        str(md.get("name")),
                        patch,
                        str(md.get("namespace")),
                        patch_type="json",
                        subresource="status",
                        field_manager=FIELD_MANAGER,
                    )
                except (NotFound, ApiError) as exc:
                    if not isinstance(exc, NotFound) and exc.status != 422:
                        raise
                return
