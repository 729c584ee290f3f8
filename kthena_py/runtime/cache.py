"""The shared cache: one informer per resource type for the whole manager.

Guarantees:

* Every controller asking for a resource type gets the same :class:`~kthena_py.runtime.informer.Informer`,
  so each type is listed and watched once however many controllers use it.
* Namespaced types are watched in the manager's namespace scope (all namespaces by default);
  cluster-scoped types always cluster-wide.
* A type can be narrowed to the objects matching a label selector (:meth:`SharedCache.select`), so a
  manager holds and decodes only the pods (say) it manages, not every pod of the cluster. The
  selector applies to every informer of that type; it must be set before the first one exists.
* Each store has the standard indices ``namespace`` and ``owner-uid``; label indices are added
  on demand with :meth:`SharedCache.index_label`.
* Objects are stored without what no reconciler reads (``managedFields``, kubectl's last-applied
  annotation: :func:`~kthena_py.runtime.slim.slim`), unless another ``transform`` is given.
* Reads return the cached objects themselves: callers must treat them as read-only and copy
  (:func:`kthena_py.kube.objects.deep_copy`) before changing anything.
* :meth:`SharedCache.wait_for` waits for a condition on named objects without polling: it is looked at again
  only when an informer delivers a change of one of them (and once more at its deadline), so hundreds of
  reconciles waiting to read their own writes cost nothing between the watch events that concern them.
* Reads see this manager's own writes at once (:meth:`SharedCache.record_write`, the mutation-cache pattern of
  client-go): an object a writer got back from the API server is returned by :meth:`SharedCache.get` in place of
  the stored one while the store holds the same object (same UID) at an older resourceVersion, and forgotten as
  soon as the informer delivers that version or a newer one, the object goes, or :data:`OWN_WRITE_TTL` passes.
  The informer stays the only authority: nothing is ever written into a store, handlers see exactly what the
  watch delivered, and a read never returns anything older than the store. Only :meth:`SharedCache.get` (no
  field selector) consults it; lists and indices show the store.
* A cache built with ``sharded=True`` narrows every *namespaced* type to its ranges with
  :meth:`SharedCache.select_shards` (a ``shardSelector``; later informers start with it); cluster-scoped types
  stay whole, and so do the types :meth:`SharedCache.keep_whole` names (read across namespaces, e.g. the
  PodGroups that wait in one Volcano queue).
  :meth:`SharedCache.wait_for_shard_selection` returns once every namespaced store holds the new selection.
* :meth:`SharedCache.recently_disrupted` says when the stores may disagree with each other and with
  the cluster (an informer is disconnected, or failed or relisted within a window): after a partition
  the informers catch up one by one, so a child store may already show a deletion its owner's store
  has not seen yet. Writers that create children confirm the owner with a live read then.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kthena_py.kube import ResourceType, WatchApi
from kthena_py.kube.objects import (
    KubeObject,
    label_of,
    meta,
    namespace_of,
    object_key,
    owner_uids,
    resource_version_of,
    uid_of,
)

from .clock import Clock
from .informer import Informer, Transform
from .slim import slim
from .store import IndexFunc

NAMESPACE_INDEX = "namespace"
OWN_WRITE_TTL = 30.0
"""Seconds an own write is returned by reads while the informer has not delivered it (a safety net only: the
informer normally delivers it within a second or two)."""
DISRUPTION_WINDOW = 60.0
"""Seconds after an informer's failure or relist during which the cache counts as possibly inconsistent."""
OWNER_INDEX = "owner-uid"


@dataclass(frozen=True)
class _Key:
    rt: ResourceType
    field_selector: str | None


ObjectName = tuple[ResourceType, str, str | None]
"""A cached object named by (type, name, namespace); the namespace is ``None`` for cluster-scoped kinds."""
_Watched = tuple[ResourceType, str]
"""(type, store key): what a waiter of :meth:`SharedCache.wait_for` is woken by."""


class _Waiters:
    """The waiters of :meth:`SharedCache.wait_for`, filed by the objects they watch."""

    def __init__(self) -> None:
        self._by_object: dict[_Watched, set[asyncio.Event]] = {}

    def add(self, watched: Iterable[_Watched], event: asyncio.Event) -> None:
        for key in watched:
            self._by_object.setdefault(key, set()).add(event)

    def remove(self, watched: Iterable[_Watched], event: asyncio.Event) -> None:
        for key in watched:
            events = self._by_object.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._by_object[key]

    def wake(self, key: _Watched) -> None:
        for event in self._by_object.get(key, ()):
            event.set()


def _revision(obj: KubeObject) -> int:
    """The resourceVersion as a number (etcd's revision), -1 when it is not one."""
    try:
        return int(resource_version_of(obj))
    except ValueError:
        return -1


class _OwnWrites:
    """Objects this manager wrote, by (type, store key), with when each stops counting (see the module docstring)."""

    def __init__(self) -> None:
        self._by_object: dict[_Watched, tuple[KubeObject, float]] = {}

    def put(self, key: _Watched, obj: KubeObject, until: float) -> None:
        self._by_object[key] = (obj, until)

    def read(self, key: _Watched, stored: KubeObject | None, now: float) -> KubeObject | None:
        """The own write to return instead of ``stored`` (``None``: return the store's), forgetting a stale one."""
        entry = self._by_object.get(key)
        if entry is None:
            return None
        written, until = entry
        if now < until and stored is not None and _newer(written, stored):
            return written
        del self._by_object[key]
        return None

    def delivered(self, key: _Watched, obj: KubeObject | None) -> None:
        """The informer delivered ``obj`` (``None``: a deletion): forget an own write it has caught up with."""
        entry = self._by_object.get(key)
        if entry is not None and (obj is None or not _newer(entry[0], obj)):
            del self._by_object[key]

    def __len__(self) -> int:
        return len(self._by_object)


def _newer(written: KubeObject, stored: KubeObject) -> bool:
    """Whether ``written`` is the same object as ``stored`` at a later resourceVersion."""
    return uid_of(written) == uid_of(stored) and _revision(written) > _revision(stored) >= 0


class _WakeWaiters:
    """An informer handler that wakes the waiters of every object it delivers (and retires own writes it shows)."""

    def __init__(self, waiters: _Waiters, rt: ResourceType, own: _OwnWrites | None = None) -> None:
        self._waiters = waiters
        self._rt = rt
        self._own = own

    def _delivered(self, obj: KubeObject, gone: bool = False) -> None:
        key = (self._rt, object_key(obj))
        if self._own is not None and len(self._own):
            self._own.delivered(key, None if gone else obj)
        self._waiters.wake(key)

    def on_add(self, obj: KubeObject) -> None:
        self._delivered(obj)

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        self._delivered(new)

    def on_delete(self, obj: KubeObject) -> None:
        self._delivered(obj, gone=True)


def label_index_name(label: str) -> str:
    """The index name under which objects are filed by the value of ``label``."""
    return f"label:{label}"


class CacheReader(Protocol):
    """The reads of :class:`SharedCache` that observation code makes (what a cache-reading function may rely on)."""

    @property
    def namespace(self) -> str | None:
        """The namespace scope for namespaced types (``None`` = all)."""
        ...

    def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, field_selector: str | None = None
    ) -> KubeObject | None:
        """Return the cached object, or ``None``."""
        ...

    def list(
        self, rt: ResourceType, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> builtins.list[KubeObject]:
        """Return cached objects, optionally in one namespace and matching all ``labels``."""
        ...

    def by_label(
        self, rt: ResourceType, label: str, value: str, namespace: str | None = None
    ) -> builtins.list[KubeObject]:
        """Return objects whose ``label`` equals ``value``."""
        ...

    def owned_by(self, rt: ResourceType, owner_uid: str) -> builtins.list[KubeObject]:
        """Return cached objects of ``rt`` that list ``owner_uid`` among their owners."""
        ...

    def by_index(self, rt: ResourceType, index: str, value: str) -> builtins.list[KubeObject]:
        """Return the objects of ``rt`` filed under ``value`` in the index ``index`` (see :meth:`SharedCache.index`)."""
        ...

    def recently_disrupted(self, window: float = DISRUPTION_WINDOW) -> bool:
        """Whether the stores may disagree with each other and with the cluster."""
        ...


class SharedCache:
    """Informers and indexed stores shared by all controllers of one manager."""

    def __init__(
        self,
        client: WatchApi,
        *,
        namespace: str | None = None,
        transform: Transform | None = slim,
        clock: Clock | None = None,
        sharded: bool = False,
    ) -> None:
        self._client = client
        self._sharded = sharded
        self._namespace = namespace
        self._transform = transform
        self._clock = clock
        self._informers: dict[_Key, Informer] = {}
        self._plain: dict[ResourceType, Informer] = {}
        """The informers without a field selector by type: the lookup every cache read makes, without a key object."""
        self._tasks: dict[_Key, asyncio.Task[None]] = {}
        self._started = False
        self._label_selectors: dict[ResourceType, str] = {}
        self._shard_selector: str | None = None
        self._whole: set[ResourceType] = set()
        self._waiters = _Waiters()
        self._own = _OwnWrites()

    @property
    def namespace(self) -> str | None:
        """The namespace scope for namespaced types (``None`` = all)."""
        return self._namespace

    def select(self, rt: ResourceType, label_selector: str) -> None:
        """Watch only objects of ``rt`` matching ``label_selector`` (e.g. ``app.kubernetes.io/name``).

        Raises:
            RuntimeError: An informer of ``rt`` already exists (its objects were listed unfiltered), or
                another selector was set for ``rt``.
        """
        if self._label_selectors.get(rt, label_selector) != label_selector:
            raise RuntimeError(f"{rt.plural}: already narrowed to {self._label_selectors[rt]!r}")
        if any(key.rt == rt for key in self._informers) and rt not in self._label_selectors:
            raise RuntimeError(f"{rt.plural}: select() must come before the first informer")
        self._label_selectors[rt] = label_selector

    def informer(self, rt: ResourceType, *, field_selector: str | None = None, optional: bool = False) -> Informer:
        """Return the informer for ``rt``, creating (and, once started, running) it on first use.

        Args:
            rt: The resource type.
            field_selector: Watch only matching objects (a separate informer per selector).
            optional: The type may not be served (a CRD that is not installed): the informer then
                counts as synced and empty, and keeps looking for it.
        """
        if field_selector is None:
            found = self._plain.get(rt)
            if found is not None:
                return found
        key = _Key(rt, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(
                self._client,
                rt,
                namespace=self._namespace if rt.namespaced else None,
                label_selector=self._label_selectors.get(rt),
                field_selector=field_selector,
                transform=self._transform,
                clock=self._clock,
                allow_missing=optional,
                shard_selector=self._shard_selector if self._selects(rt) else None,
                selectable=self._sharded and self._selects(rt),
            )
            inf.add_indexer(NAMESPACE_INDEX, lambda o: [namespace_of(o)])
            inf.add_indexer(OWNER_INDEX, owner_uids)
            inf.add_handler(_WakeWaiters(self._waiters, rt, self._own if field_selector is None else None))
            self._informers[key] = inf
            if field_selector is None:
                self._plain[rt] = inf
            if self._started:
                self._launch(key, inf)
        return inf

    def _selects(self, rt: ResourceType) -> bool:
        return rt.namespaced and rt not in self._whole

    def keep_whole(self, rt: ResourceType) -> None:
        """List and watch every object of ``rt`` even when the cache selects shards (its readers cross namespaces).

        Raises:
            RuntimeError: An informer of ``rt`` already lists a selection.
        """
        if any(key.rt == rt and inf.shard_selector is not None for key, inf in self._informers.items()):
            raise RuntimeError(f"{rt.plural}: keep_whole() must come before a shard selection")
        self._whole.add(rt)

    def select_shards(self, selector: str | None) -> None:
        """List and watch every namespaced type with ``selector`` (a ``shardSelector``; "" selects nothing).

        Raises:
            RuntimeError: The cache was not built with ``sharded=True``.
        """
        if not self._sharded:
            raise RuntimeError("select_shards needs a cache built with sharded=True")
        self._shard_selector = selector
        for key, inf in self._informers.items():
            if self._selects(key.rt):
                inf.select_shards(selector)

    async def wait_for_shard_selection(self, timeout: float | None = None) -> bool:
        """Wait until every namespaced store holds its current selection's list; ``False`` on timeout."""
        namespaced = [i for key, i in self._informers.items() if self._selects(key.rt)]
        return all(await asyncio.gather(*(i.wait_for_selection(timeout) for i in namespaced)))

    def informers(self) -> builtins.list[Informer]:
        """Every informer created so far, in creation order."""
        return builtins.list(self._informers.values())

    def index_label(self, rt: ResourceType, label: str) -> None:
        """File objects of ``rt`` by the value of ``label`` (objects without it are not filed)."""

        def by_label(obj: KubeObject) -> list[str]:
            value = label_of(obj, label)
            return [] if value is None else [value]

        self.informer(rt).add_indexer(label_index_name(label), by_label)

    async def start(self) -> None:
        """Start every informer registered so far (later ones start when registered)."""
        self._started = True
        for key, inf in self._informers.items():
            if key not in self._tasks:
                self._launch(key, inf)

    def _launch(self, key: _Key, inf: Informer) -> None:
        self._tasks[key] = asyncio.create_task(inf.run(), name=f"informer:{key.rt.plural}")

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer has synced; ``False`` on timeout."""
        results = await asyncio.gather(*(i.wait_for_sync(timeout) for i in self._informers.values()))
        return all(results)

    async def wait_for(self, objects: Iterable[ObjectName], condition: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``condition`` (a read of this cache about ``objects``) holds; ``False`` after ``timeout``.

        ``condition`` is evaluated now, after every change an informer delivers for one of ``objects``, and at
        the deadline; never by polling.
        """
        if condition():
            return True
        watched = [(rt, f"{ns}/{name}" if ns and rt.namespaced else name) for rt, name, ns in objects]
        changed = asyncio.Event()
        self._waiters.add(watched, changed)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                try:
                    async with asyncio.timeout(max(0.0, deadline - loop.time())):
                        await changed.wait()
                except TimeoutError:
                    return condition()
                changed.clear()
                if condition():
                    return True
        finally:
            self._waiters.remove(watched, changed)

    def recently_disrupted(self, window: float = DISRUPTION_WINDOW) -> bool:
        """Whether any started informer is disconnected, or failed or relisted within ``window`` seconds."""
        return any(self._informers[key].disrupted_within(window) for key in self._tasks)

    @property
    def synced(self) -> bool:
        """Whether every registered informer has synced."""
        return all(i.has_synced for i in self._informers.values())

    async def stop(self) -> None:
        """Cancel every informer task and wait until all have ended.

        A cancellation swallowed by library code (a known hazard of ``asyncio.wait_for`` on Python
        3.11) is repeated every second until the task ends, so shutdown never hangs on one.
        """
        pending = set(self._tasks.values())
        while pending:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=1.0)
        self._tasks.clear()
        self._started = False

    # -- reads -------------------------------------------------------------------------------

    def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, field_selector: str | None = None
    ) -> KubeObject | None:
        """Return the cached object, or ``None`` (from the informer with ``field_selector``, if given).

        Without ``field_selector``, an own write the store has not caught up with yet is returned instead
        (:meth:`record_write`).
        """
        key = f"{namespace}/{name}" if namespace and rt.namespaced else name
        stored = self.informer(rt, field_selector=field_selector).store.get(key)
        if field_selector is None and len(self._own):
            written = self._own.read((rt, key), stored, self._now())
            if written is not None:
                return written
        return stored

    def record_write(self, rt: ResourceType, obj: KubeObject) -> None:
        """Let reads return ``obj``, which the API server just answered a write of this manager with.

        Only while the store holds the same object at an older resourceVersion (see the module docstring); a
        write the store already shows, or of an object it does not hold, is not recorded. Waiters of
        :meth:`wait_for` on the object look at their condition again.
        """
        key = object_key(obj)
        stored = self.informer(rt).store.get(key)
        if stored is None or not _newer(obj, stored):
            return
        self._own.put((rt, key), self._transform(obj) if self._transform else obj, self._now() + OWN_WRITE_TTL)
        self._waiters.wake((rt, key))

    def _now(self) -> float:
        return self._clock.now() if self._clock is not None else time.monotonic()

    def list(
        self, rt: ResourceType, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> list[KubeObject]:
        """Return cached objects, optionally in one namespace and matching all ``labels``."""
        store = self.informer(rt).store
        objs = store.by_index(NAMESPACE_INDEX, namespace) if namespace else store.sorted_values()  # in key order
        if labels:
            objs = [o for o in objs if _matches(o, labels)]
        return objs

    def by_label(
        self, rt: ResourceType, label: str, value: str, namespace: str | None = None
    ) -> builtins.list[KubeObject]:
        """Return objects whose ``label`` equals ``value`` (uses the label index; see :meth:`index_label`)."""
        self.index_label(rt, label)
        objs = self.informer(rt).store.by_index(label_index_name(label), value)
        if namespace:
            objs = [o for o in objs if namespace_of(o) == namespace]
        return objs

    def owned_by(self, rt: ResourceType, owner_uid: str) -> builtins.list[KubeObject]:
        """Return cached objects of ``rt`` that list ``owner_uid`` among their owners."""
        return self.informer(rt).store.by_index(OWNER_INDEX, owner_uid)

    def index(self, rt: ResourceType, index: str, fn: IndexFunc) -> None:
        """File objects of ``rt`` under the values ``fn`` returns for them, as ``index`` (idempotent per name).

        ``fn`` must depend on the object alone: it is called again on every change of the object.
        """
        self.informer(rt).add_indexer(index, fn)

    def by_index(self, rt: ResourceType, index: str, value: str) -> builtins.list[KubeObject]:
        """Return the objects of ``rt`` filed under ``value`` in ``index``, in key order.

        Raises:
            KeyError: No index of that name was registered (:meth:`index`).
        """
        return self.informer(rt).store.by_index(index, value)


def _matches(obj: KubeObject, labels: Mapping[str, str]) -> bool:
    have = meta(obj).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())
