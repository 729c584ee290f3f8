"""Delivery of FakeKube's changes into SharedCache stores, as the informers' watches would deliver them.

It plays the list and the watch through the informers' own public entry points (:meth:`Informer.sync
<kthena_py.runtime.informer.Informer.sync>`, :meth:`Informer.observe <kthena_py.runtime.informer.Informer.observe>`),
so stores and handlers see what a real list and watch would hand them.

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

from kthena_py.kube.memory.selectors import field_match, label_match
from kthena_py.kube.objects import KubeObject, object_key
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.informer import Informer

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
        for inf in cache.informers():
            inf.sync([copy.deepcopy(obj) for rt, obj in stored if rt == inf.rt and _sees(inf, obj)])

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
            for inf in cache.informers():
                if inf.rt != rt:
                    continue
                if kind == "DELETED" or not _sees(inf, obj):
                    if inf.store.get(object_key(obj)) is not None:
                        inf.observe("DELETED", copy.deepcopy(obj))
                    continue
                inf.observe(kind, copy.deepcopy(obj))


def _sees(inf: Informer, obj: KubeObject) -> bool:
    """Whether ``inf`` watches ``obj`` (its namespace, label selector and field selector)."""
    md: Any = obj.get("metadata") or {}
    if inf.namespace and md.get("namespace") != inf.namespace:
        return False
    return label_match(inf.label_selector, md.get("labels") or {}) and field_match(inf.field_selector, obj)
