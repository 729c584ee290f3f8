"""Which live member owns which slot: equal shares, and the fewest slots moved when members come and go.

Guarantees (for :func:`plan_assignment`; pure, deterministic, no clock):

* every slot has exactly one owner, a live member (none when no member is live);
* shares are equal: the member counts differ by at most one;
* fewest moves: a slot keeps its owner unless that owner is gone or holds more than its share, and the members
  that keep the larger shares (when the slots do not divide evenly) are the ones already holding the most, so no
  balanced assignment moves fewer slots;
* an assignment that is already balanced over the same members is returned unchanged (a restart moves nothing);
* the result depends only on the inputs (ties break by member name, slots by number).

The apply side (not built yet, issue 31) records each slot's owner in the members' Leases and hands a slot over
only once its previous owner has released it or its lease has expired.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .hashing import SLOT_COUNT


def plan_assignment(current: Mapping[int, str], members: Iterable[str], slot_count: int = SLOT_COUNT) -> dict[int, str]:
    """The owner of every slot, given who owns what now and which members are live.

    Args:
        current: The recorded owner of each slot (slots missing or owned by a member not in ``members`` are free).
        members: The live members' identities.
        slot_count: Number of slots (:data:`~.hashing.SLOT_COUNT`).

    Returns:
        Slot to owner for every slot in ``range(slot_count)``; empty when no member is live.
    """
    live = sorted(set(members))
    if not live:
        return {}
    held: dict[str, list[int]] = {m: [] for m in live}
    for slot in range(slot_count):
        owner = current.get(slot)
        if owner in held:
            held[owner].append(slot)
    base, extra = divmod(slot_count, len(live))
    by_holding = sorted(live, key=lambda m: (-len(held[m]), m))
    share = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    result: dict[int, str] = {}
    for m in live:
        for slot in held[m][: share[m]]:  # an over-full member gives up its highest slots
            result[slot] = m
    free = [slot for slot in range(slot_count) if slot not in result]
    wanting = [m for m in live for _ in range(share[m] - min(share[m], len(held[m])))]
    for slot, m in zip(free, wanting, strict=True):
        result[slot] = m
    return result


def moves(before: Mapping[int, str], after: Mapping[int, str]) -> frozenset[int]:
    """The slots whose owner differs between two assignments (a slot absent from one side counts as moved)."""
    return frozenset(s for s in set(before) | set(after) if before.get(s) != after.get(s))


def slots_of(assignment: Mapping[int, str], member: str) -> frozenset[int]:
    """The slots one member owns."""
    return frozenset(s for s, owner in assignment.items() if owner == member)
