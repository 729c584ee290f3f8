"""The controller engine: watches feed keys into a rate-limited queue, workers call the reconciler.

Guarantees:

* Watches are declared with :meth:`Controller.for_` (the primary kind), :meth:`Controller.owns`
  (children, mapped to their controlling owner of the primary kind) and :meth:`Controller.watches`
  (any kind, with a mapper function). They are attached when the controller starts, and replay the
  cache's content then, so nothing that happened while the controller was not running is missed.
* A watch may mark the requests of some changes as urgent (``urgent=``): they are handed to workers before
  every other waiting request, so that, say, a pod's readiness is reported while a fleet is still being created.
* A watch may coalesce (``coalesce=`` seconds): its requests are queued that long after the first change, and
  the changes that come meanwhile ride on the same reconcile (the earliest deadline is kept, nothing is pushed
  back), so a burst of pod events costs one reconcile rather than one each. For concerns no one waits on within
  that time (a condition that reports, not one that gates).
* At most one worker reconciles a given key at a time (the queue's guarantee); ``workers``
  different keys are reconciled concurrently. A reconcile that returns a ``settle`` wait
  (:class:`~kthena_py.runtime.reconcile.Result`) frees its worker at once; its key stays in progress (an
  event for it meanwhile queues it for after the wait) until the wait ends or fails, which is logged.
* Outcomes follow :mod:`kthena_py.runtime.reconcile`; each one is counted in the
  controller-runtime metrics and logged with a ``reconcile_id``.
* No exception escapes a worker: unexpected ones ("panics") are logged with a traceback, counted in
  ``controller_runtime_reconcile_panics_total`` and retried with backoff.
* :meth:`Controller.stop` either drains in-flight work, settle waits included (graceful shutdown), or
  cancels it at once (loss of leadership, where no further write must happen).
* **Sharded** (:meth:`Controller.shard_by`): a request is queued and reconciled only while its namespace is this
  replica's (cluster-scoped requests go with the namespace ``""``); one that is not is dropped when the change
  comes and again when a worker would take it, and counted in ``kthena_shard_filtered_requests_total``.
  :meth:`Controller.release` drains, then cancels, the reconciles in flight for namespaces no longer owned, and
  has the reconciler forget what it keeps for them (:class:`~kthena_py.runtime.reconcile.ForgetsNamespaces`);
  :meth:`Controller.resync` queues every cached object of newly owned namespaces, since their changes were dropped.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import structlog

from kthena_py.kube import ApiError, ResourceType
from kthena_py.kube.objects import KubeObject, controller_ref, name_of, namespace_of
from kthena_py.vocab.conditions import POD_READY
from kthena_py.vocab.pods import running_and_ready

from . import metrics, timeline
from .cache import SharedCache
from .clock import Clock, RealClock
from .perevent import once_per_event, once_per_object
from .reconcile import ForgetsNamespaces, Reconciler, Request, Result, Settle, TerminalError
from .workqueue import RateLimitingQueue, ShutDown

Mapper = Callable[[KubeObject], Iterable[Request]]
Owns = Callable[[str], bool]
"""Whether requests of a namespace are this replica's to reconcile now (``""`` for cluster-scoped ones)."""
Predicate = Callable[[KubeObject | None, KubeObject], bool]
"""Called with (old, new) (old is None for adds and deletes); ``False`` drops the event."""

log = structlog.get_logger("kthena_py.controller")


def generation_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """A predicate that ignores updates which do not change ``metadata.generation`` (status-only writes)."""
    if old is None:
        return True
    return (old.get("metadata") or {}).get("generation") != (new.get("metadata") or {}).get("generation")


@once_per_event
def pod_state_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """A predicate for Pods that passes only changes a workload controller acts on.

    Phase, the Ready condition (status and transition time), restart counts, deletion, labels and
    annotations; it drops the rest (binding, IPs, image IDs, timestamps of other conditions). Answered once per
    event for all the watches that ask (:mod:`.perevent`).
    """
    if old is None:
        return True
    return _pod_key(old) != _pod_key(new)


@once_per_event
def became_ready_only(old: KubeObject, new: KubeObject) -> bool:
    """Whether the only change :func:`pod_state_changed` sees is the pod becoming Running and Ready.

    Restart counts, deletion, labels and annotations are the same; phase and the Ready condition moved
    from "not ready" to "Running with Ready=True". Answered once per event (:mod:`.perevent`).
    """
    if not pod_running_and_ready(new) or pod_running_and_ready(old):
        return False
    return _restart_total(old) == _restart_total(new) and _metadata_key(old) == _metadata_key(new)


def _restart_total(pod: KubeObject) -> int:
    status = pod.get("status") or {}
    statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return sum(int(cs.get("restartCount") or 0) for cs in statuses)


def _metadata_key(pod: KubeObject) -> tuple[object, ...]:
    md = pod.get("metadata") or {}
    return (md.get("deletionTimestamp"), md.get("labels"), md.get("annotations"))


def pod_running_and_ready(pod: KubeObject) -> bool:
    """Phase ``Running`` with the condition ``Ready=True``."""
    return running_and_ready(pod)


def _pod_key(pod: KubeObject) -> tuple[object, ...]:
    status = pod.get("status") or {}
    md = pod.get("metadata") or {}
    ready = next(
        (
            (c.get("status"), c.get("lastTransitionTime"))
            for c in status.get("conditions") or []
            if c.get("type") == POD_READY
        ),
        None,
    )
    restarts = tuple(
        cs.get("restartCount", 0)
        for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    )
    return (status.get("phase"), ready, restarts, md.get("deletionTimestamp"), md.get("labels"), md.get("annotations"))


def spec_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Passes changes of ``spec``, labels, annotations, owners or deletion; ignores ``status``.

    For kinds whose CRD has no status subresource (Volcano's PodGroup), where a status write also bumps
    ``metadata.generation``, so :func:`generation_changed` would pass every status update.
    """
    if old is None:
        return True
    o, n = old.get("metadata") or {}, new.get("metadata") or {}
    return old.get("spec") != new.get("spec") or any(
        o.get(k) != n.get(k) for k in ("labels", "annotations", "ownerReferences", "deletionTimestamp")
    )


def spec_or_metadata_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Like :func:`generation_changed`, but also passes label, annotation and deletion changes."""
    if old is None or generation_changed(old, new):
        return True
    o, n = old.get("metadata") or {}, new.get("metadata") or {}
    return any(o.get(k) != n.get(k) for k in ("labels", "annotations", "deletionTimestamp"))


@dataclass(frozen=True)
class _Watch:
    rt: ResourceType
    mapper: Mapper
    predicate: Predicate | None
    field_selector: str | None = None
    urgent: Predicate | None = None
    coalesce: float = 0.0


class _Queue(Protocol):
    def add(self, key: Request, *, urgent: bool = False) -> None: ...

    def add_after(self, key: Request, delay: float, *, retry: bool = True) -> None: ...


class _Handler:
    """Adapts informer events to queue adds for one watch."""

    def __init__(self, watch: _Watch, queue: _Queue, controller: str = "", owns: Owns | None = None) -> None:
        self._watch = watch
        self._queue = queue
        self._controller = controller
        self._owns = owns

    def _emit(self, old: KubeObject | None, obj: KubeObject) -> None:
        pred = self._watch.predicate
        if pred is not None and not pred(old, obj):
            return
        urgent = self._watch.urgent is not None and self._watch.urgent(old, obj)
        for req in self._watch.mapper(obj):
            if self._owns is not None and not self._owns(req.namespace):
                metrics.SHARD_FILTERED.labels(self._controller, "event").inc()
                continue
            if timeline.enabled():
                timeline.record(
                    "enqueue", controller=self._controller, key=str(req), kind=self._watch.rt.kind, name=name_of(obj)
                )
            if self._watch.coalesce > 0 and not urgent:
                self._queue.add_after(req, self._watch.coalesce, retry=False)
            else:
                self._queue.add(req, urgent=urgent)

    def on_add(self, obj: KubeObject) -> None:
        self._emit(None, obj)

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        self._emit(old, new)

    def on_delete(self, obj: KubeObject) -> None:
        self._emit(None, obj)


@once_per_object
def _self_request(obj: KubeObject) -> Iterable[Request]:
    return (Request(namespace_of(obj), name_of(obj)),)


@functools.cache
def owner_mapper(owner: ResourceType) -> Mapper:
    """Map an object to its controlling owner when that owner is of type ``owner``.

    One mapper per owner type, shared by every controller that owns through it, so an event's owner is read once for
    all of them (:mod:`.perevent`).
    """

    @once_per_object
    def mapper(obj: KubeObject) -> Iterable[Request]:
        ref = controller_ref(obj)
        if ref is None or ref.get("kind") != owner.kind:
            return ()
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if group != owner.group:
            return ()
        return (Request(namespace_of(obj), str(ref.get("name", ""))),)

    return mapper


class Controller:
    """Runs one reconciler over the keys its watches produce."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        cache: SharedCache,
        *,
        workers: int = 1,
        clock: Clock | None = None,
        queue: RateLimitingQueue[Request] | None = None,
    ) -> None:
        self.name = name
        self.reconciler = reconciler
        self.cache = cache
        self.workers = max(1, workers)
        self._clock = clock or RealClock()
        self.queue: RateLimitingQueue[Request] = queue or RateLimitingQueue(
            name=name, clock=self._clock, metrics=metrics.PrometheusQueueMetrics(name, name)
        )
        self._watches: list[_Watch] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._settling: set[asyncio.Task[None]] = set()
        self._started = False
        self._active = 0
        self._owns: Owns | None = None
        self._inflight: dict[Request, asyncio.Task[Settle | None]] = {}
        metrics.init_controller_metrics(name, self.workers)
        self._series = _Series(name)

    # -- declaration -------------------------------------------------------------------------

    def for_(self, rt: ResourceType, predicate: Predicate | None = None) -> Controller:
        """Reconcile objects of ``rt`` themselves."""
        return self.watches(rt, _self_request, predicate)

    def owns(
        self,
        rt: ResourceType,
        owner: ResourceType,
        predicate: Predicate | None = None,
        *,
        urgent: Predicate | None = None,
        coalesce: float = 0.0,
    ) -> Controller:
        """Reconcile the controlling owner (of type ``owner``) when an object of ``rt`` changes."""
        return self.watches(rt, owner_mapper(owner), predicate, urgent=urgent, coalesce=coalesce)

    def watches(
        self,
        rt: ResourceType,
        mapper: Mapper,
        predicate: Predicate | None = None,
        *,
        field_selector: str | None = None,
        urgent: Predicate | None = None,
        coalesce: float = 0.0,
    ) -> Controller:
        """Reconcile whatever ``mapper`` returns when an object of ``rt`` (matching ``field_selector``) changes.

        ``urgent`` (called like a predicate, after it passed) marks the change's requests as urgent: they go ahead of
        every request that is not (:class:`~kthena_py.runtime.workqueue.RateLimitingQueue`). ``coalesce`` queues
        the (non-urgent) requests that many seconds after the first change, for the changes meanwhile to share
        the reconcile (module docstring).
        """
        self.cache.informer(rt, field_selector=field_selector)  # listed/watched from the manager's start
        self._watches.append(_Watch(rt, mapper, predicate, field_selector, urgent, coalesce))
        return self

    def shard_by(self, owns: Owns) -> None:
        """Reconcile only the requests whose namespace ``owns`` accepts (module docstring); before :meth:`start`."""
        if self._started:
            raise RuntimeError("shard_by must be called before the controller starts")
        self._owns = owns

    def resync(self, namespaces: Owns) -> int:
        """Queue what every watch maps the cached objects to, for the namespaces ``namespaces`` accepts.

        Called when this replica starts owning those namespaces (their changes were dropped until then); returns
        how many requests were queued (the queue merges duplicates).
        """
        queued = 0
        for w in self._watches:
            for obj in self.cache.informer(w.rt, field_selector=w.field_selector).store.values():
                for req in w.mapper(obj):
                    if namespaces(req.namespace):
                        self.queue.add(req)
                        queued += 1
        return queued

    async def release(self, *, drain_timeout: float) -> None:
        """Let the reconciles in flight for namespaces no longer owned finish (up to ``drain_timeout``), then cancel.

        New ones do not start: a worker drops a request that is not owned when it takes it. Then a reconciler that
        keeps things per namespace (:class:`~kthena_py.runtime.reconcile.ForgetsNamespaces`) drops those of every
        namespace not owned, so a replica exports no metric series for another replica's objects.
        """
        owns = self._owns
        if owns is None:
            return
        leaving = [t for req, t in list(self._inflight.items()) if not owns(req.namespace)]
        if leaving:
            if drain_timeout > 0:
                await asyncio.wait(leaving, timeout=drain_timeout)
            for t in leaving:
                if not t.done():
                    t.cancel()
            await asyncio.gather(*leaving, return_exceptions=True)
        if isinstance(self.reconciler, ForgetsNamespaces):
            try:
                self.reconciler.forget_namespaces(lambda namespace: not owns(namespace))
            except Exception:
                log.exception("forgetting released namespaces failed", controller=self.name)

    def enqueue(self, request: Request) -> None:
        """Ask for a reconcile of ``request``."""
        self.queue.add(request)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Attach the watches (replaying the cache) and start the workers."""
        if self._started:
            return
        self._started = True
        for w in self._watches:
            self.cache.informer(w.rt, field_selector=w.field_selector).add_handler(
                _Handler(w, self.queue, self.name, self._owns)
            )
        self._tasks = [asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self.workers)]

    async def stop(self, *, drain: bool = True, timeout: float = 30.0) -> None:
        """Stop the workers.

        Args:
            drain: Let in-flight reconciles finish (up to ``timeout``); otherwise cancel them now.
            timeout: How long to wait for a drain before cancelling.
        """
        if drain:
            try:
                await asyncio.wait_for(self.queue.shutdown_with_drain(), timeout)
            except TimeoutError:
                log.warning("drain timed out, cancelling", controller=self.name)
        else:
            self.queue.shutdown()
        tasks = [*self._tasks, *self._settling]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []

    async def run_until_stopped(self) -> None:
        """Wait for the workers (they end on :meth:`stop`)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- workers -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            try:
                req = await self.queue.get()
            except ShutDown:
                return
            settle: Settle | None = None
            try:
                if self._owns is None:
                    settle = await self._process(req)
                elif not self._owns(req.namespace):
                    self.queue.forget(req)
                    metrics.SHARD_FILTERED.labels(self.name, "queued").inc()
                else:
                    settle = await self._process_releasable(req)
            finally:
                if settle is None:
                    self.queue.done(req)
                else:
                    self._hold(req, settle)

    async def _process_releasable(self, req: Request) -> Settle | None:
        """:meth:`_process` in a task of its own, which :meth:`release` may cancel without ending the worker."""
        task = asyncio.create_task(self._process(req), name=f"{self.name}-reconcile-{req}")
        self._inflight[req] = task
        try:
            await asyncio.wait([task])
        finally:
            self._inflight.pop(req, None)
            if not task.done():  # the worker itself is being cancelled (a stop without drain)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        return None if task.cancelled() else task.result()

    def _hold(self, req: Request, settle: Settle) -> None:
        """Keep ``req`` in progress until ``settle()`` ends, without a worker."""
        task = asyncio.create_task(self._settle(req, settle), name=f"{self.name}-settle-{req}")
        self._settling.add(task)
        task.add_done_callback(self._settled)
        metrics.SETTLING_KEYS.labels(self.name).set(len(self._settling))

    def _settled(self, task: asyncio.Task[None]) -> None:
        self._settling.discard(task)
        metrics.SETTLING_KEYS.labels(self.name).set(len(self._settling))

    async def _settle(self, req: Request, settle: Settle) -> None:
        try:
            await settle()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("settle wait failed", controller=self.name, namespace=req.namespace, name=req.name)
        finally:
            self.queue.done(req)

    async def _process(self, req: Request) -> Settle | None:
        """Reconcile ``req``; return the settle wait of a successful result, if it has one."""
        # The log context (merged into every line logged meanwhile, this module's included) names the reconcile.
        structlog.contextvars.bind_contextvars(
            controller=self.name, namespace=req.namespace, name=req.name, reconcile_id=_reconcile_id()
        )
        series = self._series
        self._active += 1
        series.active.set(self._active)
        started = self._clock.now()
        outcome = "panic"
        if timeline.enabled():
            timeline.record("start", controller=self.name, key=str(req))
        try:
            result = await self.reconciler.reconcile(req)
            outcome = "success"
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except TerminalError as exc:
            outcome = "terminal"
            self.queue.forget(req)
            series.failed(terminal=True)
            log.error("reconcile failed terminally; not retrying", error=str(exc))
        except ApiError as exc:
            outcome = "error"
            self.queue.add_rate_limited(req)
            series.failed()
            log.warning(
                "reconcile failed; retrying with backoff",
                error=str(exc),
                retries=self.queue.num_requeues(req),
            )
        except Exception:
            self.queue.add_rate_limited(req)
            series.failed(panic=True)
            log.exception("reconcile raised unexpectedly; retrying with backoff")
        else:
            self._record_success(req, result)
            return result.settle if result is not None else None
        finally:
            if timeline.enabled():
                timeline.record("end", controller=self.name, key=str(req), outcome=outcome)
            self._active -= 1
            series.active.set(self._active)
            series.reconcile_time.observe(max(0.0, self._clock.now() - started))
            structlog.contextvars.clear_contextvars()
        return None

    def _record_success(self, req: Request, result: Result | None) -> None:
        self.queue.forget(req)
        # The result replaces the look an earlier reconcile of this key asked for (the queue's module docstring).
        delay = result.requeue_after if result is not None else None
        self.queue.requeue(req, delay)
        if delay is not None and delay > 0:
            self._series.requeue_after.inc()
        else:
            self._series.success.inc()


def _reconcile_id() -> str:
    """Twelve hex digits naming one reconcile in the logs (random, as a UUID's prefix was, without a system call)."""
    return f"{random.getrandbits(48):012x}"


class _Series:
    """One controller's metric children, looked up once instead of by label on every reconcile."""

    def __init__(self, controller: str) -> None:
        self.active = metrics.ACTIVE_WORKERS.labels(controller)
        self.reconcile_time = metrics.RECONCILE_TIME.labels(controller)
        self.success = metrics.RECONCILE_TOTAL.labels(controller, metrics.RESULT_SUCCESS)
        self.requeue_after = metrics.RECONCILE_TOTAL.labels(controller, metrics.RESULT_REQUEUE_AFTER)
        self._error = metrics.RECONCILE_TOTAL.labels(controller, metrics.RESULT_ERROR)
        self._errors = metrics.RECONCILE_ERRORS.labels(controller)
        self._terminal = metrics.TERMINAL_RECONCILE_ERRORS.labels(controller)
        self._panics = metrics.RECONCILE_PANICS.labels(controller)

    def failed(self, *, terminal: bool = False, panic: bool = False) -> None:
        """Count a failed reconcile (and, when said, a terminal one or a panic)."""
        self._error.inc()
        self._errors.inc()
        if terminal:
            self._terminal.inc()
        if panic:
            self._panics.inc()
