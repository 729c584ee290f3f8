"""How many bytes a cached object holds: :func:`deep_size`, for benchmarks and diagnostics.

Guarantees:

* :func:`deep_size` sums :func:`sys.getsizeof` over an object and everything reachable from it through dicts,
  lists, tuples and sets (keys and values), counting each distinct object once (by identity), so strings shared
  between objects (interned keys, say) are not counted twice when several objects are measured together
  (pass them as one list, or share ``seen`` between calls).
* It never fails on cycles and never recurses on the Python stack (an explicit work list), so deep documents
  are fine.
* Only containers are followed: other objects (ints, floats, ``None``, bools, any class instance) count as
  their own ``getsizeof``. Small ints and ``None``/``True``/``False`` are interpreter singletons and cost a
  real object nothing; they are counted anyway (once), which keeps the figure an upper bound.
"""

from __future__ import annotations

import sys

__all__ = ["deep_size"]


def deep_size(obj: object, seen: set[int] | None = None) -> int:
    """Bytes held by ``obj`` and what it contains, each distinct object counted once.

    Args:
        obj: A JSON-like value (dicts, lists, strings, numbers), e.g. a cached Kubernetes object.
        seen: Identities already counted (shared between calls to measure objects together); updated.
    """
    seen = set() if seen is None else seen
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
    return total
