"""The thin apply layer: executes a :class:`~kthena_py.plan.modelserving.core.types.Plan`, deciding nothing.

Guarantees:

* Creations run in two steps: ControllerRevisions first (a revision is recorded before any pod
  carries it: when one is refused, no pod is created), then everything else (Services, PodGroups,
  pods) concurrently (bounded), so a gang's pods appear together and the scheduler never sees half a
  gang for long. AlreadyExists is success only when the existing object is controlled by the same
  owner (a read confirms it); a name held by another owner's object (a same-named predecessor that
  lingers) is a refused create that waits for it.
* Deletions carry the planned UID as a precondition: a replacement object is never deleted.
  NotFound and precondition conflicts are success (someone else already acted).
* Updates are JSON merge patches carrying ``metadata.uid``, which the API server checks.
* Refused writes never fail the whole plan: every other write of the plan is still made, the status
  is still written, and each refusal is reported and paced by :mod:`.failures` (a Warning Event, the
  failure condition, per-child exponential backoff that the deletes it triggers cannot reset); the
  outcome's ``retry_after`` says when the next attempt is due.
* Stale caches never create children: while the informer cache is disrupted (an informer is
  disconnected, or failed or relisted within the last minute), the owner is confirmed with a live read
  before anything is created; an owner that is gone, replaced or being deleted gets no children.
* The status is written by server-side apply of the fields the plan lists, under the applier's field manager
  (:meth:`~kthena_py.runtime.statuswrite.StatusWriter.apply`), so several reconcilers share one status (each owns
  its fields and its condition types) without dropping each other's. It is written only when a listed field differs
  from what the cache holds (no write on a no-op), and only by a reconcile that created or deleted nothing: a
  creation or deletion that took effect is observed by the informer, which triggers the next reconcile, and that one
  writes the status from the new state. A burst of creations therefore costs one status write, not one per step.
  With a :class:`~.pacing.ProgressPacer`, a status change that only reports progress (``availableReplicas`` while
  ``Available`` stays as it is...) waits a moment for what follows it, and the outcome's ``status_due_in`` says
  when it is due; any other change is written at once, carrying the progress that waited.
* Events go through the manager's recorder (never blocking, never failing the reconcile); Kthena's role events
  are never joined (:func:`~kthena_py.plan.modelserving.groups.events.joinable`).
* Read your own writes: the ModelServing status the API server answers a status write with is recorded in the
  cache (:meth:`~kthena_py.runtime.cache.SharedCache.record_write`), so the next reconcile reads it without
  waiting for the watch to deliver it; for every other write the applier waits (bounded) until the informer
  cache reflects it, or, with ``defer_observation``, returns that wait as the outcome's
  ``settle`` for the controller to await with the worker released while the key stays in progress.
  Either way the next reconcile of the same ModelServing plans from a cache that contains this one's
  effects, and never mistakes a pod it just created for a missing one. The wait is woken by the watch
  events of the written objects, never by polling. Nothing but the pacing of refused writes and of progress-only
  status changes is remembered across reconciles.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, is_deleting, meta, resource_version_of, uid_of
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES, ResourceType
from kthena_py.plan.modelserving.core.types import Delete, Plan, Update
from kthena_py.plan.modelserving.groups.events import joinable
from kthena_py.plan.modelserving.groups.status import progress_only
from kthena_py.runtime import timeline
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Settle
from kthena_py.runtime.statuswrite import StatusWriter, holds
from kthena_py.vocab.owners import controller_uid

from ..resources import MODELSERVINGS
from .failures import ChildFailure, FailureCondition, FailureTracker, Verb, body_digest
from .pacing import ProgressPacer

RESOURCES: dict[str, ResourceType] = {
    "Pod": PODS,
    "Service": SERVICES,
    "PodGroup": PODGROUPS,
    "ControllerRevision": CONTROLLER_REVISIONS,
}
CONCURRENCY = 16
OWNER_UNCONFIRMED_RETRY = 1.0
"""Seconds before retrying a plan whose owner could not be confirmed by a live read."""

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


class _LazyDigest:
    """:func:`body_digest` of a body, computed on first call (only a write that was or is refused needs it).

    A plain object rather than ``functools.cache`` over a lambda: that built a cache wrapper per write.
    """

    __slots__ = ("_body", "_digest")

    def __init__(self, body: KubeObject) -> None:
        self._body = body
        self._digest: str | None = None

    def __call__(self) -> str:
        if self._digest is None:
            self._digest = body_digest(self._body)
        return self._digest


def _lazy_digest(body: KubeObject) -> Callable[[], str]:
    """:func:`body_digest` of ``body``, computed on first call (:class:`_LazyDigest`)."""
    return _LazyDigest(body)


def _key_of(ms: KubeObject) -> tuple[str, str]:
    md = meta(ms)
    return (str(md.get("namespace", "")), str(md.get("name", "")))


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


@dataclass(frozen=True)
class ApplyOutcome:
    """What applying a plan did."""

    writes: int = 0
    """Writes attempted (successful or not)."""
    failures: tuple[ChildFailure, ...] = ()
    """Child writes refused now or still backing off from an earlier refusal."""
    retry_after: float | None = None
    """Seconds until a backing-off write may be tried again (``None``: nothing waits)."""
    settle: Settle | None = None
    """With ``defer_observation``: the wait for the cache to show this apply's writes, for the caller to hand to
    its controller (:attr:`kthena_py.runtime.reconcile.Result.settle`); ``None`` when nothing is left to wait for."""
    status_due_in: float | None = None
    """Seconds until a progress-only status change that was left waiting is due (``None``: none waits)."""


@dataclass
class _Run:
    """The state of one :meth:`PlanApplier.apply`."""

    owner: str
    written: list[_Written]
    failures: list[ChildFailure]
    retry_after: float | None = None

    def retry_in(self, seconds: float | None) -> None:
        if seconds is not None and seconds > 0:
            self.retry_after = seconds if self.retry_after is None else min(self.retry_after, seconds)


class PlanApplier:
    """Applies plans for one reconciler (its field manager names it in managedFields).

    Args:
        client: The API client.
        recorder: Where events go.
        field_manager: The reconciler's field manager.
        cache: The informer cache (read-your-writes, disruption checks).
        sync_timeout: How long to wait for the cache to show this reconcile's writes.
        failures: The failure condition to keep (``None``: refusals are only evented and paced).
        tracker: Backoff of refused writes (shared by all reconciles of this applier).
        wall_clock: Epoch seconds, for condition transition times.
        pacer: When progress-only status changes are written (``None``: at once).
        on_written: Told of every child created or updated, with the API server's answer, as soon as it comes
            (:class:`~.echoes.OwnWrites` keeps the watch echo of such a write from waking the reconciler again).
    """

    def __init__(
        self,
        client: KubeApi,
        recorder: EventSink,
        field_manager: str,
        cache: SharedCache | None = None,
        *,
        sync_timeout: float = 10.0,
        failures: FailureCondition | None = None,
        tracker: FailureTracker | None = None,
        wall_clock: Callable[[], float] = time.time,
        pacer: ProgressPacer | None = None,
        on_written: Callable[[ResourceType, KubeObject], None] | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.field_manager = field_manager
        self.cache = cache
        self.sync_timeout = sync_timeout
        self.failures = failures
        self.tracker = tracker or FailureTracker()
        self._now = wall_clock
        self.status_writer = StatusWriter(client, MODELSERVINGS, field_manager)
        self.pacer = pacer
        self.on_written = on_written

    async def apply(
        self,
        plan: Plan,
        ms: KubeObject,
        *,
        waiting: Iterable[ChildFailure] = (),
        defer_observation: bool = False,
    ) -> ApplyOutcome:
        """Execute ``plan`` for the cached ModelServing ``ms``.

        Args:
            plan: The plan.
            ms: The ModelServing as cached.
            waiting: Children the planner holds back for a reason outside this plan (a name held by
                another owner's object); reported with the refusals.
            defer_observation: Return the wait for the cache to show the writes as the outcome's ``settle``
                instead of waiting here (when the plan was applied in full; a write that raised is still
                waited for here). The caller must see that it is awaited before the key is reconciled again.
        """
        writes = 0
        md = meta(ms)
        namespace = str(md.get("namespace", ""))
        run = _Run(str(md.get("uid", "")), [], list(waiting))
        applied = False
        status_due_in: float | None = None
        for event in plan.events:
            self.recorder.event(ms, event.type, event.reason, event.message, join=joinable(event.reason))
        try:
            if plan.deletes:
                await _bounded(self._delete(d, namespace, run, ms) for d in plan.deletes)
                writes += len(plan.deletes)
            if plan.updates:
                await _bounded(self._update(u, namespace, run, ms) for u in plan.updates)
                writes += len(plan.updates)
            if plan.creates and await self._owner_confirmed(ms, run):
                revisions_refused = False
                for phase in (0, 1):
                    batch = [o for o in plan.creates if _phase(o) == phase]
                    if not batch or revisions_refused:
                        continue
                    before = len(run.failures)
                    await _bounded(self._create(o, run, ms) for o in batch)
                    writes += len(batch)
                    revisions_refused = phase == 0 and len(run.failures) > before
            follow_up = any(w.creates_or_deletes for w in run.written)
            # Server-side apply of this reconciler's share: other writers' conditions stay theirs.
            if plan.status is not None and not follow_up:
                status_due_in = self._progress_wait(ms, plan.status)
                if status_due_in is None and await self._write_status(ms, plan.status, run.written):
                    writes += 1
            if self.failures is not None:
                updated = await self.failures.report(ms, run.failures, self._now())
                if updated is not None:
                    self._status_written(updated, run.written)
                    writes += 1
            applied = True
        finally:
            if not (applied and defer_observation):
                await self._await_observed(run.written)
        run.retry_in(self.tracker.retry_after(run.owner))
        settle = self._settle(run.written) if defer_observation else None
        return ApplyOutcome(writes, tuple(run.failures), run.retry_after, settle, status_due_in)

    def _progress_wait(self, ms: KubeObject, share: KubeObject) -> float | None:
        """Seconds the status change ``share`` still waits, being progress only (``None``: write it now, if due)."""
        if self.pacer is None:
            return None
        current = ms.get("status") or {}
        key = _key_of(ms)
        if holds(current, share) or not progress_only(current, share):
            self.pacer.settled(key)
            return None
        return self.pacer.wait(key)

    def forget(self, ms: KubeObject) -> None:
        """The ModelServing ``ms`` is gone or going: nothing of it is kept."""
        self.tracker.forget_owner(uid_of(ms))
        if self.pacer is not None:
            self.pacer.settled(_key_of(ms))

    # -- refusals --------------------------------------------------------------------------------------

    def _gate(self, run: _Run, verb: Verb, kind: str, name: str, digest: Callable[[], str]) -> bool:
        """Whether the write may be made now (else its last failure is carried as still pending).

        ``digest`` is asked for only when this write was refused before (most never are).
        """
        if not self.tracker.remembers(run.owner, verb, kind, name):
            return True
        pending = self.tracker.backing_off(run.owner, verb, kind, name, digest())
        if pending is None:
            return True
        run.failures.append(pending)
        return False

    def _refused(self, run: _Run, ms: KubeObject, failure: ChildFailure, digest: Callable[[], str]) -> None:
        delay = self.tracker.refused(run.owner, failure, digest())
        run.failures.append(failure)
        run.retry_in(delay)
        self.recorder.event(ms, "Warning", failure.reason, failure.describe())
        log.warning(
            "child write refused",
            verb=failure.verb,
            kind=failure.kind,
            child=failure.name,
            cause=failure.cause,
            retry_in=delay,
            refusals=self.tracker.refusals(run.owner, failure.verb, failure.kind, failure.name),
        )

    async def _owner_confirmed(self, ms: KubeObject, run: _Run) -> bool:
        """Whether children may be created for ``ms`` (a live read while the cache may be stale)."""
        if self.cache is None or not self.cache.recently_disrupted():
            return True
        md = meta(ms)
        try:
            live = await self.client.get(MODELSERVINGS, str(md.get("name")), str(md.get("namespace")))
        except NotFound:
            log.info("owner is gone; creating nothing", reason="cache lags the cluster")
            return False
        except ApiError as exc:
            log.warning("cannot confirm the owner before creating children", error=str(exc))
            run.retry_in(OWNER_UNCONFIRMED_RETRY)
            return False
        if uid_of(live) != run.owner or is_deleting(live):
            log.info("owner was replaced or is being deleted; creating nothing", live_uid=uid_of(live))
            return False
        return True

    # -- writes ----------------------------------------------------------------------------------------

    async def _create(self, obj: KubeObject, run: _Run, ms: KubeObject) -> None:
        kind = str(obj.get("kind"))
        rt = RESOURCES[kind]
        name = str(meta(obj).get("name", ""))
        digest = _lazy_digest(obj)
        if not self._gate(run, "create", kind, name, digest):
            return
        try:
            created = await self.client.create(rt, obj, field_manager=self.field_manager)
        except AlreadyExists as exc:
            await self._exists(obj, rt, run, ms, digest, exc)
            return
        except ApiError as exc:
            self._refused(run, ms, ChildFailure.of("create", kind, name, exc), digest)
            return
        if self.on_written is not None:
            self.on_written(rt, created)
        self.tracker.succeeded(run.owner, "create", kind, name)
        run.written.append(_Written.of(rt, created, "present", created=True))

    async def _exists(
        self,
        obj: KubeObject,
        rt: ResourceType,
        run: _Run,
        ms: KubeObject,
        digest: Callable[[], str],
        exc: AlreadyExists,
    ) -> None:
        """A create answered AlreadyExists: success if the object is ours, else wait for it to go."""
        kind, md = rt.kind, meta(obj)
        name, namespace = str(md.get("name", "")), str(md.get("namespace", "")) or None
        want = controller_uid(obj)
        try:
            existing = await self.client.get(rt, name, namespace)
        except NotFound:
            self._refused(run, ms, ChildFailure.of("create", kind, name, exc), digest)  # gone meanwhile: retry
            return
        except ApiError as err:
            self._refused(run, ms, ChildFailure.of("create", kind, name, err), digest)
            return
        have = controller_uid(existing)
        if want and have == want:
            self.tracker.succeeded(run.owner, "create", kind, name)
            run.written.append(_Written.of(rt, existing, "present"))
            return
        state = "being deleted" if is_deleting(existing) else "not being deleted"
        cause = (
            f"{kind} {name} already exists and is not controlled by this ModelServing "
            f"(uid {uid_of(existing)}, owner uid {have or 'none'}, {state}); waiting for it to go"
        )
        self._refused(run, ms, ChildFailure("create", kind, name, cause), digest)

    async def _delete(self, d: Delete, namespace: str, run: _Run, ms: KubeObject) -> None:
        rt = RESOURCES[d.kind]
        uid = d.uid
        if not self._gate(run, "delete", d.kind, d.name, lambda: uid):
            return
        try:
            await self.client.delete(rt, d.name, namespace, uid=d.uid or None, propagation_policy="Background")
        except (NotFound, Conflict):
            self.tracker.succeeded(run.owner, "delete", d.kind, d.name)
            return
        except ApiError as exc:
            self._refused(run, ms, ChildFailure.of("delete", d.kind, d.name, exc), lambda: uid)
            return
        self.tracker.succeeded(run.owner, "delete", d.kind, d.name)
        run.written.append(_Written(rt, d.name, namespace, d.uid, "", "gone", True))

    async def _update(self, u: Update, namespace: str, run: _Run, ms: KubeObject) -> None:
        rt = RESOURCES[u.kind]
        patch: dict[str, Any] = dict(u.patch)
        md = dict(patch.get("metadata") or {})
        if u.uid:
            md["uid"] = u.uid
        patch["metadata"] = md
        digest = _lazy_digest(patch)
        if not self._gate(run, "update", u.kind, u.name, digest):
            return
        try:
            updated = await self.client.patch(rt, u.name, patch, namespace, field_manager=self.field_manager)
        except (NotFound, Conflict):
            self.tracker.succeeded(run.owner, "update", u.kind, u.name)
            return
        except ApiError as exc:
            self._refused(run, ms, ChildFailure.of("update", u.kind, u.name, exc), digest)
            return
        if self.on_written is not None:
            self.on_written(rt, updated)
        self.tracker.succeeded(run.owner, "update", u.kind, u.name)
        run.written.append(_Written.of(rt, updated, "present"))

    def _settle(self, written: list[_Written]) -> Settle | None:
        """The deferred :meth:`_await_observed` of ``written`` (``None``: the cache shows them already)."""
        cache = self.cache
        if cache is None or all(w.observed(cache) for w in written):
            return None
        pending = list(written)

        async def settle() -> None:
            await self._await_observed(pending)

        return settle

    async def _await_observed(self, written: list[_Written]) -> None:
        """Wait (bounded by ``sync_timeout``) until the cache reflects every write in ``written``."""
        if self.cache is None or not written:
            return
        cache = self.cache
        objects = [(w.rt, w.name, w.namespace or None) for w in written]
        if not await cache.wait_for(objects, lambda: all(w.observed(cache) for w in written), self.sync_timeout):
            pending = [w.name for w in written if not w.observed(cache)]
            log.warning("cache did not reflect our writes in time", pending=pending[:10])

    def _status_written(self, updated: KubeObject, written: list[_Written]) -> None:
        """Note a status write the API server answered with ``updated``, and let cache reads see it at once."""
        written.append(_Written.of(MODELSERVINGS, updated, "present"))
        if self.cache is not None:
            self.cache.record_write(MODELSERVINGS, updated)

    async def _write_status(self, ms: KubeObject, status: KubeObject, written: list[_Written]) -> bool:
        try:
            done = await self.status_writer.apply(ms, status)
        except ApiError as exc:
            log.warning("cannot write status", error=str(exc))
            raise
        if done.object is None:
            return False
        updated = done.object
        self._status_written(updated, written)
        if self.pacer is not None:
            self.pacer.settled(_key_of(ms))
        if timeline.enabled():
            md = meta(ms)
            true = [
                c.get("type")
                for c in (updated.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"
            ]
            timeline.record(
                "status", manager=self.field_manager, key=f"{md.get('namespace')}/{md.get('name')}", true=true
            )
        return True
