"""Play an informer's part for a cache that is never started: store a watch event's object and call the handlers."""

from __future__ import annotations

from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.cache import SharedCache


def deliver(cache: SharedCache, rt: ResourceType, obj: KubeObject) -> None:
    """An ADDED or MODIFIED event of ``obj``."""
    inf = cache.informer(rt)
    old = inf.store.upsert(obj)
    if old is None:
        inf._emit_add(obj)
    else:
        inf._emit_update(old, obj)


def deliver_deletion(cache: SharedCache, rt: ResourceType, obj: KubeObject) -> None:
    """A DELETED event of ``obj``."""
    inf = cache.informer(rt)
    inf.store.delete(obj)
    inf._emit_delete(obj)
