"""A target stuck Loading past swapBudget (Degraded, Ready/SwapStalled) and members removed while still up."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.modelpool import (
    CONDITION_READY,
    PHASE_DEGRADED,
    PHASE_SWAPPING,
    REASON_SWAP_IN_PROGRESS,
    STEP_DRAINING,
    STEP_LOADING,
    STEP_RELEASING,
)
from kthena_py.plan.modelpool.idle import IDLE, IdleResult
from kthena_py.plan.modelpool.status import loading_stalled, pool_phase, render_status
from kthena_py.plan.modelpool.swap import plan
from kthena_py.plan.modelpool.view import Member, PoolSpec, PoolState, Swap, former_members, parse_spec
from kthena_py.vocab.conditions import REASON_SWAP_STALLED

NOW = 1_796_295_600.0
SPEC = PoolSpec(members=("a", "b"), swap_budget=60.0)


@pytest.mark.parametrize(
    ("swap", "now", "stalled"),
    [
        (None, NOW, None),
        (Swap(to="b", step=STEP_LOADING, started=NOW), NOW + 59.9, None),
        (Swap(to="b", step=STEP_LOADING, started=NOW), NOW + 60, 60.0),
        (Swap(to="b", step=STEP_LOADING, started=NOW - 500, released=NOW), NOW + 30, None),
        (Swap(to="b", step=STEP_LOADING, started=NOW - 500, released=NOW), NOW + 90, 90.0),
        (Swap(to="b", step=STEP_DRAINING, from_="a", started=NOW - 500), NOW, None),
        (Swap(to="b", step=STEP_RELEASING, from_="a", started=NOW - 500, drained=NOW - 400), NOW, None),
        (Swap(to="b", step=STEP_LOADING), NOW, None),
    ],
)
def test_loading_stalled_counts_from_the_start_of_loading(swap: Swap | None, now: float, stalled: float | None) -> None:
    assert loading_stalled(SPEC, PoolState(residents=(), swap=swap), now) == stalled


def test_pool_phase_is_degraded_only_with_a_clock_past_the_budget() -> None:
    state = PoolState(residents=(), swap=Swap(to="b", step=STEP_LOADING, started=NOW))
    members = {"a": Member("a"), "b": Member("b", replicas=1, pods=1)}
    assert pool_phase(SPEC, state, members) == PHASE_SWAPPING
    assert pool_phase(SPEC, state, members, NOW + 10) == PHASE_SWAPPING
    assert pool_phase(SPEC, state, members, NOW + 61) == PHASE_DEGRADED


def _ready(state: PoolState, members: dict[str, Member], now: float) -> tuple[str, dict[str, Any]]:
    status = render_status(
        spec=SPEC,
        state=state,
        members=members,
        demand={},
        previous={},
        completed=None,
        generation=1,
        namespace="ns",
        now=now,
    )
    return status["phase"], next(c for c in status["conditions"] if c["type"] == CONDITION_READY)


def test_a_stalled_swap_says_what_the_target_waits_for_and_keeps_waiting() -> None:
    swap = Swap(to="b", step=STEP_LOADING, from_="a", started=NOW - 100, drained=NOW - 90, released=NOW - 80)
    state = PoolState(residents=(), swap=swap)
    waiting = "pod b-0 is Running but not Ready (ContainersNotReady)"
    members = {"a": Member("a"), "b": Member("b", replicas=1, pods=1, waiting=waiting)}
    phase, ready = _ready(state, members, NOW - 30)
    assert (phase, ready["reason"]) == (PHASE_SWAPPING, REASON_SWAP_IN_PROGRESS)
    phase, ready = _ready(state, members, NOW)
    assert (phase, ready["status"], ready["reason"]) == (PHASE_DEGRADED, "False", REASON_SWAP_STALLED)
    assert "b has been Loading for 80s" in ready["message"] and waiting in ready["message"]
    # the planner keeps waiting: the swap stays, the old member is not brought back, the target stays up
    d = plan(SPEC, state, members, {"a": NOW}, NOW, {"a": IdleResult(IDLE)})
    assert d.state.swap == swap and d.replicas == {} and d.requeue_after is not None


# -- members removed from spec.members ------------------------------------------------------------------------


def test_former_members_come_from_the_status() -> None:
    pool = {
        "spec": {"members": [{"modelServingRef": {"name": "b"}}]},
        "status": {
            "members": [{"name": "a"}, {"name": "b"}, {"name": "x"}, {}],
            "residentMembers": ["y", "b"],
            "swap": {"to": "b", "from": "z", "step": STEP_RELEASING},
        },
    }
    assert former_members(pool, parse_spec(pool)) == ("a", "x", "y", "z")
    assert former_members({"spec": {}}, parse_spec({})) == ()


def test_parse_spec_reads_the_swap_budget() -> None:
    assert parse_spec({"spec": {"swapBudget": "90s"}}).swap_budget == 90.0
    assert parse_spec({"spec": {"swapBudget": "1m30s"}}).swap_budget == 90.0
    for junk in ("0s", "-5s", "soon", 12):
        assert parse_spec({"spec": {"swapBudget": junk}}).swap_budget == 300.0
    assert parse_spec({}).swap_budget == 300.0


def test_a_removed_member_still_up_holds_the_slot_and_is_not_scaled() -> None:
    spec = PoolSpec(members=("b",), default="b")  # "a" was removed while resident
    members = {"a": Member("a", replicas=1, pods=1, ready_pods=1), "b": Member("b")}
    d = plan(spec, PoolState(residents=("a",)), members, {}, NOW)
    assert d.state.residents == () and d.state.swap == Swap(to="b", step=STEP_LOADING, started=NOW)
    assert d.replicas == {}  # neither a scale-down of a (not ours any more) nor a scale-up of b
    status = render_status(
        spec=spec,
        state=d.state,
        members=members,
        demand={},
        previous={},
        completed=None,
        generation=1,
        namespace="ns",
        now=NOW,
        former=("a",),
    )
    assert [m["name"] for m in status["members"]] == ["b", "a"]
    # terminating pods still hold it; only when they are gone does b come up, and a leaves the status
    members["a"] = Member("a", replicas=0, pods=1)
    assert plan(spec, d.state, members, {}, NOW + 1).replicas == {}
    members["a"] = Member("a")
    assert plan(spec, d.state, members, {}, NOW + 2).replicas == {"b": 1}
    status = render_status(
        spec=spec,
        state=d.state,
        members=members,
        demand={},
        previous={},
        completed=None,
        generation=1,
        namespace="ns",
        now=NOW + 2,
        former=("a",),
    )
    assert [m["name"] for m in status["members"]] == ["b"]


@settings(max_examples=150, deadline=None)
@given(
    slots=st.integers(min_value=1, max_value=2),
    count=st.integers(min_value=2, max_value=4),
    data=st.data(),
)
def test_removing_members_never_puts_more_than_slots_up(slots: int, count: int, data: st.DataObject) -> None:
    """Members leave (and rejoin) ``spec.members`` at random while up; a former one is observed until gone."""
    names = tuple(f"m{i}" for i in range(count))
    replicas = {n: 0 for n in names}
    pods = {n: 0 for n in names}
    ready = {n: False for n in names}
    listed = set(names)
    state = PoolState()
    released: dict[str, float] = {}
    demand: dict[str, float] = {}
    now = NOW
    for _ in range(40):
        now += data.draw(st.floats(min_value=0.5, max_value=5))
        for n in data.draw(st.lists(st.sampled_from(names), max_size=2)):
            demand[n] = now
        if data.draw(st.booleans()):
            listed ^= {data.draw(st.sampled_from(names))}
        spec = PoolSpec(members=tuple(n for n in names if n in listed), slots=slots)
        members = {n: Member(n, replicas=replicas[n], pods=pods[n], ready_pods=int(ready[n])) for n in names}
        decision = plan(spec, state, members, demand, now, released=released)
        if decision.needs_probe:
            decision = plan(
                spec,
                state,
                members,
                demand,
                now,
                dict.fromkeys(decision.needs_probe, IdleResult(IDLE)),
                released=released,
            )
        released.update(decision.released)
        state = decision.state
        assert set(decision.replicas) <= listed, "a removed member's replicas were written"
        for n, r in decision.replicas.items():
            replicas[n] = r
            assert sum(1 for m in names if replicas[m] > 0 or pods[m] > 0) <= slots
        for n in data.draw(st.lists(st.sampled_from(names), unique=True)):
            if n not in listed and data.draw(st.booleans()):
                replicas[n] = 0  # someone scales a removed member down (the pool no longer does)
            if replicas[n] > pods[n]:
                pods[n] += 1
            elif pods[n] and replicas[n] and not ready[n]:
                ready[n] = True
            elif replicas[n] < pods[n]:
                pods[n] -= 1
                ready[n] = False
        assert sum(1 for m in names if replicas[m] > 0 or pods[m] > 0) <= slots
