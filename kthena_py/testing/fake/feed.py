"""Delivery of FakeKube's changes into SharedCache stores, as the informers' watches would deliver them.

Guarantees:

* A change reaches every informer of every attached cache whose type, namespace, label selector and field selector
  match, transformed as that informer transforms what it stores, with its handlers called: ADDED/MODIFIED as
  an add or an update, DELETED (or a change that takes an object out of the selection) as a delete.
* Changes are delivered in the order they were stored; held changes (:meth:`CacheFeed.hold`) wait, in order,
  until the test delivers them.
* Attaching fills the cache's informers with the objects stored so far and marks them synced (a completed list).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.informer import Informer

from .answers import store_key
from .selectors import field_match, label_match

__all__ = ["CacheFeed"]

_Change = tuple[ResourceType, str, KubeObject]


class CacheFeed:
    """Plays the informers' part for the caches attached to one FakeKube."""

    def __init__(self) -> None:
        self._caches: list[SharedCache] = []
        self._held: list[_Change] | None = None

    def attach(self, cache: SharedCache, stored: Iterable[tuple[ResourceType, KubeObject]]) -> None:
        """Deliver changes to ``cache`` from now on; list ``stored`` into each of its informers and mark it synced."""
        if cache not in self._caches:
            self._caches.append(cache)
        stored = list(stored)
        for key, inf in list(cache._informers.items()):
            wanted = [
                inf._prepare(copy.deepcopy(obj))
                for rt, obj in stored
                if rt == key.rt and _sees(inf, key.field_selector, obj)
            ]
            inf._deliver(inf.store.replace(wanted))
            inf._synced.set()

    def hold(self) -> None:
        """Keep changes back from now on, as a lagging watch would."""
        if self._held is None:
            self._held = []

    def deliver_held(self, count: int | None = None) -> int:
        """Deliver the first ``count`` held changes (all when ``None``), in order; returns how many are still held."""
        held = self._held or []
        now, later = (held, []) if count is None else (held[:count], held[count:])
        for rt, kind, obj in now:
            self._deliver(rt, kind, obj)
        if self._held is not None:
            self._held = later
        return len(later)

    def release(self) -> None:
        """Deliver every held change and stop holding."""
        self.deliver_held()
        self._held = None

    def change(self, rt: ResourceType, kind: str, obj: KubeObject) -> None:
        """One stored change (ADDED, MODIFIED or DELETED): deliver it now, or keep it while holding."""
        if self._held is not None:
            self._held.append((rt, kind, copy.deepcopy(obj)))
        else:
            self._deliver(rt, kind, obj)

    def _deliver(self, rt: ResourceType, kind: str, obj: KubeObject) -> None:
        for cache in self._caches:
            for key, inf in list(cache._informers.items()):
                if key.rt != rt:
                    continue
                delivered = inf._prepare(copy.deepcopy(obj))
                if kind == "DELETED" or not _sees(inf, key.field_selector, obj):
                    if inf.store.get(store_key(obj)) is not None:
                        inf.store.delete(delivered)
                        inf._emit_delete(delivered)
                    continue
                old = inf.store.upsert(delivered)
                if old is None:
                    inf._emit_add(delivered)
                else:
                    inf._emit_update(old, delivered)


def _sees(inf: Informer, field_selector: str | None, obj: KubeObject) -> bool:
    """Whether ``inf`` watches ``obj`` (its namespace, label selector and ``field_selector``)."""
    md: Any = obj.get("metadata") or {}
    if inf.namespace and md.get("namespace") != inf.namespace:
        return False
    return label_match(inf._label_selector, md.get("labels") or {}) and field_match(field_selector, obj)
