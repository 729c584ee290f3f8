"""What a planner reads from one cached object, kept while the object lives (pure: no I/O, no clock).

Guarantees: :class:`ObjectMemo` returns, for an object it has seen (by identity, with an extra key by value), the
value computed the first time; an entry holds its object, so an ``id`` is never reused while the entry lives. It
keeps the ``size`` most recently added entries (first in, first out). The cache replaces an object on every change
and never modifies one in place, so a value computed from an object stays true for as long as the object lives.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ObjectMemo"]

T = TypeVar("T")


class ObjectMemo(Generic[T]):
    """Values computed once per (object, extra key), for the ``size`` most recent objects."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[tuple[int, Hashable], tuple[object, T]] = {}

    def get(self, obj: object, extra: Hashable, compute: Callable[[], T]) -> T:
        """The value for ``obj`` (by identity) and ``extra`` (by value), computed on the first request."""
        key = (id(obj), extra)
        hit = self._entries.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = compute()
        if len(self._entries) >= self._size:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (obj, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
