"""FakeKube: an in-memory API server behind :class:`~kthena_py.kube.api.WatchApi`, for unit tests.

It is the async face of one :class:`~kthena_py.kube.memory.MemoryStore` (:attr:`FakeKube.store`), which holds the
objects and gives every write its API semantics; FakeKube adds the watches, the delivery into caches, the
interceptors and the call record.

Guarantees (each as the real API server behaves, so code under test cannot tell the difference in these respects):

* Every stored object has a UID, a ``creationTimestamp``, a ``generation`` (raised when anything but
  ``metadata`` and ``status`` changes) and a ``resourceVersion`` from one counter that every write raises.
* ``create`` of a taken name is :class:`~kthena_py.kube.errors.AlreadyExists` (``generateName`` is honoured);
  reads and writes of a missing object are :class:`~kthena_py.kube.errors.NotFound`; a stale
  ``metadata.resourceVersion`` (replace, merge patch) or a delete precondition (UID, resourceVersion) that does not
  hold is :class:`~kthena_py.kube.errors.Conflict`; a JSON patch whose ``test`` fails is
  :class:`~kthena_py.kube.errors.Invalid` (422).
* Patches: merge (RFC 7386), JSON (RFC 6902), strategic (list-maps merge by key) and server-side apply by
  field manager, list-map aware (:mod:`kthena_py.kube.memory.patches`, :mod:`kthena_py.kube.memory.ssa`). The
  ``status`` subresource writes only ``status``; writes of the main resource leave ``status`` alone, except for
  kinds without a status subresource.
  The ``scale`` subresource reads and writes ``spec.replicas`` as an ``autoscaling/v1`` Scale.
* Deleting an object with finalizers only marks it (``deletionTimestamp``); it goes when a write empties its
  finalizers. So does deleting a Pod with ``grace_period_seconds`` above 0 (a pod on a node); deleting it again
  with 0 removes it. There is no garbage collector: owned objects stay unless a test deletes them.
* Lists honour namespace, label and field selectors and ``limit``/``continue``; watches replay the changes after
  the given resourceVersion, then stream new ones until ``timeout_seconds``.
* Changes reach every attached :class:`~kthena_py.runtime.cache.SharedCache` (:meth:`FakeKube.attach`) at once and
  in order, as its informers' watches would deliver them: into the stores of the informers whose namespace,
  label and field selectors match (transformed as they transform), with their handlers called. A test can make
  the watch lag (:meth:`FakeKube.hold`) and deliver the held changes when it chooses, still in order.
* Every call is recorded in :attr:`FakeKube.calls` and first passes the interceptors (:meth:`FakeKube.intercept`):
  an interceptor can raise (a fault), change the call's body, or answer it in place of the store.
* Answers are copies: changing what a call returned never changes the store.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal

from kthena_py.kube.client import ObjectList, PatchType, WatchEvent
from kthena_py.kube.memory import Change, MemoryStore
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.cache import SharedCache

from .calls import Call, Interceptor, Verb
from .feed import CacheFeed

__all__ = ["Call", "FakeKube", "Interceptor", "Verb"]


class FakeKube:
    """An in-memory API server for any resource type (see the module docstring).

    UIDs are unique across every FakeKube of the process (as a cluster's are across time): code that caches by
    UID (parsed specs, say) never mixes up two tests' objects.
    """

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store or MemoryStore()
        """The objects and their write semantics (reads and writes here are not recorded calls)."""
        self._watchers: set[asyncio.Event] = set()
        self._feed = CacheFeed()
        self._interceptors: list[Interceptor] = []
        self.calls: list[Call] = []
        """Every call made, in order."""
        self.store.subscribe(self._changed)

    # -- test-side controls ------------------------------------------------------------------------

    def intercept(self, interceptor: Interceptor) -> Callable[[], None]:
        """Run ``interceptor`` before every call (after those added earlier); returns a function removing it."""
        self._interceptors.append(interceptor)
        return lambda: self._interceptors.remove(interceptor)

    def attach(self, cache: SharedCache) -> None:
        """Deliver every change to ``cache``'s informers from now on; fill (and mark synced) those it has now.

        Informers the cache creates later are filled by calling :meth:`attach` again (it is idempotent).
        """
        self._feed.attach(cache, self.store.everything())

    def hold(self) -> None:
        """Keep changes from the attached caches from now on, as a lagging watch would (see :meth:`deliver_held`)."""
        self._feed.hold()

    def deliver_held(self, count: int | None = None) -> int:
        """Deliver the first ``count`` held changes (all when ``None``), in order; returns how many are still held."""
        return self._feed.deliver_held(count)

    def release(self) -> None:
        """Deliver every held change and stop holding."""
        self._feed.release()

    def put(self, rt: ResourceType, obj: Mapping[str, Any]) -> KubeObject:
        """Store ``obj`` as given, ``status`` included (a test's seed; any existing object of that name is replaced).

        Returns:
            The stored object (with UID and resourceVersion).
        """
        return self.store.put(rt, obj)

    def peek(self, rt: ResourceType, name: str, namespace: str | None = None) -> KubeObject | None:
        """The stored object (a copy), or ``None``, without a recorded call."""
        return self.store.peek(rt, name, namespace)

    def objects(self, rt: ResourceType, namespace: str | None = None) -> builtins.list[KubeObject]:
        """Every stored object of ``rt`` (copies, by namespace and name), without a recorded call."""
        return self.store.objects(rt, namespace)

    def changes(self, rt: ResourceType) -> builtins.list[tuple[str, KubeObject]]:
        """Every change of ``rt`` stored so far, in order: (``ADDED``/``MODIFIED``/``DELETED``, the object then)."""
        return self.store.changes(rt)

    def calls_of(self, verb: Verb, rt: ResourceType | None = None) -> builtins.list[Call]:
        """The recorded calls of one verb (and type)."""
        return [c for c in self.calls if c.verb == verb and (rt is None or c.rt == rt)]

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return self.store.resource_version

    # -- internals ---------------------------------------------------------------------------------

    def _changed(self, change: Change) -> None:
        self._feed.change(change.rt, change.type, change.object)
        for watcher in self._watchers:
            watcher.set()

    async def _call(self, call: Call) -> Any:
        self.calls.append(call)
        for interceptor in builtins.list(self._interceptors):
            answer = interceptor(call)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                return answer
        return None

    # -- KubeApi -----------------------------------------------------------------------------------

    async def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> KubeObject:
        """Read one object (or its ``status``/``scale`` subresource)."""
        answer = await self._call(Call("get", rt, name, namespace, subresource))
        if answer is not None:
            return dict(answer)
        return self.store.get(rt, name, namespace, subresource=subresource)

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        shard_selector: str | None = None,
    ) -> ObjectList:
        """List objects of one type (one page when ``limit`` is set)."""
        _refuse_shards(shard_selector)
        options = {"label_selector": label_selector, "field_selector": field_selector, "limit": limit}
        answer = await self._call(Call("list", rt, "", namespace, options=options))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        items, token = self.store.list(
            rt,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )
        return ObjectList(items, self.resource_version, token)

    async def list_all(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        shard_selector: str | None = None,
    ) -> ObjectList:
        """List every object of one type, page by page."""
        _refuse_shards(shard_selector)
        items: builtins.list[KubeObject] = []
        token: str | None = None
        while True:
            page = await self.list(
                rt,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            items.extend(page.items)
            if not page.continue_token:
                return ObjectList(items, page.resource_version)
            token = page.continue_token

    async def create(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Create an object; AlreadyExists when its name is taken."""
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        call = Call(
            "create", rt, str((body.get("metadata") or {}).get("name") or ""), ns, None, copy.deepcopy(dict(body))
        )
        call.options = {"field_manager": field_manager, "dry_run": dry_run}
        answer = await self._call(call)
        if answer is not None:
            return dict(answer)
        return self.store.create(rt, call.body, ns, field_manager=field_manager, dry_run=dry_run)

    async def replace(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Replace an object; a ``metadata.resourceVersion`` in ``body`` must be the stored one (else Conflict)."""
        md = body.get("metadata") or {}
        ns = namespace or md.get("namespace")
        call = Call("replace", rt, str(md.get("name") or ""), ns, subresource, copy.deepcopy(dict(body)))
        call.options = {"field_manager": field_manager}
        answer = await self._call(call)
        if answer is not None:
            return dict(answer)
        body = {**call.body, "metadata": {**(call.body.get("metadata") or {}), "name": call.name}}
        return self.store.replace(rt, body, ns, subresource=subresource)

    async def patch(
        self,
        rt: ResourceType,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> KubeObject:
        """Patch an object or subresource (merge, JSON, strategic, or server-side apply)."""
        call = Call("patch", rt, name, namespace, subresource, copy.deepcopy(body))
        call.options = {"patch_type": patch_type, "field_manager": field_manager, "force": force}
        answer = await self._call(call)
        if answer is not None:
            return dict(answer)
        return self.store.patch(
            rt,
            name,
            call.body,
            namespace,
            patch_type=patch_type,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    async def apply(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        subresource: str | None = None,
        force: bool = True,
    ) -> KubeObject:
        """Server-side apply ``body`` as ``field_manager``."""
        md = body.get("metadata") or {}
        return await self.patch(
            rt,
            str(md.get("name")),
            dict(body),
            namespace or md.get("namespace"),
            patch_type="apply",
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: Literal["Foreground", "Background", "Orphan"] | None = None,
        grace_period_seconds: int | None = None,
    ) -> KubeObject:
        """Delete one object if the preconditions hold (objects with finalizers are only marked)."""
        call = Call("delete", rt, name, namespace)
        call.options = {"uid": uid, "resource_version": resource_version, "propagation_policy": propagation_policy}
        answer = await self._call(call)
        if answer is not None:
            return dict(answer)
        return self.store.delete(
            rt, name, namespace, uid=uid, resource_version=resource_version, grace_period_seconds=grace_period_seconds
        )

    async def get_scale(self, rt: ResourceType, name: str, namespace: str) -> KubeObject:
        """Read the ``scale`` subresource."""
        return await self.get(rt, name, namespace, subresource="scale")

    async def set_scale(self, rt: ResourceType, name: str, namespace: str, replicas: int) -> KubeObject:
        """Set ``spec.replicas`` through the ``scale`` subresource."""
        return await self.patch(rt, name, {"spec": {"replicas": replicas}}, namespace, subresource="scale")

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        on_open: Callable[[], None] | None = None,
        shard_selector: str | None = None,
        managed_fields: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Replay the changes after ``resource_version``, then stream new ones until ``timeout_seconds``.

        ``managed_fields`` changes nothing here: the objects are streamed as stored (the protocol lets a watch
        leave ``managedFields`` out, it does not require it).
        """
        _refuse_shards(shard_selector)
        options = {"label_selector": label_selector, "field_selector": field_selector}
        if await self._call(Call("watch", rt, "", namespace, options=options)) is not None:
            return
        changed = asyncio.Event()
        self._watchers.add(changed)
        if on_open is not None:
            on_open()
        seen = int(resource_version or self.store.revision)
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_seconds
        try:
            while True:
                changed.clear()
                for change in self.store.replay(rt, namespace, label_selector, field_selector, seen):
                    seen = change.revision
                    yield WatchEvent(change.type, change.object)
                seen = max(seen, self.store.revision)
                try:
                    async with asyncio.timeout(max(0.0, until - loop.time())):
                        await changed.wait()
                except TimeoutError:
                    return
        finally:
            self._watchers.discard(changed)


def _refuse_shards(shard_selector: str | None) -> None:
    """The in-memory API server does not shard: a test of sharded lists and watches needs the real one."""
    if shard_selector is not None:
        raise NotImplementedError("the in-memory API server does not filter by shardSelector; use the envtest tier")
