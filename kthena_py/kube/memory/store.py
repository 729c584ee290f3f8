"""MemoryStore: the objects of an in-memory cluster with the API server's write semantics, synchronously.

Guarantees (each as the real API server behaves, so code driving it cannot tell the difference in these respects):

* Every stored object has a UID, a ``creationTimestamp``, a ``generation`` (raised when anything but
  ``metadata`` and ``status`` changes) and a ``resourceVersion`` from one counter that every write raises; a
  write that changes nothing raises nothing and is no change.
* ``create`` of a taken name is :class:`~kthena_py.kube.errors.AlreadyExists` (``generateName`` is honoured);
  reads and writes of a missing object are :class:`~kthena_py.kube.errors.NotFound`; a stale
  ``metadata.resourceVersion`` (replace, merge and strategic patch, apply) or a delete precondition (UID,
  resourceVersion) that does not hold is :class:`~kthena_py.kube.errors.Conflict`, as is a ``metadata.uid`` in
  a body that is not the stored one; a JSON patch whose ``test`` fails is :class:`~kthena_py.kube.errors.Invalid`.
* Patches: merge (RFC 7386), JSON (RFC 6902), strategic (list-maps merge by key) (:mod:`.patches`) and server-side
  apply by field manager, list-map aware (:mod:`.ssa`); an apply of an absent object creates it. The ``status``
  subresource writes only ``status``; writes of the main resource leave ``status`` alone, except for kinds
  without a status subresource. The ``scale`` subresource reads and writes ``spec.replicas`` as an
  ``autoscaling/v1`` Scale.
* Deleting an object with finalizers only marks it (``deletionTimestamp``); it goes when a write empties its
  finalizers. Deleting a Pod with ``grace_period_seconds`` above 0 only marks it too (``deletionTimestamp``,
  ``deletionGracePeriodSeconds``), as for a pod on a node; deleting it again with 0 removes it (the kubelet's
  last word). There is no garbage collector: owned objects stay unless deleted.
* Lists honour namespace, label and field selectors and ``limit``/``continue``, sorted by namespace and name;
  :meth:`MemoryStore.replay` gives the changes after a resourceVersion, as a watch from it would.
* Every change (ADDED, MODIFIED, DELETED) is logged in order and handed to every listener
  (:meth:`MemoryStore.subscribe`) as it is stored.
* Answers are copies: changing what a call returned never changes the store. Timestamps come from the store's
  clock and UIDs from its UID source, both replaceable. Nothing here does I/O.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType

from . import patches, ssa
from .selectors import field_match, label_match
from .statuses import TIMESTAMP, WITHOUT_STATUS, already_exists, conflict, invalid, not_found, scale_of, spec_of

__all__ = ["Change", "ChangeType", "Listener", "MemoryStore", "PatchKind"]

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
PatchKind = Literal["merge", "json", "strategic", "apply"]

_Key = tuple[ResourceType, str, str]
_uid_counter = itertools.count(1)


def _next_uid() -> str:
    """UIDs unique across every store of the process (as a cluster's are across time)."""
    return str(uuid.UUID(int=next(_uid_counter)))


@dataclass(frozen=True)
class Change:
    """One stored change: its resourceVersion, the type, ADDED/MODIFIED/DELETED, and the object then (a copy)."""

    revision: int
    rt: ResourceType
    type: ChangeType
    object: KubeObject


Listener = Callable[[Change], None]
"""Called with every change as it is stored (the object is the listener's own copy)."""


def _by_name(item: tuple[_Key, KubeObject]) -> tuple[str, str]:
    return item[0][1], item[0][2]


class MemoryStore:
    """The objects of an in-memory cluster, of any resource type (see the module docstring).

    Args:
        clock: The timestamp of ``creationTimestamp`` and ``deletionTimestamp`` (default: a fixed one).
        uids: The source of new UIDs (default: UUIDs unique within the process).
    """

    def __init__(self, *, clock: Callable[[], str] | None = None, uids: Callable[[], str] | None = None) -> None:
        self.clock: Callable[[], str] = clock or (lambda: TIMESTAMP)
        self.uids: Callable[[], str] = uids or _next_uid
        self._objects: dict[_Key, KubeObject] = {}
        self._owners: dict[_Key, dict[str, set[ssa.Path]]] = {}
        self._revision = 0
        self._names = 0
        self._log: list[Change] = []
        self._listeners: list[Listener] = []

    # -- observing ---------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every change from now on; returns a function that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    @property
    def revision(self) -> int:
        """The newest resourceVersion handed out, as a number."""
        return self._revision

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return str(self._revision)

    def changes(self, rt: ResourceType) -> builtins.list[tuple[str, KubeObject]]:
        """Every change of ``rt`` stored so far, in order: (``ADDED``/``MODIFIED``/``DELETED``, the object then)."""
        return [(c.type, copy.deepcopy(c.object)) for c in self._log if c.rt == rt]

    def replay(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        after: int,
    ) -> builtins.list[Change]:
        """The changes of ``rt`` after resourceVersion ``after`` that a watch with these selectors sees (copies)."""
        seen = []
        for change in self._log:
            md = change.object.get("metadata") or {}
            if change.revision <= after or change.rt != rt:
                continue
            if namespace and rt.namespaced and md.get("namespace") != namespace:
                continue
            if label_match(label_selector, md.get("labels") or {}) and field_match(field_selector, change.object):
                seen.append(Change(change.revision, rt, change.type, copy.deepcopy(change.object)))
        return seen

    # -- reads -------------------------------------------------------------------------------------

    def peek(self, rt: ResourceType, name: str, namespace: str | None = None) -> KubeObject | None:
        """The stored object (a copy), or ``None``."""
        obj = self._objects.get(self._key(rt, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> KubeObject:
        """Read one object (or its ``scale`` subresource); NotFound when absent."""
        _, obj = self._existing(rt, name, namespace)
        return scale_of(obj) if subresource == "scale" else copy.deepcopy(obj)

    def objects(self, rt: ResourceType, namespace: str | None = None) -> builtins.list[KubeObject]:
        """Every stored object of ``rt`` (copies, by namespace and name)."""
        return [
            copy.deepcopy(obj)
            for (t, ns, _), obj in sorted(self._objects.items(), key=_by_name)
            if t == rt and (namespace is None or ns == namespace)
        ]

    def everything(self) -> builtins.list[tuple[ResourceType, KubeObject]]:
        """Every stored object of every type (copies, by namespace and name)."""
        return [(rt, copy.deepcopy(obj)) for (rt, _, _), obj in sorted(self._objects.items(), key=_by_name)]

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[builtins.list[KubeObject], str]:
        """One page of the objects of ``rt`` that match (all when no ``limit``), and the next page's token."""
        items = [
            obj
            for obj in self.objects(rt, namespace if rt.namespaced else None)
            if label_match(label_selector, (obj.get("metadata") or {}).get("labels") or {})
            and field_match(field_selector, obj)
        ]
        start = int(continue_token or 0)
        end = len(items) if not limit else start + limit
        return items[start:end], (str(end) if end < len(items) else "")

    # -- writes ------------------------------------------------------------------------------------

    def put(self, rt: ResourceType, obj: Mapping[str, Any]) -> KubeObject:
        """Store ``obj`` as given, ``status`` included (a seed; any existing object of that name is replaced).

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

    def create(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Create an object; AlreadyExists when its name is taken."""
        obj = copy.deepcopy(dict(body))
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            self._names += 1
            md["name"] = f"{md['generateName']}{self._names:05x}"
        if not md.get("name"):
            raise invalid("name or generateName is required")
        if rt.namespaced:
            md["namespace"] = namespace or md.get("namespace") or "default"
        for server_set in ("uid", "resourceVersion", "deletionTimestamp", "generation"):
            md.pop(server_set, None)
        key = self._key(rt, md["name"], md.get("namespace"))
        if key in self._objects:
            raise already_exists(rt, md["name"])
        obj = self._new(rt, obj)
        if dry_run:
            return obj
        if field_manager:
            self._owners[key] = {field_manager: set(ssa.apply_fields(dict(body)))}
        return self._store(rt, key, obj, "ADDED")

    def replace(
        self, rt: ResourceType, body: Mapping[str, Any], namespace: str | None = None, *, subresource: str | None = None
    ) -> KubeObject:
        """Replace an object; a ``metadata.resourceVersion`` in ``body`` must be the stored one (else Conflict)."""
        md = body.get("metadata") or {}
        key, old = self._existing(rt, str(md.get("name") or ""), namespace or md.get("namespace"))
        self._preconditions(rt, old, md)
        return self._write(rt, key, old, copy.deepcopy(dict(body)), subresource)

    def patch(
        self,
        rt: ResourceType,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchKind = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> KubeObject:
        """Patch an object or subresource (merge, JSON, strategic, or server-side apply)."""
        key = self._key(rt, name, namespace)
        old = self._objects.get(key)
        if patch_type == "apply":
            if not field_manager:
                raise ValueError("server-side apply needs a field_manager")
            body = {"apiVersion": rt.api_version, "kind": rt.kind, **body}
            if old is None:
                if subresource:
                    raise not_found(rt, name)
                return self.create(rt, body, namespace, field_manager=field_manager)
            if subresource == "status":
                body = {k: v for k, v in body.items() if k in ("apiVersion", "kind", "metadata", "status")}
            self._preconditions(rt, old, body.get("metadata") or {})
            new, owners = ssa.apply(old, body, field_manager, self._owners.get(key, {}), force=force)
            result = self._write(rt, key, old, new, subresource)
            if key in self._objects:
                self._owners[key] = owners
            return result
        if old is None:
            raise not_found(rt, name)
        if subresource == "scale":
            if isinstance(body, Mapping):
                self._preconditions(rt, old, body.get("metadata") or {})
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

    def apply(
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
        return self.patch(
            rt,
            str(md.get("name")),
            dict(body),
            namespace or md.get("namespace"),
            patch_type="apply",
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    def delete(
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> KubeObject:
        """Delete one object if the preconditions hold (objects with finalizers, graceful pods: only marked)."""
        key, old = self._existing(rt, name, namespace)
        self._preconditions(rt, old, {"uid": uid, "resourceVersion": resource_version})
        md = old["metadata"]
        graceful = rt.kind == "Pod" and grace_period_seconds is not None and grace_period_seconds > 0
        if md.get("finalizers") or (graceful and not md.get("deletionTimestamp")):
            if md.get("deletionTimestamp"):
                return copy.deepcopy(old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = self.clock()
            if graceful:
                new["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds
            return self._store(rt, key, new, "MODIFIED")
        if graceful:
            return copy.deepcopy(old)  # already terminating: the grace period runs on
        return self._store(rt, key, copy.deepcopy(old), "DELETED")

    # -- internals ---------------------------------------------------------------------------------

    @staticmethod
    def _key(rt: ResourceType, name: str, namespace: str | None) -> _Key:
        return (rt, (namespace or "") if rt.namespaced else "", name)

    def _new(self, rt: ResourceType, body: KubeObject) -> KubeObject:
        md = body["metadata"]
        md.setdefault("uid", self.uids())
        md.setdefault("creationTimestamp", self.clock())
        md.setdefault("generation", 1)
        body.setdefault("apiVersion", rt.api_version)
        body.setdefault("kind", rt.kind)
        return body

    def _store(self, rt: ResourceType, key: _Key, obj: KubeObject, kind: ChangeType) -> KubeObject:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        if kind == "DELETED":
            self._objects.pop(key, None)
            self._owners.pop(key, None)
        else:
            self._objects[key] = obj
        self._log.append(Change(self._revision, rt, kind, copy.deepcopy(obj)))
        for listener in builtins.list(self._listeners):
            listener(Change(self._revision, rt, kind, copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    def _existing(self, rt: ResourceType, name: str, namespace: str | None) -> tuple[_Key, KubeObject]:
        key = self._key(rt, name, namespace)
        obj = self._objects.get(key)
        if obj is None:
            raise not_found(rt, name)
        return key, obj

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
        if md.get("deletionTimestamp") and not md.get("finalizers") and "deletionGracePeriodSeconds" not in md:
            return self._store(rt, key, new, "DELETED")
        return self._store(rt, key, new, "MODIFIED")
