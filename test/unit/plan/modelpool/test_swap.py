"""The swap planner: table tests of each step, and properties over random worlds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.modelpool import (
    REASON_DEMAND_EXPIRED,
    REASON_IDLE_CHECK_FAILED,
    REASON_PODS_BUSY,
    STEP_DRAINING,
    STEP_LOADING,
    STEP_RELEASING,
)
from kthena_py.plan.modelpool.demand import DEMAND_LIVE_SECONDS
from kthena_py.plan.modelpool.idle import BUSY, FAILED, IDLE, IdleResult
from kthena_py.plan.modelpool.swap import Decision, lru_order, plan
from kthena_py.plan.modelpool.view import Member, PoolSpec, PoolState, Swap

NOW = 1_000_000.0
AB = PoolSpec(members=("a", "b"), default="a")


def up(name: str, ready: bool = True) -> Member:
    return Member(name, replicas=1, pods=1, ready_pods=1 if ready else 0)


def down(name: str, pods: int = 0) -> Member:
    return Member(name, replicas=0, pods=pods)


def world(*members: Member) -> dict[str, Member]:
    return {m.name: m for m in members}


def idle_all(*names: str, verdict: str = IDLE) -> dict[str, IdleResult]:
    return {n: IdleResult(verdict, "x") for n in names}  # type: ignore[arg-type]


def run(
    spec: PoolSpec,
    state: PoolState,
    members: Mapping[str, Member],
    demand: Mapping[str, float] | None = None,
    idle: Mapping[str, IdleResult] | None = None,
    now: float = NOW,
    released: Mapping[str, float] | None = None,
) -> Decision:
    first = plan(spec, state, members, demand or {}, now, released=released)
    if first.needs_probe:
        assert idle is not None, f"planner asked to probe {first.needs_probe}"
        assert set(first.needs_probe) <= set(idle)
        return plan(spec, state, members, demand or {}, now, idle, released=released)
    return first


def reasons(decision: Decision) -> list[str]:
    return [e.reason for e in decision.events]


def test_cold_pool_loads_the_default_without_demand() -> None:
    d = run(AB, PoolState(), world(down("a"), down("b")))
    assert d.state.swap == Swap(to="a", step=STEP_LOADING, started=NOW)
    assert d.state.residents == ()
    assert d.replicas == {"a": 1}
    assert "SwapStarted" in reasons(d)


def test_cold_pool_without_default_waits_for_demand_then_loads_it() -> None:
    spec = PoolSpec(members=("a", "b"))
    quiet = run(spec, PoolState(), world(down("a"), down("b")))
    assert quiet.state == PoolState(residents=()) and quiet.replicas == {}
    d = run(spec, PoolState(residents=()), world(down("a"), down("b")), {"b": NOW - 1})
    assert d.state.swap is not None and d.state.swap.to == "b" and d.replicas == {"b": 1}


def test_loading_completes_when_the_target_is_ready() -> None:
    state = PoolState(residents=(), swap=Swap(to="a", step=STEP_LOADING, started=NOW - 5))
    waiting = run(AB, state, world(up("a", ready=False), down("b")))
    assert waiting.state.swap == state.swap and waiting.replicas == {} and waiting.requeue_after
    done = run(AB, state, world(up("a"), down("b")))
    assert done.state == PoolState(residents=("a",))
    assert done.completed is not None and done.completed.duration == 5
    assert done.replicas == {}


def test_adoption_keeps_the_default_and_scales_extras_down() -> None:
    d = run(AB, PoolState(), world(up("b"), up("a")))
    assert d.state.residents == ("a",)
    assert d.replicas == {"b": 0}
    assert "ReplicasRestored" not in reasons(d)


def test_sticky_no_demand_no_swap() -> None:
    state = PoolState(residents=("a",))
    d = run(AB, state, world(up("a"), down("b")), {"a": NOW})
    assert d.state == state and d.replicas == {} and d.events == ()


def test_expired_demand_starts_nothing() -> None:
    state = PoolState(residents=("a",))
    d = run(AB, state, world(up("a"), down("b")), {"b": NOW - DEMAND_LIVE_SECONDS - 1})
    assert d.state == state and d.replicas == {}


def test_demand_with_idle_resident_drains_it_in_one_pass() -> None:
    state = PoolState(residents=("a",))
    d = run(AB, state, world(up("a"), down("b")), {"b": NOW}, idle_all("a"))
    assert d.state.residents == ()
    assert d.state.swap == Swap(to="b", step=STEP_RELEASING, from_="a", started=NOW, drained=NOW)
    assert d.replicas == {"a": 0}, "the target is not raised while the victim holds the slot"


@pytest.mark.parametrize(("verdict", "reason"), [(BUSY, REASON_PODS_BUSY), (FAILED, REASON_IDLE_CHECK_FAILED)])
def test_busy_or_unreadable_resident_defers_without_replica_change(verdict: str, reason: str) -> None:
    state = PoolState(residents=("a",))
    d = run(AB, state, world(up("a"), down("b")), {"b": NOW}, idle_all("a", verdict=verdict))
    assert d.state.swap == Swap(to="b", step=STEP_DRAINING, from_="a", started=NOW)
    assert d.state.residents == ("a",)
    assert d.state.deferred_reason == reason
    assert d.replicas == {}
    assert d.requeue_after is not None and d.requeue_after > 0
    assert reason in reasons(d)


def test_busy_wins_over_failed_for_the_reason() -> None:
    spec = PoolSpec(members=("a", "b", "c"), slots=2)
    state = PoolState(residents=("a", "b"))
    idle = {"a": IdleResult(FAILED, "timeout"), "b": IdleResult(BUSY, "3")}
    d = run(spec, state, world(up("a"), up("b"), down("c")), {"c": NOW}, idle)
    assert d.state.deferred_reason == REASON_PODS_BUSY


def test_deferred_swap_proceeds_once_idle_and_clears_deferral() -> None:
    state = PoolState(
        residents=("a",),
        swap=Swap(to="b", step=STEP_DRAINING, from_="a", started=NOW - 10),
        deferred_reason=REASON_PODS_BUSY,
        deferred_message="busy",
    )
    d = run(AB, state, world(up("a"), down("b")), {"b": NOW - 5}, idle_all("a"))
    assert d.state.swap is not None and d.state.swap.step == STEP_RELEASING and d.state.swap.started == NOW - 10
    assert d.state.deferred_reason is None
    assert d.replicas == {"a": 0}


def test_deferred_swap_is_abandoned_when_demand_expires() -> None:
    state = PoolState(residents=("a",), swap=Swap(to="b", step=STEP_DRAINING, from_="a", started=NOW - 60))
    d = run(AB, state, world(up("a"), down("b")), {"b": NOW - DEMAND_LIVE_SECONDS - 0.5})
    assert d.state.swap is None and d.state.residents == ("a",)
    assert d.state.deferred_reason == REASON_DEMAND_EXPIRED
    assert d.abandoned == REASON_DEMAND_EXPIRED and d.replicas == {}
    # the condition stays until another swap starts
    again = run(AB, d.state, world(up("a"), down("b")), {"b": NOW - DEMAND_LIVE_SECONDS - 0.5})
    assert again.state.deferred_reason == REASON_DEMAND_EXPIRED and again.events == ()


def test_releasing_waits_until_the_victims_pods_are_gone_even_after_demand_expired() -> None:
    state = PoolState(residents=(), swap=Swap(to="b", step=STEP_RELEASING, from_="a", started=NOW - 9, drained=NOW - 8))
    terminating = run(AB, state, world(down("a", pods=1), down("b")), {})
    assert terminating.state == state and terminating.replicas == {}
    gone = run(AB, state, world(down("a"), down("b")), {})
    assert gone.state.swap == replace(state.swap, step=STEP_LOADING, released=NOW)  # type: ignore[type-var]
    assert gone.replicas == {"b": 1}


def test_restart_after_status_write_before_scale_down_resumes() -> None:
    """The status says Releasing but the victim still has its replica: it is scaled down, no drift Event."""
    state = PoolState(residents=(), swap=Swap(to="b", step=STEP_RELEASING, from_="a", started=NOW, drained=NOW))
    d = run(AB, state, world(up("a"), down("b")))
    assert d.replicas == {"a": 0} and d.state == state
    assert "ReplicasRestored" not in reasons(d)


def test_drift_is_put_back_with_a_warning() -> None:
    state = PoolState(residents=("a",))
    d = run(AB, state, world(Member("a", replicas=3, pods=3, ready_pods=3), Member("b", replicas=1)))
    assert d.replicas == {"a": 1, "b": 0}
    assert reasons(d).count("ReplicasRestored") == 2


def test_scale_up_is_held_while_another_member_still_holds_the_slot() -> None:
    """A stray pod of b (someone scaled it up and down) holds the only slot: a is not raised yet."""
    state = PoolState(residents=(), swap=Swap(to="a", step=STEP_LOADING, started=NOW))
    d = run(AB, state, world(down("a"), down("b", pods=1)))
    assert d.replicas == {} and d.requeue_after is not None


def test_lru_picks_oldest_demand_and_never_requested_first() -> None:
    assert lru_order(["a", "b", "c"], {"a": 5.0, "b": 1.0}) == ["c", "b", "a"]
    assert lru_order(["x", "y"], {}) == ["x", "y"]


def test_two_slots_three_members_evicts_the_least_recently_used_idle_resident() -> None:
    spec = PoolSpec(members=("a", "b", "c"), slots=2)
    state = PoolState(residents=("a", "b"))
    demand = {"a": NOW - 20, "b": NOW - 2, "c": NOW}
    d = run(spec, state, world(up("a"), up("b"), down("c")), demand, idle_all("a", "b"))
    assert d.state.swap is not None and d.state.swap.from_ == "a" and d.replicas == {"a": 0}
    # the LRU one busy: the next idle one goes
    idle = {"a": IdleResult(BUSY, "1"), "b": IdleResult(IDLE, "0")}
    d2 = run(spec, state, world(up("a"), up("b"), down("c")), demand, idle)
    assert d2.state.swap is not None and d2.state.swap.from_ == "b" and d2.replicas == {"b": 0}


def test_demand_older_than_the_release_never_swaps_back() -> None:
    """The members' demand is still live, but it was served before they were swapped out: no ping-pong."""
    spec = PoolSpec(members=("a", "b", "c"), slots=2)
    state = PoolState(residents=("a", "c"))
    demand = {"a": NOW - 3, "b": NOW - 5, "c": NOW - 1}
    released = {"b": NOW - 4}
    d = run(spec, state, world(up("a"), down("b"), up("c")), demand, idle_all("a", "c"), released=released)
    assert d.state == state and d.replicas == {} and d.events == ()
    # a request for b after it was swapped out does swap it in
    d2 = run(
        spec, state, world(up("a"), down("b"), up("c")), {**demand, "b": NOW}, idle_all("a", "c"), released=released
    )
    assert d2.state.swap is not None and d2.state.swap.to == "b" and d2.state.swap.from_ == "a"
    assert d2.released == {"a": NOW}


def test_free_slot_loads_without_draining() -> None:
    spec = PoolSpec(members=("a", "b", "c"), slots=2)
    d = run(spec, PoolState(residents=("a",)), world(up("a"), down("b"), down("c")), {"c": NOW})
    assert d.state.swap == Swap(to="c", step=STEP_LOADING, started=NOW) and d.replicas == {"c": 1}


def test_oldest_demand_is_served_first() -> None:
    spec = PoolSpec(members=("a", "b", "c"), slots=2)
    d = run(spec, PoolState(residents=("a",)), world(up("a"), down("b"), down("c")), {"b": NOW - 1, "c": NOW - 3})
    assert d.state.swap is not None and d.state.swap.to == "c"


def test_missing_target_abandons_the_swap() -> None:
    state = PoolState(residents=("a",), swap=Swap(to="b", step=STEP_DRAINING, from_="a", started=NOW))
    d = run(AB, state, world(up("a"), Member("b", exists=False)), {"b": NOW})
    assert d.state.swap is None and d.abandoned and d.state.residents == ("a",)


# -- properties over random worlds ----------------------------------------------------------------------------


class World:
    """A toy cluster: replica writes create pods after a delay, scale-downs delete them after a delay."""

    def __init__(self, names: tuple[str, ...], up_at_start: set[str]) -> None:
        self.replicas = {n: (1 if n in up_at_start else 0) for n in names}
        self.pods = {n: (1 if n in up_at_start else 0) for n in names}
        self.ready = {n: n in up_at_start for n in names}

    def members(self) -> dict[str, Member]:
        return {
            n: Member(n, replicas=self.replicas[n], pods=self.pods[n], ready_pods=int(self.ready[n]))
            for n in self.replicas
        }

    def tick(self, progress: set[str]) -> None:
        """Pods of the members in ``progress`` move one step towards their replicas."""
        for n in progress:
            if self.replicas[n] > self.pods[n]:
                self.pods[n] += 1
            elif self.pods[n] and not self.ready[n] and self.replicas[n]:
                self.ready[n] = True
            elif self.replicas[n] < self.pods[n]:
                self.pods[n] -= 1
                self.ready[n] = False

    def up_count(self) -> int:
        return sum(1 for n in self.replicas if self.replicas[n] > 0 or self.pods[n] > 0)


@settings(max_examples=150, deadline=None)
@given(
    slots=st.integers(min_value=1, max_value=3),
    count=st.integers(min_value=2, max_value=5),
    data=st.data(),
)
def test_never_more_than_slots_members_up(slots: int, count: int, data: st.DataObject) -> None:
    names = tuple(f"m{i}" for i in range(count))
    spec = PoolSpec(members=names, slots=slots, default=data.draw(st.sampled_from((None, *names))))
    world_ = World(names, set(data.draw(st.lists(st.sampled_from(names), max_size=slots, unique=True))))
    state = PoolState()
    demand: dict[str, float] = {}
    released: dict[str, float] = {}
    now = NOW
    completed_after_quiet = 0
    for step in range(60):
        now += data.draw(st.floats(min_value=0.1, max_value=5))
        if step < 40:  # then no request at all: at most one swap-in per member may follow, never a ping-pong
            for n in data.draw(st.lists(st.sampled_from(names), max_size=2)):
                demand[n] = now
        members = world_.members()
        decision = plan(spec, state, members, demand, now, released=released)
        if decision.needs_probe:
            choices = (IDLE, BUSY, FAILED) if step < 40 else (IDLE,)
            verdicts = {n: IdleResult(data.draw(st.sampled_from(choices))) for n in decision.needs_probe}
            decision = plan(spec, state, members, demand, now, verdicts, released=released)
        assert not decision.needs_probe
        released.update(decision.released)
        if step >= 40 and decision.completed is not None:
            completed_after_quiet += 1
        assert completed_after_quiet <= count
        new = decision.state
        assert new.residents is not None
        wanted = set(new.residents) | ({new.swap.to} if new.swap and new.swap.step == STEP_LOADING else set())
        assert len(wanted) <= slots
        assert len(new.residents) == len(set(new.residents))
        # sticky: a resident leaves only for a swap to a member with live demand (or the default of a cold pool)
        for gone in set(state.residents or ()) - set(new.residents):
            assert new.swap is not None and new.swap.from_ == gone
        state = new
        for n, r in decision.replicas.items():
            world_.replicas[n] = r
            assert world_.up_count() <= slots, f"raising {n} put more than {slots} members up"
        world_.tick(set(names) if step >= 40 else set(data.draw(st.lists(st.sampled_from(names), unique=True))))
        assert world_.up_count() <= slots


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=2, max_value=4), slots=st.integers(min_value=1, max_value=2))
def test_live_demand_with_idle_residents_ends_resident(count: int, slots: int) -> None:
    """Liveness: the cluster catching up and residents idle, a member with held demand becomes resident."""
    names = tuple(f"m{i}" for i in range(count))
    spec = PoolSpec(members=names, slots=slots, default=names[0])
    world_ = World(names, set())
    state = PoolState()
    now = NOW
    target = names[-1]
    for _ in range(30):
        now += 1
        demand = {target: now}
        decision = plan(spec, state, world_.members(), demand, now)
        if decision.needs_probe:
            decision = plan(spec, state, world_.members(), demand, now, idle_all(*decision.needs_probe))
        state = decision.state
        world_.replicas.update(decision.replicas)
        world_.tick(set(names))
        if state.residents and target in state.residents:
            break
    assert state.residents is not None and target in state.residents
