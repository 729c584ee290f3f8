"""Work that every handler of one watch event would repeat, done once per event.

An informer hands the same ``(old, new)`` objects to each of its handlers in turn: a pod's change reaches the
ServingGroup, rollout, scheduling, adapter and pool watches and the ``Running`` notifier one after the other, and
several of them ask the same questions of it (did the pod's state change? did it only become Ready? which
ModelServing owns it?). The wrappers here keep the answer to the last question asked, keyed by the identity of the
objects it was asked about, so the second handler to ask gets the first one's answer.

Guarantees:

* A wrapped function returns what the function itself would: the answer is reused only for the very same argument
  objects (``is``, never ``==``), and the cache's objects are never changed in place (they are replaced whole by the
  next version; :mod:`kthena_py.runtime.store`). The wrapped functions must be pure functions of their arguments.
* One entry per wrapped function, held as one tuple that is replaced whole: nothing grows, and a reader in another
  thread sees the old entry or the new one, never half of each. The entry keeps its argument objects alive until the
  next call replaces it, so their identities cannot be reused by other objects meanwhile.
* A different event, or the same event's objects asked about again after another event, is computed afresh.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerEvent", "PerObject", "once_per_event", "once_per_object"]

A = TypeVar("A")
B = TypeVar("B")
R = TypeVar("R")

_NOTHING: object = object()
"""Matches no argument: the entry before the first call."""


class PerEvent(Generic[A, B, R]):
    """A pure two-argument function (a watch predicate over ``(old, new)``) that reuses its last answer."""

    def __init__(self, fn: Callable[[A, B], R]) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._last: tuple[object, object, object] = (_NOTHING, _NOTHING, None)

    def __call__(self, old: A, new: B) -> R:
        """``fn(old, new)``: the kept answer when both are the very objects it was asked about."""
        seen = self._last
        if seen[1] is new and seen[0] is old:
            return seen[2]  # type: ignore[return-value]
        answer = self._fn(old, new)
        self._last = (old, new, answer)
        return answer

    def forget(self) -> None:
        """Drop the kept answer (and the objects it holds); the next call computes afresh."""
        self._last = (_NOTHING, _NOTHING, None)


class PerObject(Generic[A, R]):
    """A pure one-argument function (a watch's mapper) that reuses its last answer.

    The answer is shared by every caller: a function wrapped here must return something no caller changes (a tuple).
    """

    def __init__(self, fn: Callable[[A], R]) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._last: tuple[object, object] = (_NOTHING, None)

    def __call__(self, obj: A) -> R:
        """``fn(obj)``: the kept answer when ``obj`` is the very object it was asked about."""
        seen = self._last
        if seen[0] is obj:
            return seen[1]  # type: ignore[return-value]
        answer = self._fn(obj)
        self._last = (obj, answer)
        return answer

    def forget(self) -> None:
        """Drop the kept answer (and the object it holds); the next call computes afresh."""
        self._last = (_NOTHING, None)


def once_per_event(fn: Callable[[A, B], R]) -> PerEvent[A, B, R]:
    """Wrap a pure predicate over ``(old, new)`` to answer once per event (module docstring)."""
    return PerEvent(fn)


def once_per_object(fn: Callable[[A], R]) -> PerObject[A, R]:
    """Wrap a pure function of one object to answer once per object version (module docstring)."""
    return PerObject(fn)
