"""The thin apply layer: executes a :class:`~kthena_py.plan.modelserving.types.Plan`, deciding nothing.

Guarantees:

* Creations run in two steps: ControllerRevisions first (a revision is recorded before any pod
  carries it), then everything else (Services, PodGroups, pods) concurrently (bounded), so a gang's
  pods appear together and the scheduler never sees half a gang for long. AlreadyExists is success.
* Deletions carry the planned UID as a precondition: a replacement object is never deleted.
  NotFound and precondition conflicts are success (someone else already acted).
* Updates are JSON merge patches carrying ``metadata.uid``, which the API server checks.
* The status is written by server-side apply of the fields the plan lists, under the applier's field
  manager, so several reconcilers share one status (each owns its fields and its condition types) without
  dropping each other's. It is written only when a listed field differs from what the cache holds (no
  write on a no-op), and only by a reconcile that created or deleted nothing: a creation or deletion that took effect is
  observed by the informer, which triggers the next reconcile, and that one writes the status from
  the new state. A burst of creations therefore costs one status write, not one per step.
* Events go through the manager's recorder (never blocking, never failing the reconcile); Kthena's role events
  are never joined (:func:`~kthena_py.plan.modelserving.events.joinable`).
* Read your own writes: before returning, the applier waits (bounded) until the informer cache
  reflects every write it made. Workers never reconcile one key concurrently, so the next reconcile
  of the same ModelServing plans from a cache that contains this one's effects, and never mistakes a
  pod it just created for a missing one. Nothing is remembered across reconciles.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeClient, NotFound
from kthena_py.kube.objects import KubeObject, is_deleting, meta, resource_version_of, uid_of
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES, ResourceType
from kthena_py.plan.modelserving.events import joinable
from kthena_py.plan.modelserving.types import Delete, Plan, Update
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventRecorder

from ..resources import MODELSERVINGS

RESOURCES: dict[str, ResourceType] = {
    "Pod": PODS,
    "Service": SERVICES,
    "PodGroup": PODGROUPS,
    "ControllerRevision": CONTROLLER_REVISIONS,
}
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
    return 0 if obj.get("kind") == "ControllerRevision" else 1


def _rv(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return -1


@dataclass(frozen=True)
class _Written:
    """One write whose effect the cache must show before the reconcile ends."""

    rt: ResourceType
    name: str
    namespace: str
    uid: str
    resource_version: str
    expect: Literal["present", "gone"]
    creates_or_deletes: bool = False
    """Whether the write created or deleted an object (its watch event triggers another reconcile)."""

    @classmethod
    def of(
        cls, rt: ResourceType, obj: KubeObject, expect: Literal["present", "gone"], *, created: bool = False
    ) -> _Written:
        md = meta(obj)
        return cls(
            rt,
            str(md.get("name", "")),
            str(md.get("namespace", "")),
            str(md.get("uid", "")),
            str(md.get("resourceVersion", "")),
            expect,
            created,
        )

    def observed(self, cache: SharedCache) -> bool:
        cached = cache.get(self.rt, self.name, self.namespace or None)
        if self.expect == "gone":
            return cached is None or uid_of(cached) != self.uid or is_deleting(cached)
        if cached is None or uid_of(cached) != self.uid:
            return False
        have, want = resource_version_of(cached), self.resource_version
        return have == want or _rv(have) >= _rv(want)


class PlanApplier:
    """Applies plans for one reconciler (its field manager names it in managedFields)."""

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        field_manager: str,
        cache: SharedCache | None = None,
        *,
        sync_timeout: float = 10.0,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.field_manager = field_manager
        self.cache = cache
        self.sync_timeout = sync_timeout

    async def apply(self, plan: Plan, ms: KubeObject) -> int:
        """Execute ``plan`` for the cached ModelServing ``ms``; return the number of writes made."""
        writes = 0
        namespace = str(meta(ms).get("namespace", ""))
        written: list[_Written] = []
        for event in plan.events:
            self.recorder.event(ms, event.type, event.reason, event.message, join=joinable(event.reason))
        try:
            if plan.deletes:
                await _bounded(self._delete(d, namespace, written) for d in plan.deletes)
                writes += len(plan.deletes)
            if plan.updates:
                await _bounded(self._update(u, namespace, written) for u in plan.updates)
                writes += len(plan.updates)
            for phase in (0, 1):
                batch = [o for o in plan.creates if _phase(o) == phase]
                if batch:
                    await _bounded(self._create(o, written) for o in batch)
                    writes += len(batch)
            follow_up = any(w.creates_or_deletes for w in written)
            if plan.status is not None and not follow_up and await self._write_status(ms, plan.status, written):
                writes += 1
        finally:
            await self._await_observed(written)
        return writes

    async def _create(self, obj: KubeObject, written: list[_Written]) -> None:
        rt = RESOURCES[str(obj.get("kind"))]
        with contextlib.suppress(AlreadyExists):
            created = await self.client.create(rt, obj, field_manager=self.field_manager)
            written.append(_Written.of(rt, created, "present", created=True))

    async def _delete(self, d: Delete, namespace: str, written: list[_Written]) -> None:
        rt = RESOURCES[d.kind]
        with contextlib.suppress(NotFound, Conflict):
            await self.client.delete(rt, d.name, namespace, uid=d.uid or None, propagation_policy="Background")
            written.append(_Written(rt, d.name, namespace, d.uid, "", "gone", True))

    async def _update(self, u: Update, namespace: str, written: list[_Written]) -> None:
        rt = RESOURCES[u.kind]
        patch: dict[str, Any] = dict(u.patch)
        md = dict(patch.get("metadata") or {})
        if u.uid:
            md["uid"] = u.uid
        patch["metadata"] = md
        with contextlib.suppress(NotFound, Conflict):
            updated = await self.client.patch(rt, u.name, patch, namespace, field_manager=self.field_manager)
            written.append(_Written.of(rt, updated, "present"))

    async def _await_observed(self, written: list[_Written]) -> None:
        """Wait (bounded by ``sync_timeout``) until the cache reflects every write in ``written``."""
        if self.cache is None or not written:
            return
        cache = self.cache
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.sync_timeout
        pending = list(written)
        while pending:
            pending = [w for w in pending if not w.observed(cache)]
            if not pending:
                return
            if loop.time() >= deadline:
                log.warning("cache did not reflect our writes in time", pending=[w.name for w in pending][:10])
                return
            await asyncio.sleep(0.02)

    async def _write_status(self, ms: KubeObject, status: KubeObject, written: list[_Written]) -> bool:
        if status_applied(ms.get("status") or {}, status):
            return False
        md = meta(ms)
        body = {
            "metadata": {"name": md.get("name"), "namespace": md.get("namespace"), "uid": md.get("uid")},
            "status": status,
        }
        try:
            updated = await self.client.patch(
                MODELSERVINGS,
                str(md.get("name")),
                body,
                str(md.get("namespace")),
                patch_type="apply",
                subresource="status",
                field_manager=self.field_manager,
                force=True,
            )
        except NotFound:
            return False
        except ApiError as exc:
            log.warning("cannot write status", error=str(exc))
            raise
        written.append(_Written.of(MODELSERVINGS, updated, "present"))
        return True


def status_applied(current: KubeObject, owned: KubeObject) -> bool:
    """Whether ``current`` already holds every field of ``owned`` (conditions compared by ``type``)."""
    for key, value in owned.items():
        if key != "conditions":
            if current.get(key) != value:
                return False
            continue
        have = {c.get("type"): c for c in current.get("conditions") or [] if isinstance(c, dict)}
        if any(have.get(c.get("type")) != c for c in value or []):
            return False
    return True
