"""List-then-watch informers that keep a :class:`~kthena_py.runtime.store.Store` in step with the cluster.

Guarantees:

* **Complete**: the store is filled by a full (paginated) list, then kept current by a watch from
  that list's resourceVersion, with bookmarks so that a quiet watch still advances.
* **No missed deletes**: when the watch cannot resume (410 Gone after compaction, or too-old
  resourceVersion) the informer relists and delivers the difference between the old and the new
  content as add/update/delete events; a delete that happened in the gap is reported with the
  last state the informer had seen.
* **Self-healing**: a broken or refused connection is retried with capped exponential backoff
  (0.5 s .. 30 s, each delay jittered to 50-150 % so that the informers of a manager, and the
  managers of a cluster, do not all come back at the same instant after a partition); the informer
  never gives up while it runs.
* **Dead watches are noticed**: each watch asks the server to end it after 30-37 s (jittered, with
  bookmarks), and the client treats a stream silent for longer than that plus a margin as dead, so a
  watch on a silently stalled connection is abandoned and retried within 45 s (see
  :mod:`kthena_py.kube.client`).
* **Disruptions are visible**: :attr:`Informer.last_disruption` is the time (on the informer's clock)
  of its last failed list or watch or forced relist after the first sync, and :attr:`Informer.connected`
  tells whether the stream is currently healthy; callers about to act on a possibly stale view (the
  shared cache's :meth:`~kthena_py.runtime.cache.SharedCache.recently_disrupted`) can confirm with a
  live read first.
* **Ordered delivery**: handlers are plain synchronous callbacks, called in event order on the
  event loop. They must be quick (typically: put a key into a work queue) and must not raise; a
  raising handler is logged and does not stop the informer.
* An optional ``transform`` is applied to every object before it is stored (by default it drops
  ``metadata.managedFields``), to keep memory proportional to what controllers read. With a transform, the watch
  is asked to leave ``managedFields`` out (``managed_fields=False``: the client cuts them out of each event
  before decoding it, :mod:`kthena_py.kube.managedfields`), since every transform of this project drops them;
  ``managed_fields=True`` keeps them for a transform that reads them. The initial list is decoded whole.
* **Shard selection** (KEP-5866): an informer given a ``shard_selector`` lists and watches with it, so an API server
  with ``ShardedListAndWatch`` sends only the objects whose hashed field falls in its ranges.
  :meth:`Informer.select_shards` changes the selection while the informer runs: the watch ends and the informer
  relists with the new selector, delivering the difference (objects that left the selection as deletes, objects
  that entered as adds); ``""`` selects nothing (the store empties and nothing is listed until the selection
  changes); ``None`` selects every object (no ``shardSelector`` is sent). Only an informer built with a selection,
  or ``selectable=True``, can be reselected: its watch runs in a task a new selection ends at once; any other
  watches in its own task, as before. (Handlers running in the watch's task once made the activator miss a wake-up
  in about one chart-test run of five. The cause was the activator's: a wake-up refused three times by writers of
  the new ModelServing was never tried again; with that fixed, 12 of 12 runs with every informer watching in a
  task passed, against 9 of 12 without the fix. The two paths can now be made one.)
  :meth:`Informer.wait_for_selection`
  returns once the store holds the current selection's list: a replica must not reconcile a namespace it just
  took before its objects are in the cache (it would take them for missing and create them again). An optional
  type that is not served answers a new selection at once (it lists again without waiting out its retry period),
  so one missing CRD never holds a replica's new namespaces up.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol

import structlog

from kthena_py.kube import ApiError, Gone, NotFound, ResourceType, WatchApi
from kthena_py.kube.objects import KubeObject, resource_version_of, strip_managed_fields

from . import timeline
from .clock import Clock, RealClock
from .store import IndexFunc, ReplaceDiff, Store

Transform = Callable[[KubeObject], KubeObject]

log = structlog.get_logger("kthena_py.informer")

WATCH_TIMEOUT_SECONDS = 30
"""Server-side ``timeoutSeconds`` of a watch (each watch adds up to 25 % jitter)."""
BACKOFF_MIN = 0.5
BACKOFF_MAX = 30.0


class EventHandler(Protocol):
    """Receives the changes an informer observes."""

    def on_add(self, obj: KubeObject) -> None:
        """An object appeared (also called for every object of the initial list)."""

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        """An object changed."""

    def on_delete(self, obj: KubeObject) -> None:
        """An object was deleted (``obj`` is its last known state)."""


class Informer:
    """Watches one resource type (optionally one namespace / label selection)."""

    def __init__(
        self,
        client: WatchApi,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
        clock: Clock | None = None,
        field_selector: str | None = None,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        page_size: int = 500,
        allow_missing: bool = False,
        rng: random.Random | None = None,
        shard_selector: str | None = None,
        selectable: bool = False,
        managed_fields: bool | None = None,
    ) -> None:
        self.rt = rt
        self._watch_managed_fields = transform is None if managed_fields is None else managed_fields
        self.namespace = namespace
        self.store = Store()
        self._client = client
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._allow_missing = allow_missing
        self._transform = transform
        self._clock = clock or RealClock()
        self._watch_timeout = watch_timeout_seconds
        self._page_size = page_size
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self._resource_version = ""
        self._rng = rng or random.Random()
        self._shard_selector = shard_selector
        self._selectable = selectable or shard_selector is not None
        self._reselect = asyncio.Event()
        self._listed_selection: tuple[str | None] | None = None
        """The shard selector of the store's last complete list (or empty selection); None before the first."""
        self._selection_listed = asyncio.Event()
        self.relists = 0
        """How many times the informer listed (1 after the first sync); visible for tests and metrics."""
        self.missing_retry_seconds = 15.0
        self.failures = 0
        """How many list or watch calls failed (transport or API errors, 410 Gone included)."""
        self.last_disruption: float | None = None
        """When (informer clock) a list or watch last failed, or the store was relisted after the first sync."""
        self.connected = False
        """Whether the informer is listed and watching (False from a failure until a list or watch succeeds)."""

    @property
    def has_synced(self) -> bool:
        """Whether the first list has been delivered to the store and the handlers."""
        return self._synced.is_set()

    @property
    def label_selector(self) -> str | None:
        """The label selector the informer lists and watches with."""
        return self._label_selector

    @property
    def field_selector(self) -> str | None:
        """The field selector the informer lists and watches with."""
        return self._field_selector

    @property
    def shard_selector(self) -> str | None:
        """The ``shardSelector`` the informer lists and watches with (None: every object; "": none)."""
        return self._shard_selector

    def select_shards(self, selector: str | None) -> None:
        """Change the shard selection; the running informer relists with it (see the module docstring)."""
        if not self._selectable:
            raise RuntimeError(f"{self.rt.plural}: informer built without a shard selection (selectable=False)")
        if selector == self._shard_selector:
            return
        self._shard_selector = selector
        self._reselect.set()

    async def wait_for_selection(self, timeout: float | None = None) -> bool:
        """Wait until the store holds the list of the current shard selection; ``False`` on timeout."""
        try:
            async with asyncio.timeout(timeout):
                while self._listed_selection != (self._shard_selector,):
                    self._selection_listed.clear()
                    await self._selection_listed.wait()
        except TimeoutError:
            return False
        return True

    def _listed(self, selection: str | None) -> None:
        self._listed_selection = (selection,)
        self._selection_listed.set()

    @property
    def resource_version(self) -> str:
        """The resourceVersion the informer will resume from."""
        return self._resource_version

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Add a named index to the store."""
        self.store.add_indexer(name, fn)

    def add_handler(self, handler: EventHandler) -> None:
        """Register a handler; if the informer already synced, it first gets every stored object."""
        self._handlers.append(handler)
        if self.has_synced:
            for obj in self.store.values():
                self._call(handler.on_add, obj)

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until the first list was delivered; return ``False`` on timeout."""
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = BACKOFF_MIN
        failures = 0
        need_list = True
        while True:
            try:
                if self._reselect.is_set():
                    self._reselect.clear()
                    need_list = True
                if self._shard_selector == "":
                    self._select_nothing()
                    await self._reselect.wait()
                    continue
                if need_list:
                    await self._relist()
                    need_list = False
                if not self._selectable:
                    await self._watch()
                elif not await self._watch_until_reselected():
                    continue  # the selection changed: relist with it
                backoff = BACKOFF_MIN
                failures = 0
            except asyncio.CancelledError:
                self.connected = False
                raise
            except Gone:
                self._disrupted()
                log.info("watch expired, relisting", resource=self.rt.plural, resource_version=self._resource_version)
                need_list = True
            except NotFound as exc:
                if not self._allow_missing:
                    self._disrupted()
                    log.warning("list/watch failed, retrying", resource=self.rt.plural, error=str(exc))
                    await self._clock.sleep(self._jittered(backoff))
                    backoff = min(backoff * 2, BACKOFF_MAX)
                    need_list = need_list or not self._resource_version
                    continue
                # An optional resource type (e.g. a CRD that is not installed): behave as an empty,
                # synced collection and look again later.
                self._deliver(self.store.replace([]))
                self._synced.set()
                self._listed(self._shard_selector)
                self.connected = True  # a healthy answer: the type is not served
                self._resource_version = ""
                need_list = True
                await self._sleep_unless_reselected(self.missing_retry_seconds)
            except (ApiError, ValueError) as exc:
                # Keep the resourceVersion: a transient failure resumes the watch where it stopped;
                # if that version has been compacted meanwhile, the server answers 410 and we relist.
                # Some servers answer a watch from exactly the compacted revision with a 500 instead,
                # so repeated failures to resume also fall back to a relist.
                self._disrupted()
                failures += 1
                delay = self._jittered(backoff)
                log.warning("list/watch failed, retrying", resource=self.rt.plural, error=str(exc), backoff=delay)
                await self._clock.sleep(delay)
                backoff = min(backoff * 2, BACKOFF_MAX)
                if not self._resource_version or failures >= 3:
                    need_list = True
                    failures = 0

    def disrupted_within(self, seconds: float) -> bool:
        """Whether the view may lag the cluster: not connected now, or disrupted in the last ``seconds``."""
        if not self.connected:
            return True
        return self.last_disruption is not None and self._clock.now() - self.last_disruption < seconds

    def _opened(self) -> None:
        self.connected = True

    def _jittered(self, delay: float) -> float:
        return delay * self._rng.uniform(0.5, 1.5)

    def _disrupted(self) -> None:
        self.failures += 1
        self.connected = False
        self.last_disruption = self._clock.now()

    async def _sleep_unless_reselected(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the shard selection changes (a missing type then lists again at once)."""
        if not self._selectable:
            await self._clock.sleep(seconds)
            return
        await self._until_reselected(self._clock.sleep(seconds))

    async def _until_reselected(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` until it ends or the shard selection changes (then it is cancelled); return its task."""
        working = asyncio.create_task(work)
        reselected = asyncio.create_task(self._reselect.wait())
        try:
            await asyncio.wait((working, reselected), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (working, reselected):
                task.cancel()
            await asyncio.gather(working, reselected, return_exceptions=True)
        return working

    def _select_nothing(self) -> None:
        """The empty selection: forget every object (handlers hear deletes) and count as synced and connected."""
        self._resource_version = ""
        self.connected = True
        self.sync([])
        self._listed("")

    async def _watch_until_reselected(self) -> bool:
        """Watch until the server ends the watch (True) or the shard selection changes (False)."""
        watching = await self._until_reselected(self._watch())
        if watching.done() and not watching.cancelled():
            watching.result()  # the watch's own end or failure, as the plain watch gives it
            return True
        return False

    async def _relist(self) -> None:
        selection = self._shard_selector
        page = await self._client.list_all(
            self.rt,
            self.namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            page_size=self._page_size,
            shard_selector=selection,
        )
        if self.relists:
            self.last_disruption = self._clock.now()
        self.relists += 1
        self.connected = True
        self.sync(page.items, page.resource_version)
        self._listed(selection)

    def sync(self, objects: Iterable[KubeObject], resource_version: str = "") -> None:
        """Take ``objects`` as the complete list, as a relist does.

        The store becomes them (each prepared as the informer stores objects), the handlers hear the difference,
        and the informer counts as synced.

        This is the path every list takes; a test's in-memory API server calls it to play the list.
        """
        diff = self.store.replace([self._prepare(o) for o in objects])
        if resource_version:
            self._resource_version = resource_version
        self._deliver(diff)
        self._synced.set()

    def observe(self, type_: str, obj: KubeObject) -> None:
        """Take one watch event as the watch does: into the store, then to the handlers.

        ``type_`` is ``ADDED``, ``MODIFIED`` or ``DELETED``; a ``BOOKMARK`` only advances the resourceVersion.

        This is the path every watch event takes; a test's in-memory API server calls it to play the watch.
        """
        if type_ == "BOOKMARK":
            rv = resource_version_of(obj)
            if rv:
                self._resource_version = rv
            return
        obj = self._prepare(obj)
        rv = resource_version_of(obj)
        if timeline.enabled():
            md = obj.get("metadata") or {}
            timeline.record(
                "watch", kind=self.rt.kind, namespace=md.get("namespace"), name=md.get("name"), type=type_, rv=rv
            )
        if type_ in ("ADDED", "MODIFIED"):
            old = self.store.upsert(obj)
            if old is None:
                self._emit_add(obj)
            else:
                self._emit_update(old, obj)
        elif type_ == "DELETED":
            self.store.delete(obj)
            self._emit_delete(obj)
        if rv:
            self._resource_version = rv

    def _deliver(self, diff: ReplaceDiff) -> None:
        for obj in diff.deleted:
            self._emit_delete(obj)
        for obj in diff.added:
            self._emit_add(obj)
        for old, new in diff.updated:
            self._emit_update(old, new)

    async def _watch(self) -> None:
        timeout = int(self._watch_timeout * self._rng.uniform(1.0, 1.25))
        async for event in self._client.watch(
            self.rt,
            self.namespace,
            resource_version=self._resource_version,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            timeout_seconds=timeout,
            on_open=self._opened,
            shard_selector=self._shard_selector,
            managed_fields=self._watch_managed_fields,
        ):
            self.observe(event.type, event.object)

    def _prepare(self, obj: KubeObject) -> KubeObject:
        obj.setdefault("apiVersion", self.rt.api_version)
        obj.setdefault("kind", self.rt.kind)
        return self._transform(obj) if self._transform else obj

    def _emit_add(self, obj: KubeObject) -> None:
        for h in self._handlers:
            self._call(h.on_add, obj)

    def _emit_update(self, old: KubeObject, new: KubeObject) -> None:
        for h in self._handlers:
            self._call2(h.on_update, old, new)

    def _emit_delete(self, obj: KubeObject) -> None:
        for h in self._handlers:
            self._call(h.on_delete, obj)

    def _call(self, fn: Callable[[KubeObject], None], obj: KubeObject) -> None:
        try:
            fn(obj)
        except Exception:
            log.exception("event handler failed", resource=self.rt.plural)

    def _call2(self, fn: Callable[[KubeObject, KubeObject], None], old: KubeObject, new: KubeObject) -> None:
        try:
            fn(old, new)
        except Exception:
            log.exception("event handler failed", resource=self.rt.plural)
