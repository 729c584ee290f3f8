"""Which slots one replica may reconcile now, and the slot map it writes: the handover rule of a lease group.

The cluster state this plans from (level-based; written by :class:`~.member.ShardMember`):

* each live replica renews a Lease of its own in the group (holder, acquire and renew times, duration), as a
  leader does; its member id (:func:`member_id`) names the holder *and* the lease's term (its ``acquireTime``),
  so a replica that lapsed and came back is a new member: it cannot resume slots from its old term, and must take
  them again through a write, which fails any other replica's write planned meanwhile;
* one slot map (slot -> owner member id) for the whole group, written only with its resourceVersion as a
  precondition, so at every version a slot has at most one owner.

Guarantees of :func:`plan_slots` (pure, deterministic, no clock: ``now`` is given):

* a replica reconciles exactly the slots the map it last wrote or read gives it, and nothing while its own lease is
  not valid (it stops before others may take over, as a leader that cannot renew);
* a slot changes owner only when its owner released it (it stopped first, then wrote the map without it) or the
  owner's lease expired: no slot is ever reconciled by two replicas at once, under the same clock assumptions as
  leader election (:data:`CLOCK_SKEW` of margin);
* the map moves toward :func:`~.assignment.plan_assignment` over the live members: a replica releases what the
  assignment gives to another and takes what it gives to itself once free; when the map already matches, nothing
  is written (a restart on a settled group writes nothing).
* **Recut** (``recut_pending``: new cut points of the hash space have been proposed, :mod:`.cuts`): a recut moves
  namespaces between slots, so it may only take effect while no live member owns a slot. With a recut pending a
  replica takes nothing and releases everything it owns (stopping first, as for any release); the replica that
  finds no slot owned by a live member writes the empty map with ``recut=True``, which applies the new cut points
  (a new generation of them) in the same write; slots are then taken again as after a start. No namespace is
  reconciled under two generations of cut points at once. The runtime proposes recuts when the namespaces' shares
  drift and records the cut points next to the slot map (:mod:`.cutstate`, :class:`~.member.ShardMember`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .assignment import plan_assignment
from .hashing import SLOT_COUNT

CLOCK_SKEW = 2.0
"""Seconds of margin before a lease counts as expired to another replica (clocks of replicas differ)."""


def member_id(identity: str, acquired_at: str) -> str:
    """A member of one lease term: the holder's identity and its Lease's ``acquireTime``."""
    return f"{identity}@{acquired_at}"


@dataclass(frozen=True)
class MemberLease:
    """One replica's Lease as read from the cluster."""

    identity: str
    """The member id (:func:`member_id`)."""
    renewed_at: float
    """``spec.renewTime`` (epoch seconds)."""
    duration: float
    """``spec.leaseDurationSeconds``."""

    def valid_at(self, now: float, margin: float = CLOCK_SKEW) -> bool:
        """Whether the lease holds at ``now`` (for another replica: with ``margin`` of skew allowed)."""
        return now < self.renewed_at + self.duration + margin


@dataclass(frozen=True)
class SlotPlan:
    """What one replica does in one pass."""

    reconcile: frozenset[int]
    """The slots it may reconcile now (before the write; a slot released below is not among them)."""
    write: dict[int, str] | None
    """The slot map to write (resourceVersion precondition), or None when the map is already right for it."""
    released: frozenset[int] = frozenset()
    acquired: frozenset[int] = frozenset()
    """Slots the write takes: reconciled only once the write has succeeded (the next pass reads them as its own)."""
    recut: bool = False
    """The write (the empty map) also applies the pending cut points: no live member owns a slot."""


def live_members(leases: Iterable[MemberLease], me: str, now: float) -> frozenset[str]:
    """Members whose lease holds at ``now``; ``me`` only by its own lease without margin (it must not overrun)."""
    return frozenset(
        lease.identity for lease in leases if lease.valid_at(now, 0.0 if lease.identity == me else CLOCK_SKEW)
    )


def plan_slots(
    slot_map: Mapping[int, str],
    leases: Iterable[MemberLease],
    me: str,
    now: float,
    slot_count: int = SLOT_COUNT,
    *,
    recut_pending: bool = False,
) -> SlotPlan:
    """One pass of replica ``me`` over the group's slot map and leases (see the module docstring).

    Args:
        slot_map: The recorded owner of each slot ("" or absent: free).
        leases: Every member's lease, ``me``'s included.
        me: This replica's member id (its current term's: :func:`member_id`).
        now: The current time (epoch seconds).
        slot_count: Number of slots.
        recut_pending: New cut points wait to be applied (see the module docstring).
    """
    live = live_members(leases, me, now)
    if me not in live:
        return SlotPlan(reconcile=frozenset(), write=None)
    owners = {s: o for s, o in slot_map.items() if o}
    mine = frozenset(s for s, o in owners.items() if o == me)
    if recut_pending:
        if mine:
            return SlotPlan(reconcile=frozenset(), write={s: o for s, o in owners.items() if o != me}, released=mine)
        if any(o in live for o in owners.values()):
            return SlotPlan(reconcile=frozenset(), write=None)  # the others release first
        return SlotPlan(reconcile=frozenset(), write={}, recut=True)
    target = plan_assignment({s: o for s, o in owners.items() if o in live}, live, slot_count)
    released = frozenset(s for s in mine if target.get(s) != me)
    acquired = frozenset(
        s for s in range(slot_count) if target.get(s) == me and (owners.get(s) is None or owners[s] not in live)
    )
    if not released and not acquired:
        return SlotPlan(reconcile=mine, write=None)
    written = {s: o for s, o in owners.items() if s not in released}
    written.update(dict.fromkeys(acquired, me))
    return SlotPlan(reconcile=mine - released, write=written, released=released, acquired=acquired)
