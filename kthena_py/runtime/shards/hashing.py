"""The sharding key's hash, as the API server computes it for ``shardSelector`` (KEP-5866).

Guarantees: :func:`fnv1a64` is 64-bit FNV-1a over the UTF-8 bytes of the text (offset basis 0xcbf29ce484222325,
prime 0x100000001b3), the function the API server applies to ``object.metadata.namespace`` (Go's ``hash/fnv``
``New64a``); :func:`slot_of` maps a hash to one of :data:`SLOT_COUNT` equal, contiguous slots of the hash space
(its top bits), so a set of slots is a set of ranges of hashes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

SPACE: Final = 1 << 64
"""Size of the hash space; a range's exclusive end may be this value."""
SLOT_BITS: Final = 6
SLOT_COUNT: Final = 1 << SLOT_BITS
"""Slots the hash space is cut into (64: up to 64 replicas, each a multiple of 1/64 of the namespaces)."""
SLOT_SIZE: Final = SPACE >> SLOT_BITS

_OFFSET_BASIS: Final = 0xCBF29CE484222325
_PRIME: Final = 0x100000001B3
_MASK: Final = SPACE - 1


def fnv1a64(text: str) -> int:
    """64-bit FNV-1a of ``text``'s UTF-8 bytes."""
    h = _OFFSET_BASIS
    for byte in text.encode():
        h = ((h ^ byte) * _PRIME) & _MASK
    return h


def slot_of(hash_value: int) -> int:
    """The slot holding ``hash_value`` (0 <= slot < :data:`SLOT_COUNT`)."""
    return hash_value >> (64 - SLOT_BITS)


@lru_cache(maxsize=65536)
def namespace_slot(namespace: str) -> int:
    """The slot of a namespace (the sharding key: a ModelServing and everything it owns share it).

    Memoised: a sharded replica asks it for every change it observes.
    """
    return slot_of(fnv1a64(namespace))
