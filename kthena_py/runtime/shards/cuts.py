"""Slots as ranges of the API server's *raw* namespace hash, cut where the namespaces are.

What per-range informers select (issue 31). The slots of :mod:`.hashing` are ranges of a mixed hash, which the
API server cannot select. Ranges of the raw FNV-1a hash can be sent as a ``shardSelector``, but equal ranges give
unequal shares of real names (a family of names that differ in their last characters shares its top bits).
Cutting the raw space at the quantiles of the namespaces' hashes gives both: this module plans such cuts; a lease
group records them and recuts when the shares drift (:mod:`.cutstate`, applied by the handover rule's recut step).

Guarantees (pure, deterministic, no clock):

* :func:`plan_cuts` returns ``slot_count + 1`` strictly increasing bounds from ``0`` to :data:`~.hashing.SPACE`;
  slot ``i`` is ``[cuts[i], cuts[i + 1])``, so the slots cover the space once, without gaps or overlaps;
* every inner bound lies strictly between two adjacent namespace hashes (never on one), half-way when the gap is
  cut once: a name added later falls into the slot of its nearest neighbours;
* with ``n`` distinct hashes of equal weight and ``n >= slot_count``, every slot holds ``floor(n / slot_count)``
  or ``ceil(n / slot_count)`` of them; with weights, a slot's weight exceeds its even share by less than the
  heaviest single namespace;
* fewer namespaces than slots (or none) still give strictly increasing bounds: the cuts that share a gap split it
  evenly, and the empty space is cut evenly; only hashes closer together than the cuts their gap must hold (one
  apart, for FNV-1a of distinct names practically never) raise :class:`ValueError`;
* :func:`slot_at` and :func:`ranges_of_slots` agree with the bounds: a hash is in exactly the slot whose range
  holds it, and a set of slots becomes the fewest merged ranges for :func:`~.selector.shard_selector`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence

from .hashing import SLOT_COUNT, SPACE


def _even_cuts(low: int, high: int, count: int) -> list[int]:
    """``count`` strictly increasing points strictly inside ``(low, high)``, splitting it evenly."""
    return [low + (high - low) * (k + 1) // (count + 1) for k in range(count)]


def plan_cuts(
    hashes: Iterable[int], slot_count: int = SLOT_COUNT, weights: Mapping[int, int] | None = None
) -> tuple[int, ...]:
    """The bounds of ``slot_count`` slots of the raw hash space, cut at the quantiles of ``hashes``.

    Args:
        hashes: The namespaces' raw hashes (``fnv1a64`` of their names); duplicates count once.
        slot_count: How many slots.
        weights: Optional weight per hash (e.g. its cached objects); 1 when absent, at least 1.

    Returns:
        ``slot_count + 1`` bounds, ``cuts[0] == 0`` and ``cuts[-1] == SPACE``.
    """
    if slot_count < 1:
        raise ValueError("slot_count must be at least 1")
    points = sorted(set(hashes))
    if any(not 0 <= h < SPACE for h in points):
        raise ValueError("hashes must be 64-bit values")
    if not points:
        return (0, *_even_cuts(0, SPACE, slot_count - 1), SPACE)
    weight = [max(1, (weights or {}).get(h, 1)) for h in points]
    total = sum(weight)
    # gap k lies between points[k - 1] and points[k] (gap 0 below the first point, gap n above the last); the cut
    # giving slot i its start goes into the gap where the running weight first reaches i * total / slot_count
    in_gap: dict[int, int] = {}
    running = 0
    k = 0
    for i in range(1, slot_count):
        target = i * total  # compared with running * slot_count: integers only
        while k < len(points) and running * slot_count < target:
            running += weight[k]
            k += 1
        in_gap[k] = in_gap.get(k, 0) + 1
    bounds = [0]
    for gap in sorted(in_gap):
        low = points[gap - 1]  # gap 0 gets no cut: the first target is reached after the first point
        high = points[gap] if gap < len(points) else SPACE
        bounds.extend(_even_cuts(low, high, in_gap[gap]))
    bounds.append(SPACE)
    if any(b >= c for b, c in itertools.pairwise(bounds)):
        raise ValueError("too many slots for the gaps between the hashes")
    return tuple(bounds)


def slot_at(hash_value: int, cuts: Sequence[int]) -> int:
    """The slot whose range ``[cuts[i], cuts[i + 1])`` holds ``hash_value``."""
    return bisect.bisect_right(cuts, hash_value) - 1


def ranges_of_slots(slots: Iterable[int], cuts: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The slots' ranges of the raw space, merged where adjacent, in order."""
    merged: list[list[int]] = []
    for slot in sorted(set(slots)):
        start, end = cuts[slot], cuts[slot + 1]
        if merged and merged[-1][1] == start:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    return tuple((a, b) for a, b in merged)
