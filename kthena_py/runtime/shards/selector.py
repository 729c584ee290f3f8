"""Ranges of a 64-bit hash space, and the ``shardSelector`` that selects ranges of the API server's hash.

Guarantees: :func:`ranges_of` merges adjacent slots into the fewest half-open ranges ``[start, end)`` of the space
the slots cut; :func:`shard_selector` renders ranges in the grammar the API server accepts
(``shardRange(field, 'start', 'end')`` joined by ``||``, bounds as ``0x`` and 16 lowercase hex digits, the space's
end as ``0x10000000000000000``). The slots of :mod:`.hashing` cut the *mixed* hash, which the API server does not
compute, so those are never sent as a selector; with per-range informers the slots are ranges of raw-hash cuts
(:mod:`.cuts`), which are. The manager also sends the whole space once to learn whether the API server filters at
all (:mod:`.detect`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .hashing import SLOT_SIZE

NAMESPACE_FIELD = "object.metadata.namespace"
"""The field hashed (the namespace: a ModelServing, its pods, PodGroups, Services and revisions share it)."""


def ranges_of(slots: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """The slots as merged half-open ranges of hashes, in order."""
    merged: list[list[int]] = []
    for slot in sorted(set(slots)):
        start, end = slot * SLOT_SIZE, (slot + 1) * SLOT_SIZE
        if merged and merged[-1][1] == start:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    return tuple((a, b) for a, b in merged)


def _bound(value: int) -> str:
    return f"'0x{value:016x}'"


def shard_selector(ranges: Sequence[tuple[int, int]], field: str = NAMESPACE_FIELD) -> str:
    """The ``shardSelector`` selecting ``ranges`` of ``field``'s hash.

    No range gives "": selecting nothing is not expressible, so a member without slots must not list at all.
    """
    return " || ".join(f"shardRange({field}, {_bound(a)}, {_bound(b)})" for a, b in ranges)
