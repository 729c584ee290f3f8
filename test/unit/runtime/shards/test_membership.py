"""The handover rule: replicas taking turns over one slot map never reconcile a slot twice, and converge.

With recuts proposed at any moment: no two replicas ever reconcile under different generations of cut points (a
recut moves namespaces between slots), and the survivors still converge, with the recut applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.shards.assignment import plan_assignment
from kthena_py.runtime.shards.membership import (
    CLOCK_SKEW,
    MemberLease,
    SlotPlan,
    live_members,
    member_id,
    plan_slots,
)

DURATION = 15.0
SLOTS = 8


def _lease(identity: str, renewed_at: float) -> MemberLease:
    return MemberLease(identity, renewed_at, DURATION)


def test_a_lone_replica_takes_every_slot_then_writes_nothing() -> None:
    first = plan_slots({}, [_lease("a", 0.0)], "a", 1.0, SLOTS)
    assert first.reconcile == frozenset() and first.acquired == frozenset(range(SLOTS))
    assert first.write == dict.fromkeys(range(SLOTS), "a")
    again = plan_slots(first.write, [_lease("a", 0.0)], "a", 2.0, SLOTS)
    assert again == SlotPlan(reconcile=frozenset(range(SLOTS)), write=None)


def test_a_newcomer_waits_until_the_owner_releases() -> None:
    owned = dict.fromkeys(range(SLOTS), "a")
    leases = [_lease("a", 0.0), _lease("b", 0.0)]
    waiting = plan_slots(owned, leases, "b", 1.0, SLOTS)
    assert waiting == SlotPlan(reconcile=frozenset(), write=None)  # a still owns everything: b takes nothing
    release = plan_slots(owned, leases, "a", 1.0, SLOTS)
    assert release.released == frozenset(range(4, SLOTS)) and release.reconcile == frozenset(range(4))
    assert release.write is not None
    take = plan_slots(release.write, leases, "b", 1.0, SLOTS)
    assert take.acquired == frozenset(range(4, SLOTS)) and take.reconcile == frozenset()


def test_an_expired_owners_slots_are_taken_only_after_the_skew_margin() -> None:
    owned = dict.fromkeys(range(SLOTS), "a")
    leases = [_lease("a", 0.0), _lease("b", 20.0)]
    assert plan_slots(owned, leases, "b", DURATION + CLOCK_SKEW - 0.1, SLOTS).acquired == frozenset()
    assert plan_slots(owned, leases, "b", DURATION + CLOCK_SKEW, SLOTS).acquired == frozenset(range(SLOTS))
    # and a replica whose own lease lapsed reconciles nothing, at once (no margin for itself)
    assert plan_slots(owned, leases, "a", DURATION, SLOTS) == SlotPlan(reconcile=frozenset(), write=None)
    assert live_members(leases, "a", DURATION) == frozenset({"b"})


@dataclass
class Group:
    """The slot map (with its version) and the leases, as the API server would hold them; replicas' own state."""

    slot_map: dict[int, str] = field(default_factory=dict)
    version: int = 0
    renewed: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Replica name -> (lease term, renew time)."""
    now: float = 0.0
    reconciling: dict[str, frozenset[int]] = field(default_factory=dict)
    pending: dict[str, tuple[int, SlotPlan]] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    recut_pending: bool = False
    generation: int = 0
    """Generation of the cut points the slots are ranges of (a recut write adds one)."""
    generation_of: dict[str, int] = field(default_factory=dict)
    """The generation each replica's reconciled slots were planned under."""

    def me(self, name: str) -> str:
        return member_id(name, str(self.renewed[name][0]))

    def leases(self) -> list[MemberLease]:
        return [_lease(member_id(m, str(term)), t) for m, (term, t) in self.renewed.items()]

    def lapsed(self, name: str) -> bool:
        return name not in self.renewed or self.now >= self.renewed[name][1] + DURATION

    def effective(self, name: str) -> frozenset[int]:
        """What a replica reconciles now: nothing once its own lease has lapsed (it stops itself)."""
        return frozenset() if self.lapsed(name) else self.reconciling.get(name, frozenset())

    def act(self, action: str, name: str, dt: float) -> None:
        if action == "tick":
            self.now += dt
        elif name in self.dead:
            return
        elif action == "renew":
            if self.lapsed(name):  # a new term: whatever it reconciled or planned is gone
                term = self.renewed[name][0] + 1 if name in self.renewed else 0
                self.reconciling[name] = frozenset()
                self.pending.pop(name, None)
            else:
                term = self.renewed[name][0]
            self.renewed[name] = (term, self.now)
        elif action == "propose":  # a write of new cut points (annotation of the same object: a new version)
            if not self.lapsed(name) and not self.recut_pending:
                self.recut_pending, self.version = True, self.version + 1
        elif action == "kill":
            self.dead.add(name)  # a partitioned replica: it keeps reconciling until its own lease lapses
        elif action == "read" and name in self.renewed:
            plan = plan_slots(
                self.slot_map, self.leases(), self.me(name), self.now, SLOTS, recut_pending=self.recut_pending
            )
            self.reconciling[name] = plan.reconcile  # it stops what it releases before writing
            self.generation_of[name] = self.generation
            if plan.write is not None:
                self.pending[name] = (self.version, plan)
        elif action == "write" and name in self.pending:
            version, plan = self.pending.pop(name)
            if version == self.version and not self.lapsed(name) and plan.write is not None:
                self.slot_map, self.version = plan.write, self.version + 1
                if plan.recut:
                    self.generation, self.recut_pending = self.generation + 1, False
                self.reconciling[name] = plan.reconcile | plan.acquired
                self.generation_of[name] = self.generation

    def assert_no_slot_twice(self) -> None:
        generations = {self.generation_of[n] for n in self.renewed if self.effective(n)}
        assert len(generations) <= 1, f"slots reconciled under cut generations {generations} at {self.now}"
        seen: dict[int, str] = {}
        for name in self.renewed:
            for slot in self.effective(name):
                assert slot not in seen, f"slot {slot} reconciled by {seen[slot]} and {name} at {self.now}"
                seen[slot] = name


actions = st.lists(
    st.tuples(
        st.sampled_from(["renew", "read", "write", "read", "write", "tick", "kill", "propose"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from([0.5, 3.0, 9.0, 20.0]),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(actions)
def test_no_slot_is_ever_reconciled_by_two_replicas_and_the_survivors_converge(
    steps: list[tuple[str, str, float]],
) -> None:
    group = Group()
    for action, member, dt in steps:
        group.act(action, member, dt)
        group.assert_no_slot_twice()
    # then the survivors keep renewing and taking turns (time moving so the dead lapse): the map settles balanced
    survivors = sorted(m for m in ("a", "b", "c", "d") if m in group.renewed and m not in group.dead)
    group.now += DURATION + CLOCK_SKEW + 1
    for _ in range(6):
        for member in survivors:
            for action in ("renew", "read", "write"):
                group.act(action, member, 0.0)
                group.assert_no_slot_twice()
    for member in survivors:  # a last read: each replica picks up what its own last write gave it
        group.act("read", member, 0.0)
    if not survivors:
        return
    assert not group.recut_pending  # a proposed recut took effect
    assert group.slot_map == plan_assignment(group.slot_map, [group.me(m) for m in survivors], SLOTS)
    owned = [slot for member in survivors for slot in group.effective(member)]
    assert sorted(owned) == list(range(SLOTS))


def test_a_recut_waits_until_every_live_owner_has_released_then_empties_the_map() -> None:
    halves = {**dict.fromkeys(range(4), "a"), **dict.fromkeys(range(4, SLOTS), "b")}
    leases = [_lease("a", 0.0), _lease("b", 0.0)]
    a_releases = plan_slots(halves, leases, "a", 1.0, SLOTS, recut_pending=True)
    assert a_releases == SlotPlan(
        reconcile=frozenset(), write=dict.fromkeys(range(4, SLOTS), "b"), released=frozenset(range(4))
    )
    assert a_releases.write is not None
    # b still owns its half: a waits, and takes nothing while the recut is pending
    assert plan_slots(a_releases.write, leases, "a", 1.0, SLOTS, recut_pending=True) == SlotPlan(
        reconcile=frozenset(), write=None
    )
    b_releases = plan_slots(a_releases.write, leases, "b", 1.0, SLOTS, recut_pending=True)
    assert b_releases.write == {} and b_releases.released == frozenset(range(4, SLOTS))
    recut = plan_slots({}, leases, "a", 1.0, SLOTS, recut_pending=True)
    assert recut == SlotPlan(reconcile=frozenset(), write={}, recut=True)
    # an expired owner does not hold a recut up (it stopped by itself)
    expired = plan_slots(
        halves, [_lease("a", 20.0), _lease("b", 0.0)], "a", DURATION + CLOCK_SKEW + 1, SLOTS, recut_pending=True
    )
    assert expired.released == frozenset(range(4)) and expired.write == dict.fromkeys(range(4, SLOTS), "b")
    assert plan_slots(
        expired.write, [_lease("a", 20.0), _lease("b", 0.0)], "a", DURATION + CLOCK_SKEW + 1, SLOTS, recut_pending=True
    ).recut


def test_a_newcomer_cannot_apply_a_recut_while_the_owners_still_reconcile() -> None:
    group = Group()
    for name in ("a", "b"):
        for action in ("renew", "read", "write", "renew", "read", "write"):
            group.act(action, name, 0.0)
    for action in ("renew", "read", "write", "read"):  # a releases its share to b, which has not read since
        group.act(action, "a", 0.0)
    group.act("renew", "c", 0.0)
    group.act("propose", "c", 0.0)
    for action in ("read", "write", "read", "write"):  # c owns nothing: it may only wait for a and b to release
        group.act(action, "c", 0.0)
        group.assert_no_slot_twice()
    assert group.recut_pending and group.generation == 0
    for name in ("a", "b", "c", "a", "b", "c", "a", "b", "c"):
        for action in ("renew", "read", "write"):
            group.act(action, name, 0.0)
            group.assert_no_slot_twice()
    assert not group.recut_pending and group.generation == 1
