"""The thin apply layer: executes a :class:`~kthena_py.plan.modelserving.types.Plan`, deciding nothing.

Guarantees:

* Creations run in the plan's order where it matters: ControllerRevisions first, then Services,
  PodGroups and worker pods, then entry pods (so an entry pod exists only once its workers were
  created; the planners rely on this to tell "failed" from "not yet created").
  Within a phase they run concurrently (bounded). AlreadyExists is success.
* Deletions carry the planned UID as a precondition: a replacement object is never deleted.
  NotFound and precondition conflicts are success (someone else already acted).
* Updates are JSON merge patches carrying ``metadata.uid``, which the API server checks.
* The status is written only when it differs from what the cache holds (no write on a no-op).
* Events go through the manager's recorder (never blocking, never failing the reconcile).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from typing import Any

import structlog

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeClient, NotFound
from kthena_py.kube.objects import KubeObject, labels_of, meta
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES, ResourceType
from kthena_py.plan.modelserving.types import Delete, Plan, Update
from kthena_py.runtime.events import EventRecorder

from ..resources import MODELSERVINGS

RESOURCES: dict[str, ResourceType] = {
    "Pod": PODS,
    "Service": SERVICES,
    "PodGroup": PODGROUPS,
    "ControllerRevision": CONTROLLER_REVISIONS,
}
ENTRY_LABEL = "modelserving.volcano.sh/entry"
CONCURRENCY = 16

log = structlog.get_logger("kthena_py.modelserving.apply")


async def _bounded(tasks: Iterable[Awaitable[None]], limit: int = CONCURRENCY) -> None:
    sem = asyncio.Semaphore(limit)

    async def run(t: Awaitable[None]) -> None:
        async with sem:
            await t

    results = await asyncio.gather(*(run(t) for t in tasks), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]


def _phase(obj: KubeObject) -> int:
    kind = obj.get("kind")
    if kind == "ControllerRevision":
        return 0
    if kind == "Pod" and labels_of(obj).get(ENTRY_LABEL) == "true":
        return 2
    return 1


class PlanApplier:
    """Applies plans for one reconciler (its field manager names it in managedFields)."""

    def __init__(self, client: KubeClient, recorder: EventRecorder, field_manager: str) -> None:
        self.client = client
        self.recorder = recorder
        self.field_manager = field_manager

    async def apply(self, plan: Plan, ms: KubeObject) -> int:
        """Execute ``plan`` for the cached ModelServing ``ms``; return the number of writes made."""
        writes = 0
        namespace = str(meta(ms).get("namespace", ""))
        for event in plan.events:
            self.recorder.event(ms, event.type, event.reason, event.message)
        if plan.deletes:
            await _bounded(self._delete(d, namespace) for d in plan.deletes)
            writes += len(plan.deletes)
        if plan.updates:
            await _bounded(self._update(u, namespace) for u in plan.updates)
            writes += len(plan.updates)
        for phase in (0, 1, 2):
            batch = [o for o in plan.creates if _phase(o) == phase]
            if batch:
                await _bounded(self._create(o) for o in batch)
                writes += len(batch)
        if plan.status is not None and await self._write_status(ms, plan.status):
            writes += 1
        return writes

    async def _create(self, obj: KubeObject) -> None:
        rt = RESOURCES[str(obj.get("kind"))]
        with contextlib.suppress(AlreadyExists):
            await self.client.create(rt, obj, field_manager=self.field_manager)

    async def _delete(self, d: Delete, namespace: str) -> None:
        with contextlib.suppress(NotFound, Conflict):
            await self.client.delete(
                RESOURCES[d.kind], d.name, namespace, uid=d.uid or None, propagation_policy="Background"
            )

    async def _update(self, u: Update, namespace: str) -> None:
        rt = RESOURCES[u.kind]
        patch: dict[str, Any] = dict(u.patch)
        md = dict(patch.get("metadata") or {})
        if u.uid:
            md["uid"] = u.uid
        patch["metadata"] = md
        with contextlib.suppress(NotFound, Conflict):
            await self.client.patch(rt, u.name, patch, namespace, field_manager=self.field_manager)

    async def _write_status(self, ms: KubeObject, status: KubeObject) -> bool:
        current = ms.get("status") or {}
        if current == status:
            return False
        patch: dict[str, Any] = {k: None for k in current if k not in status}
        patch.update(status)
        md = meta(ms)
        try:
            await self.client.patch(
                MODELSERVINGS,
                str(md.get("name")),
                {"metadata": {"uid": md.get("uid")}, "status": patch},
                str(md.get("namespace")),
                subresource="status",
                field_manager=self.field_manager,
            )
        except NotFound:
            return False
        except ApiError as exc:
            log.warning("cannot write status", error=str(exc))
            raise
        return True
