"""Idle verdicts (fail closed) and the rendered status of a pool."""

from __future__ import annotations

import pytest

from kthena_py.api.modelpool import (
    CONDITION_MEMBERS_VALID,
    CONDITION_READY,
    CONDITION_SLOT_ALLOCATED,
    CONDITION_SWAP_DEFERRED,
    PHASE_DEGRADED,
    PHASE_PENDING,
    PHASE_READY,
    PHASE_SWAPPING,
    REASON_MEMBER_MISSING,
    REASON_NODE_SELECTOR_MISMATCH,
    REASON_PODS_BUSY,
    STEP_DRAINING,
)
from kthena_py.plan.modelpool.idle import BUSY, FAILED, IDLE, member_verdict
from kthena_py.plan.modelpool.status import pool_phase, render_status
from kthena_py.plan.modelpool.swap import CompletedSwap
from kthena_py.plan.modelpool.view import Member, PoolSpec, PoolState, Swap, parse_spec, parse_state

NOW = 1_796_295_600.0


@pytest.mark.parametrize(
    ("probes", "verdict"),
    [
        ({}, IDLE),
        ({"p1": 0.0, "p2": 0.0}, IDLE),
        ({"p1": 0.0, "p2": 3.0}, BUSY),
        ({"p1": "timeout", "p2": 0.0}, FAILED),
        ({"p1": "timeout", "p2": 1.0}, BUSY),
        ({"p1": float("nan")}, FAILED),
        ({"p1": -1.0}, FAILED),
    ],
)
def test_member_verdict_fails_closed(probes: dict[str, float | str], verdict: str) -> None:
    assert member_verdict(probes).verdict == verdict


def test_parse_spec_and_state_defaults_and_junk() -> None:
    pool = {
        "spec": {
            "members": [{"modelServingRef": {"name": "a"}}, {"modelServingRef": {"name": "a"}}, {}, "x"],
            "default": "zz",
            "slots": 0,
            "idleCheck": {"port": 70000, "path": "metrics", "metrics": []},
        },
        "status": {
            "residentMembers": ["a", "", 3, "a"],
            "swap": {"to": "b", "step": "Nope"},
            "conditions": [{"type": CONDITION_SWAP_DEFERRED, "status": "True", "reason": REASON_PODS_BUSY}],
        },
    }
    spec = parse_spec(pool)
    assert spec == PoolSpec(members=("a",))
    state = parse_state(pool)
    assert state.residents == ("a",) and state.swap is None and state.deferred_reason == REASON_PODS_BUSY
    assert parse_state({}).residents is None


def test_phases() -> None:
    spec = PoolSpec(members=("a", "b"))
    ready = {"a": Member("a", replicas=1, pods=1, ready_pods=1), "b": Member("b")}
    assert pool_phase(spec, PoolState(residents=("a",)), ready) == PHASE_READY
    assert pool_phase(spec, PoolState(residents=()), ready) == PHASE_PENDING
    swapping = PoolState(residents=("a",), swap=Swap(to="b", step=STEP_DRAINING))
    assert pool_phase(spec, swapping, ready) == PHASE_SWAPPING
    missing = {**ready, "b": Member("b", exists=False)}
    assert pool_phase(spec, PoolState(residents=("a",)), missing) == PHASE_DEGRADED


def _conditions(status: dict[str, object]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in status["conditions"]}  # type: ignore[attr-defined,index]


def test_render_status_fields_and_conditions() -> None:
    spec = PoolSpec(members=("a", "b"), node_selector=(("pool", "x"),))
    members = {
        "a": Member("a", replicas=1, pods=1, ready_pods=1),
        "b": Member("b", selects_pool_nodes=False),
    }
    state = PoolState(
        residents=("a",),
        swap=Swap(to="b", step=STEP_DRAINING, from_="a", started=NOW),
        deferred_reason=REASON_PODS_BUSY,
        deferred_message="busy",
    )
    done = CompletedSwap(to="a", from_=None, started=NOW - 10, drained=None, released=None, ready=NOW - 8.5)
    status = render_status(
        spec=spec,
        state=state,
        members=members,
        demand={"b": NOW},
        previous={},
        completed=done,
        generation=3,
        namespace="ns",
        now=NOW,
    )
    assert status["phase"] == PHASE_SWAPPING
    assert status["residentMember"] == "a" and status["residentMembers"] == ["a"]
    assert status["pendingMember"] == "b" and status["evictingMember"] == "a"
    assert status["swap"] == {"from": "a", "to": "b", "step": STEP_DRAINING, "started": "2026-12-03T11:00:00.000Z"}
    assert status["lastSwap"]["durationSeconds"] == 1.5 and "from" not in status["lastSwap"]
    assert status["members"][1] == {
        "name": "b",
        "phase": "Stopped",
        "resident": False,
        "replicas": 0,
        "lastRequestTime": "2026-12-03T11:00:00.000Z",
    }
    conditions = _conditions(status)
    assert conditions[CONDITION_SWAP_DEFERRED]["status"] == "True"
    assert conditions[CONDITION_MEMBERS_VALID]["reason"] == REASON_NODE_SELECTOR_MISMATCH
    assert conditions[CONDITION_SLOT_ALLOCATED]["status"] == "True"
    assert conditions[CONDITION_READY]["status"] == "False"
    assert all(c["observedGeneration"] == 3 for c in conditions.values())
    # a condition keeps its transition time while its status holds
    later = render_status(
        spec=spec,
        state=state,
        members={**members, "b": Member("b", exists=False)},
        demand={},
        previous=status,
        completed=None,
        generation=3,
        namespace="ns",
        now=NOW + 100,
    )
    again = _conditions(later)
    assert (
        again[CONDITION_SWAP_DEFERRED]["lastTransitionTime"]
        == conditions[CONDITION_SWAP_DEFERRED]["lastTransitionTime"]
    )
    assert again[CONDITION_MEMBERS_VALID]["reason"] == REASON_MEMBER_MISSING
    assert later["lastSwap"] == status["lastSwap"]
