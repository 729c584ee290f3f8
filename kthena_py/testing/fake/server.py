"""FakeKube: an in-memory API server behind :class:`~kthena_py.kube.api.WatchApi`, for unit tests.

Guarantees (each as the real API server behaves, so code under test cannot tell the difference in these respects):

* Every stored object has a UID, a ``creationTimestamp``, a ``generation`` (raised when anything but
  ``metadata`` and ``status`` changes) and a ``resourceVersion`` from one counter that every write raises.
* ``create`` of a taken name is :class:`~kthena_py.kube.errors.AlreadyExists` (``generateName`` is honoured);
  reads and writes of a missing object are :class:`~kthena_py.kube.errors.NotFound`; a stale
  ``metadata.resourceVersion`` (replace, merge patch) or a delete precondition (UID, resourceVersion) that does not
  hold is :class:`~kthena_py.kube.errors.Conflict`; a JSON patch whose ``test`` fails is
  :class:`~kthena_py.kube.errors.Invalid` (422).
* Patches: merge (RFC 7386), JSON (RFC 6902), strategic (list-maps merge by key) and server-side apply by
  field manager, list-map aware (:mod:`.patches`). The ``status`` subresource writes only ``status``; writes
  of the main resource leave ``status`` alone, except for kinds without a status subresource.
  The ``scale`` subresource reads and writes ``spec.replicas`` as an ``autoscaling/v1`` Scale.
* Deleting an object with finalizers only marks it (``deletionTimestamp``); it goes when a write empties its
  finalizers. There is no garbage collector: owned objects stay unless a test deletes them.
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
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal

from kthena_py.kube.client import ObjectList, PatchType, WatchEvent
from kthena_py.kube.errors import AlreadyExists, Invalid
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.cache import SharedCache

from . import patches
from .answers import TIMESTAMP, WITHOUT_STATUS, conflict, not_found, scale_of, spec_of, status_body
from .calls import Call, Interceptor, Verb
from .feed import CacheFeed
from .selectors import field_match, label_match

__all__ = ["Call", "FakeKube", "Interceptor", "Verb"]


_Key = tuple[ResourceType, str, str]


def _by_name(item: tuple[_Key, KubeObject]) -> tuple[str, str]:
    return item[0][1], item[0][2]


class FakeKube:
    """An in-memory API server for any resource type (see the module docstring).

    UIDs are unique across every FakeKube of the process (as a cluster's are across time): code that caches by
    UID (parsed specs, say) never mixes up two tests' objects.
    """

    _uid_counter = itertools.count(1)

    def __init__(self) -> None:
        self._objects: dict[_Key, KubeObject] = {}
        self._owners: dict[_Key, dict[str, set[patches.Path]]] = {}
        self._revision = 0
        self._names = 0
        self._log: list[tuple[int, ResourceType, str, KubeObject]] = []
        self._watchers: set[asyncio.Event] = set()
        self._feed = CacheFeed()
        self._interceptors: list[Interceptor] = []
        self.calls: list[Call] = []
        """Every call made, in order."""

    # -- test-side controls ------------------------------------------------------------------------

    def intercept(self, interceptor: Interceptor) -> Callable[[], None]:
        """Run ``interceptor`` before every call (after those added earlier); returns a function removing it."""
        self._interceptors.append(interceptor)
        return lambda: self._interceptors.remove(interceptor)

    def attach(self, cache: SharedCache) -> None:
        """Deliver every change to ``cache``'s informers from now on; fill (and mark synced) those it has now.

        Informers the cache creates later are filled by calling :meth:`attach` again (it is idempotent).
        """
        self._feed.attach(cache, [(rt, obj) for (rt, _, _), obj in sorted(self._objects.items(), key=_by_name)])

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
        body = copy.deepcopy(dict(obj))
        md = body.setdefault("metadata", {})
        key = self._key(rt, str(md.get("name")), md.get("namespace"))
        old = self._objects.get(key)
        if old is not None:
            md.setdefault("uid", old["metadata"]["uid"])
            md.setdefault("creationTimestamp", old["metadata"].get("creationTimestamp"))
        return self._store(rt, key, self._new(rt, body) if old is None else body, "MODIFIED" if old else "ADDED")

    def peek(self, rt: ResourceType, name: str, namespace: str | None = None) -> KubeObject | None:
        """The stored object (a copy), or ``None``, without a recorded call."""
        obj = self._objects.get(self._key(rt, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def objects(self, rt: ResourceType, namespace: str | None = None) -> builtins.list[KubeObject]:
        """Every stored object of ``rt`` (copies, by namespace and name), without a recorded call."""
        return [
            copy.deepcopy(obj)
            for (t, ns, _), obj in sorted(self._objects.items(), key=_by_name)
            if t == rt and (namespace is None or ns == namespace)
        ]

    def changes(self, rt: ResourceType) -> builtins.list[tuple[str, KubeObject]]:
        """Every change of ``rt`` stored so far, in order: (``ADDED``/``MODIFIED``/``DELETED``, the object then)."""
        return [(kind, copy.deepcopy(obj)) for _, t, kind, obj in self._log if t == rt]

    def calls_of(self, verb: Verb, rt: ResourceType | None = None) -> builtins.list[Call]:
        """The recorded calls of one verb (and type)."""
        return [c for c in self.calls if c.verb == verb and (rt is None or c.rt == rt)]

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return str(self._revision)

    # -- internals ---------------------------------------------------------------------------------

    @staticmethod
    def _key(rt: ResourceType, name: str, namespace: str | None) -> _Key:
        return (rt, (namespace or "") if rt.namespaced else "", name)

    async def _call(self, call: Call) -> Any:
        self.calls.append(call)
        for interceptor in builtins.list(self._interceptors):
            answer = interceptor(call)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                return answer
        return None

    def _new(self, rt: ResourceType, body: KubeObject) -> KubeObject:
        md = body["metadata"]
        md.setdefault("uid", str(uuid.UUID(int=next(FakeKube._uid_counter))))
        md.setdefault("creationTimestamp", TIMESTAMP)
        md.setdefault("generation", 1)
        body.setdefault("apiVersion", rt.api_version)
        body.setdefault("kind", rt.kind)
        return body

    def _store(self, rt: ResourceType, key: _Key, obj: KubeObject, kind: str) -> KubeObject:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        if kind == "DELETED":
            self._objects.pop(key, None)
            self._owners.pop(key, None)
        else:
            self._objects[key] = obj
        self._log.append((self._revision, rt, kind, copy.deepcopy(obj)))
        self._feed.change(rt, kind, obj)
        for watcher in self._watchers:
            watcher.set()
        return copy.deepcopy(obj)

    def _existing(self, rt: ResourceType, name: str, namespace: str | None) -> tuple[_Key, KubeObject]:
        key = self._key(rt, name, namespace)
        obj = self._objects.get(key)
        if obj is None:
            raise not_found(rt, name)
        return key, obj

    def _write(
        self, rt: ResourceType, key: _Key, old: KubeObject, new: KubeObject, subresource: str | None
    ) -> KubeObject:
        """Store ``new`` in place of ``old`` with the subresource rules, generation and finalizers of the module."""
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = copy.deepcopy(new["status"])
            else:
                merged.pop("status", None)
            new = merged
        elif rt.kind not in WITHOUT_STATUS:
            new = copy.deepcopy(new)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        md = new.setdefault("metadata", {})
        for fixed in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp"):
            if fixed in old["metadata"]:
                md[fixed] = old["metadata"][fixed]
            else:
                md.pop(fixed, None)
        md["generation"] = old["metadata"].get("generation", 1)
        if spec_of(new) != spec_of(old):
            md["generation"] += 1
        if new == old:
            return copy.deepcopy(old)  # a no-op write does not raise the resourceVersion
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            return self._store(rt, key, new, "DELETED")
        return self._store(rt, key, new, "MODIFIED")

    # -- KubeApi -----------------------------------------------------------------------------------

    async def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> KubeObject:
        """Read one object (or its ``status``/``scale`` subresource)."""
        answer = await self._call(Call("get", rt, name, namespace, subresource))
        if answer is not None:
            return dict(answer)
        _, obj = self._existing(rt, name, namespace)
        return scale_of(obj) if subresource == "scale" else copy.deepcopy(obj)

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
    ) -> ObjectList:
        """List objects of one type (one page when ``limit`` is set)."""
        options = {"label_selector": label_selector, "field_selector": field_selector, "limit": limit}
        answer = await self._call(Call("list", rt, "", namespace, options=options))
        if answer is not None:
            return answer  # type: ignore[no-any-return]
        items = [
            obj
            for obj in self.objects(rt, namespace if rt.namespaced else None)
            if label_match(label_selector, (obj.get("metadata") or {}).get("labels") or {})
            and field_match(field_selector, obj)
        ]
        start = int(continue_token or 0)
        end = len(items) if not limit else start + limit
        token = str(end) if end < len(items) else ""
        return ObjectList(items[start:end], self.resource_version, token)

    async def list_all(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ObjectList:
        """List every object of one type, page by page."""
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
        return self._create(rt, call.body, ns, field_manager=field_manager, dry_run=dry_run)

    def _create(
        self, rt: ResourceType, body: Mapping[str, Any], ns: str | None, *, field_manager: str | None, dry_run: bool
    ) -> KubeObject:
        obj = copy.deepcopy(dict(body))
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            self._names += 1
            md["name"] = f"{md['generateName']}{self._names:05x}"
        if not md.get("name"):
            message = "name or generateName is required"
            raise Invalid(422, "Invalid", message, status_body(422, "Invalid", message))
        if rt.namespaced:
            md["namespace"] = ns or "default"
        for server_set in ("uid", "resourceVersion", "deletionTimestamp", "generation"):
            md.pop(server_set, None)
        key = self._key(rt, md["name"], md.get("namespace"))
        if key in self._objects:
            message = f'{rt.plural} "{md["name"]}" already exists'
            raise AlreadyExists(409, "AlreadyExists", message, status_body(409, "AlreadyExists", message))
        obj = self._new(rt, obj)
        if dry_run:
            return obj
        if field_manager:
            self._owners[key] = {field_manager: set(patches.apply_fields(dict(body)))}
        return self._store(rt, key, obj, "ADDED")

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
        key, old = self._existing(rt, call.name, ns)
        self._preconditions(rt, old, call.body.get("metadata") or {})
        return self._write(rt, key, old, copy.deepcopy(call.body), subresource)

    @staticmethod
    def _preconditions(rt: ResourceType, old: KubeObject, md: Mapping[str, Any]) -> None:
        have = old["metadata"]
        if md.get("resourceVersion") and md["resourceVersion"] != have["resourceVersion"]:
            raise conflict(
                rt,
                have["name"],
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        if md.get("uid") and md["uid"] != have["uid"]:
            raise conflict(
                rt,
                have["name"],
                f"Precondition failed: UID in precondition: {md['uid']}, UID in object meta: {have['uid']}",
            )

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
        body = call.body
        key = self._key(rt, name, namespace)
        old = self._objects.get(key)
        if patch_type == "apply":
            if not field_manager:
                raise ValueError("server-side apply needs a field_manager")
            body = {"apiVersion": rt.api_version, "kind": rt.kind, **body}
            if old is None:
                if subresource:
                    raise not_found(rt, name)
                return self._create(rt, body, namespace, field_manager=field_manager, dry_run=False)
            if subresource == "status":
                body = {k: v for k, v in body.items() if k in ("apiVersion", "kind", "metadata", "status")}
            self._preconditions(rt, old, body.get("metadata") or {})
            new, owners = patches.apply(old, body, field_manager, self._owners.get(key, {}), force=force)
            result = self._write(rt, key, old, new, subresource)
            self._owners[key] = owners
            return result
        if old is None:
            raise not_found(rt, name)
        if subresource == "scale":
            replicas = ((patches.merge_patch(scale_of(old), body) or {}).get("spec") or {}).get("replicas")
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["replicas"] = replicas
            self._write(rt, key, old, new, None)
            return scale_of(self._objects[key])
        if patch_type == "json":
            new = patches.json_patch(old, body)
        else:
            if isinstance(body, Mapping):
                self._preconditions(rt, old, body.get("metadata") or {})
            merge = patches.strategic_patch if patch_type == "strategic" else patches.merge_patch
            new = merge(old, body)
        return self._write(rt, key, old, new, subresource)

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
        key, old = self._existing(rt, name, namespace)
        self._preconditions(rt, old, {"uid": uid, "resourceVersion": resource_version})
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = TIMESTAMP
            return self._store(rt, key, new, "MODIFIED")
        return self._store(rt, key, copy.deepcopy(old), "DELETED")

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
    ) -> AsyncIterator[WatchEvent]:
        """Replay the changes after ``resource_version``, then stream new ones until ``timeout_seconds``."""
        options = {"label_selector": label_selector, "field_selector": field_selector}
        if await self._call(Call("watch", rt, "", namespace, options=options)) is not None:
            return
        changed = asyncio.Event()
        self._watchers.add(changed)
        if on_open is not None:
            on_open()
        seen = int(resource_version or self._revision)
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_seconds
        try:
            while True:
                changed.clear()
                for event in self._replay(rt, namespace, label_selector, field_selector, seen):
                    seen = int(event.object["metadata"]["resourceVersion"])
                    yield event
                seen = max(seen, self._revision)
                try:
                    async with asyncio.timeout(max(0.0, until - loop.time())):
                        await changed.wait()
                except TimeoutError:
                    return
        finally:
            self._watchers.discard(changed)

    def _replay(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        after: int,
    ) -> builtins.list[WatchEvent]:
        events = []
        for revision, t, kind, obj in self._log:
            md = obj.get("metadata") or {}
            if revision <= after or t != rt or (namespace and rt.namespaced and md.get("namespace") != namespace):
                continue
            if label_match(label_selector, md.get("labels") or {}) and field_match(field_selector, obj):
                events.append(WatchEvent(kind, copy.deepcopy(obj)))
        return events
