"""The sharding key's hash: which of the 64 slots a namespace falls in.

Guarantees: :func:`fnv1a64` is 64-bit FNV-1a over the UTF-8 bytes of the text (offset basis 0xcbf29ce484222325,
prime 0x100000001b3), the function the API server applies to ``object.metadata.namespace`` for a ``shardSelector``
(KEP-5866; Go's ``hash/fnv`` ``New64a``). :func:`namespace_slot` is the top 6 bits of :func:`mix64` of that hash, so
the 64 slots get even shares of any family of names. :func:`mix64` is a bijection of the 64-bit space (an
avalanche finaliser: every input bit flips each output bit with probability about one half).

Why the mix: FNV-1a's last steps only reach its top bits through carries, so names that differ in their last one
or two characters share their top bits: ``team-a`` to ``team-z`` fall in one 1/65,536 of the space, and a thousand
``tenant-000`` .. ``tenant-999`` in ten of 64 equal slots. Equal ranges of the API server's raw hash therefore
cannot give replicas equal shares of real namespace names; the slots are cut in the mixed space instead, which the
API server cannot select (docs/sharding.md, "The hash").
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
_MIX1: Final = 0xFF51AFD7ED558CCD
_MIX2: Final = 0xC4CEB9FE1A85EC53


def fnv1a64(text: str) -> int:
    """64-bit FNV-1a of ``text``'s UTF-8 bytes."""
    h = _OFFSET_BASIS
    for byte in text.encode():
        h = ((h ^ byte) * _PRIME) & _MASK
    return h


def mix64(value: int) -> int:
    """A bijective avalanche of a 64-bit value (xor-shift and multiply by odd constants, three rounds)."""
    value ^= value >> 33
    value = (value * _MIX1) & _MASK
    value ^= value >> 33
    value = (value * _MIX2) & _MASK
    value ^= value >> 33
    return value


def slot_of(hash_value: int) -> int:
    """The slot holding ``hash_value`` (0 <= slot < :data:`SLOT_COUNT`)."""
    return hash_value >> (64 - SLOT_BITS)


@lru_cache(maxsize=65536)
def namespace_hash(namespace: str) -> int:
    """The API server's raw hash of a namespace (:func:`fnv1a64`), memoised like :func:`namespace_slot`."""
    return fnv1a64(namespace)


@lru_cache(maxsize=65536)
def namespace_slot(namespace: str) -> int:
    """The slot of a namespace (the sharding key: a ModelServing and everything it owns share it).

    Memoised: a sharded replica asks it for every change it observes.
    """
    return slot_of(mix64(fnv1a64(namespace)))
