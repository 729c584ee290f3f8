"""An indexed in-memory store of Kubernetes objects, keyed by ``namespace/name``.

Guarantees:

* The store only ever holds what the informer last saw from the API server; it is rebuilt from a
  list at every (re)start, so it cannot drift from the cluster for longer than one watch gap.
* Indices are kept consistent with the items on every add, update, delete and replace. An update whose index
  values equal the old version's (a pod's status change, most of a converge's events) leaves that index's buckets
  alone: both versions' values are computed, nothing is remembered per object.
* :meth:`Store.replace` returns the exact difference to the previous content (added, updated,
  deleted), so an informer can deliver a relist as ordinary events and no delete is ever missed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kthena_py.kube.objects import KubeObject, object_key, resource_version_of

IndexFunc = Callable[[KubeObject], Iterable[str]]
"""Maps an object to the index values it is filed under."""


@dataclass
class ReplaceDiff:
    """What changed when a store's content was replaced by a fresh list."""

    added: list[KubeObject] = field(default_factory=list)
    updated: list[tuple[KubeObject, KubeObject]] = field(default_factory=list)
    deleted: list[KubeObject] = field(default_factory=list)


class Store:
    """Objects by key, with named secondary indices."""

    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, KubeObject] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        for name, fn in (indexers or {}).items():
            self.add_indexer(name, fn)

    def __len__(self) -> int:
        return len(self._items)

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Register an index (also indexes what the store already holds). Idempotent per name."""
        if name in self._indexers:
            return
        self._indexers[name] = fn
        index: dict[str, set[str]] = {}
        self._indices[name] = index
        for key, obj in self._items.items():
            _file(index, key, fn(obj))

    def get(self, key: str) -> KubeObject | None:
        """Return the object stored under ``key``."""
        return self._items.get(key)

    def keys(self) -> list[str]:
        """Return all keys."""
        return list(self._items)

    def values(self) -> list[KubeObject]:
        """Return all objects."""
        return list(self._items.values())

    def sorted_values(self) -> list[KubeObject]:
        """Return all objects in the order of their keys (``namespace/name``)."""
        items = self._items
        return [items[k] for k in sorted(items)]

    def by_index(self, index: str, value: str) -> list[KubeObject]:
        """Return the objects filed under ``value`` in ``index``.

        Raises:
            KeyError: No index of that name.
        """
        keys = self._indices[index].get(value, ())
        return [self._items[k] for k in sorted(keys)]

    def upsert(self, obj: KubeObject) -> KubeObject | None:
        """Insert or replace ``obj``; return the previous version, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        self._items[key] = obj
        if old is None:
            self._index(key, obj)
            return None
        for name, fn in self._indexers.items():
            before, after = fn(old), fn(obj)
            if before != after:  # most updates (a pod's status) leave every index value as it was
                index = self._indices[name]
                _unfile(index, key, before)
                _file(index, key, after)
        return old

    def delete(self, obj: KubeObject) -> KubeObject | None:
        """Remove the object with ``obj``'s key; return what was stored, if anything."""
        key = object_key(obj)
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def replace(self, objs: Iterable[KubeObject]) -> ReplaceDiff:
        """Make the store hold exactly ``objs`` and return the difference to before."""
        diff = ReplaceDiff()
        fresh = {object_key(o): o for o in objs}
        for key in [k for k in self._items if k not in fresh]:
            gone = self._items[key]
            self.delete(gone)
            diff.deleted.append(gone)
        for key, obj in fresh.items():
            old = self._items.get(key)
            if old is None:
                self.upsert(obj)
                diff.added.append(obj)
            elif resource_version_of(old) != resource_version_of(obj):
                self.upsert(obj)
                diff.updated.append((old, obj))
        return diff

    def _index(self, key: str, obj: KubeObject) -> None:
        for name, fn in self._indexers.items():
            _file(self._indices[name], key, fn(obj))

    def _unindex(self, key: str, obj: KubeObject) -> None:
        for name, fn in self._indexers.items():
            _unfile(self._indices[name], key, fn(obj))


def _file(index: dict[str, set[str]], key: str, values: Iterable[str]) -> None:
    """File ``key`` under each of ``values``."""
    for value in values:
        index.setdefault(value, set()).add(key)


def _unfile(index: dict[str, set[str]], key: str, values: Iterable[str]) -> None:
    """Take ``key`` out of each of ``values``' buckets, dropping a bucket left empty."""
    for value in values:
        bucket = index.get(value)
        if bucket is not None:
            bucket.discard(key)
            if not bucket:
                del index[value]
