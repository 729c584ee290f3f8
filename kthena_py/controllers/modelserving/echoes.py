"""Watch events that only echo a reconciler's own writes, kept from waking that reconciler again.

A reconciler that creates or updates an object hears of it a moment later from its own watch; for a reconciler
whose plan is already carried out by that write (the gang reconciler: its PodGroups are rendered from the spec, and
seeing them written changes no plan), the look the echo asks for plans nothing. :class:`OwnWrites` remembers what
the API server answered each write with, and :meth:`OwnWrites.passes` wraps the reconciler's watch predicate so
that the event showing exactly that object version does not enqueue it.

Guarantees:

* **Only the echo, only for this watch.** An added or updated object at a remembered (resource, namespace, name,
  resourceVersion) is held back once and forgotten; any later version (another writer, the scheduler's status) goes
  to the wrapped predicate as before, and a deletion always does. Other controllers' watches of the same objects
  see every event: the filter is per watch, not per informer.
* **Memory only, bounded, and safe to lose.** At most :data:`ECHO_MAX` writes for at most :data:`ECHO_TTL`
  seconds, oldest first out. A lost or expired entry (a restart, a watch event that outran the write's answer)
  means the look happens, as it would without the filter; nothing a reconcile decides depends on this table.
* Counted: every held-back echo increments ``kthena_modelserving_echoes_skipped_total{controller}``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from kthena_py.kube.objects import KubeObject, name_of, namespace_of, resource_version_of
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.controller import Predicate

from .metrics import ECHOES_SKIPPED

__all__ = ["ECHO_MAX", "ECHO_TTL", "OwnWrites"]

ECHO_TTL = 60.0
"""Seconds a write is remembered: its watch event comes within moments, or the informer relisted meanwhile."""
ECHO_MAX = 4096
"""Writes remembered at most (a fleet's burst of PodGroup creations fits many times over)."""

_Key = tuple[str, str, str, str]


def _key(rt: ResourceType, obj: KubeObject) -> _Key:
    """An object version: (resource, namespace, name, resourceVersion)."""
    return (rt.plural, namespace_of(obj), name_of(obj), resource_version_of(obj))


class OwnWrites:
    """The recent writes of one reconciler, by the object version the API server answered with.

    Args:
        controller: The controller's name (the metric's label).
        ttl: Seconds a write is remembered.
        limit: Writes remembered at most.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        controller: str,
        *,
        ttl: float = ECHO_TTL,
        limit: int = ECHO_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._skipped = ECHOES_SKIPPED.labels(controller)
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._until: OrderedDict[_Key, float] = OrderedDict()

    def remember(self, rt: ResourceType, written: KubeObject) -> None:
        """Note that this reconciler wrote ``written`` (the API server's answer) of type ``rt``."""
        rv = resource_version_of(written)
        if not rv:
            return
        now = self._clock()
        self._expire(now)
        key = _key(rt, written)
        self._until[key] = now + self._ttl
        self._until.move_to_end(key)
        while len(self._until) > self._limit:
            self._until.popitem(last=False)

    def _expire(self, now: float) -> None:
        while self._until:
            key, until = next(iter(self._until.items()))
            if until > now:
                return
            del self._until[key]

    def is_echo(self, rt: ResourceType, obj: KubeObject) -> bool:
        """Whether ``obj`` is a remembered write (then it is forgotten: an object version echoes once)."""
        if not self._until:
            return False
        self._expire(self._clock())
        if self._until.pop(_key(rt, obj), None) is None:
            return False
        self._skipped.inc()
        return True

    def passes(self, rt: ResourceType, predicate: Predicate) -> Predicate:
        """``predicate`` for a watch of ``rt``, except that the echo of a remembered write does not pass."""

        def passes(old: KubeObject | None, new: KubeObject) -> bool:
            return not self.is_echo(rt, new) and predicate(old, new)

        return passes

    def __len__(self) -> int:
        return len(self._until)
