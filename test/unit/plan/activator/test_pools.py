"""ModelPool members in the activator's directory: their pool, hold budget, no wake-up, and the 503's words."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.modelpool import (
    CONDITION_SWAP_DEFERRED,
    PHASE_READY,
    PHASE_SWAPPING,
    REASON_IDLE_CHECK_FAILED,
    REASON_PODS_BUSY,
    STEP_DRAINING,
    STEP_LOADING,
)
from kthena_py.plan.activator.directory import build_directory
from kthena_py.plan.activator.pools import DEFAULT_SWAP_BUDGET, PoolRef, pool_members, pool_reason, swap_budget_of
from kthena_py.plan.activator.scaling import needs_wake
from kthena_py.plan.activator.state import SCALED_TO_ZERO, desired_state
from kthena_py.vocab.labels import ACTIVATOR_HOLD_BUDGET, ACTIVATOR_SCALE_FROM_ZERO

NS = "ns"


def pool(
    name: str, members: list[str], *, namespace: str = NS, budget: str | None = None, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"members": [{"modelServingRef": {"name": m}} for m in members]}
    if budget is not None:
        spec["swapBudget"] = budget
    return {"metadata": {"name": name, "namespace": namespace, **extra}, "spec": spec}


def ms(name: str, *, replicas: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"replicas": replicas, "template": {"roles": []}},
    }


@pytest.mark.parametrize(
    ("budget", "seconds", "problem"),
    [
        (None, 300.0, False),
        ("2s", 2.0, False),
        ("5m", 300.0, False),
        ("1.5m", 90.0, False),
        ("0s", DEFAULT_SWAP_BUDGET, True),
        ("-3s", DEFAULT_SWAP_BUDGET, True),
        ("soon", DEFAULT_SWAP_BUDGET, True),
    ],
)
def test_swap_budget(budget: str | None, seconds: float, problem: bool) -> None:
    value, why = swap_budget_of(pool("p", ["a"], budget=budget))
    assert value == seconds
    assert (why is not None) is problem
    if why:
        assert "ModelPool ns/p" in why and "swapBudget" in why


def test_members_map_to_their_pool() -> None:
    members, problems = pool_members([pool("p", ["a", "b"], budget="20s"), pool("q", ["c"], namespace="other")])
    assert members == {
        "ns/a": PoolRef(NS, "p", 20.0),
        "ns/b": PoolRef(NS, "p", 20.0),
        "other/c": PoolRef("other", "q", 300.0),
    }
    assert problems == ()


def test_a_modelserving_in_two_pools_belongs_to_the_first_and_is_reported() -> None:
    members, problems = pool_members([pool("zz", ["a"]), pool("aa", ["a", "b"], budget="9s")])
    assert members["ns/a"] == PoolRef(NS, "aa", 9.0)
    assert len(problems) == 1 and "ns/a" in problems[0] and "ns/aa" in problems[0] and "ns/zz" in problems[0]


def test_a_pool_being_deleted_has_no_members() -> None:
    members, _ = pool_members([pool("p", ["a"], deletionTimestamp="2026-01-01T00:00:00Z")])
    assert members == {}


names = st.sampled_from(["a", "b", "c", "d"])


@given(
    pools=st.lists(
        st.tuples(st.sampled_from(["p", "q", "r"]), st.lists(names, max_size=4)), max_size=4, unique_by=lambda t: t[0]
    )
)
def test_every_listed_member_has_exactly_one_pool_that_lists_it(pools: list[tuple[str, list[str]]]) -> None:
    members, problems = pool_members([pool(name, listed) for name, listed in pools])
    listed = {m for _, ms_ in pools for m in ms_}
    assert set(members) == {f"{NS}/{m}" for m in listed}
    for key, ref in members.items():
        member = key.split("/", 1)[1]
        owners = sorted(name for name, ms_ in pools if member in ms_)
        assert ref.name == owners[0]
    assert len(problems) == sum(len({n for n, ms_ in pools if m in ms_}) - 1 for m in listed)


def test_a_member_is_held_up_to_the_swap_budget_and_never_woken() -> None:
    directory = build_directory(
        [
            ms("a", annotations={ACTIVATOR_HOLD_BUDGET: "5s"}),
            ms("b", annotations={ACTIVATOR_SCALE_FROM_ZERO: "true"}),
            ms("solo", annotations={ACTIVATOR_SCALE_FROM_ZERO: "true", ACTIVATOR_HOLD_BUDGET: "7s"}),
            ms("cold"),
        ],
        [],
        120.0,
        pools=[pool("p", ["a", "b"], budget="45s")],
    )
    a, b, solo, cold = (directory.resolve(n) for n in ("a", "b", "solo", "cold"))
    assert a is not None and b is not None and solo is not None and cold is not None
    assert a.pool == b.pool == PoolRef(NS, "p", 45.0)
    assert (a.hold_budget, b.hold_budget) == (45.0, 45.0)  # the pool's budget, not the annotation's
    assert a.holds and b.holds and not a.scale_from_zero and not b.scale_from_zero
    assert not needs_wake(a.replicas, a.scale_from_zero) and not needs_wake(b.replicas, b.scale_from_zero)
    assert any("ns/b" in p and "ignored" in p for p in directory.problems)
    # Outside a pool nothing changes.
    assert solo.pool is None and solo.scale_from_zero and solo.hold_budget == 7.0 and solo.holds
    assert cold.pool is None and not cold.holds


def test_the_state_annotation_is_never_written_for_a_member() -> None:
    opted = ms("b", annotations={ACTIVATOR_SCALE_FROM_ZERO: "true"})
    assert desired_state(opted, []) == SCALED_TO_ZERO
    assert desired_state(opted, [], pooled=True) is None


def status(**fields: Any) -> dict[str, Any]:
    return pool("p", ["a", "b"]) | {"status": fields}


def deferred(reason: str, message: str) -> dict[str, Any]:
    return {"type": CONDITION_SWAP_DEFERRED, "status": "True", "reason": reason, "message": message}


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        (None, ["the ModelPool no longer exists"]),
        (pool("p", ["a", "b"]), ["ModelPool ns/p", "phase unknown", "no member resident", "b not resident"]),
        (
            status(phase=PHASE_READY, residentMember="a", residentMembers=["a"]),
            ["phase Ready", "resident a", "b not resident and no swap started"],
        ),
        (
            status(
                phase=PHASE_SWAPPING,
                residentMember="a",
                swap={"from": "a", "to": "b", "step": STEP_DRAINING},
                conditions=[deferred(REASON_PODS_BUSY, "a: 3 requests running or waiting")],
            ),
            ["phase Swapping", "swap a -> b at step Draining", "SwapDeferred PodsBusy: a: 3 requests running"],
        ),
        (
            status(
                phase=PHASE_SWAPPING,
                residentMember="a",
                conditions=[deferred(REASON_IDLE_CHECK_FAILED, "a-0: connection refused")],
            ),
            ["SwapDeferred IdleCheckFailed: a-0: connection refused"],
        ),
        (status(phase=PHASE_SWAPPING, swap={"to": "b", "step": STEP_LOADING}), ["swap loading b at step Loading"]),
        (
            status(
                phase=PHASE_READY,
                residentMember="a",
                conditions=[deferred(REASON_PODS_BUSY, "x") | {"status": "False"}],
            ),
            ["phase Ready"],
        ),
        (status(phase=PHASE_READY, residentMembers=["a", "c"]), ["resident a, c"]),
    ],
)
def test_pool_reason(obj: dict[str, Any] | None, words: list[str]) -> None:
    text = pool_reason(obj, "b")
    for word in words:
        assert word in text, text
    if obj is not None and not any("SwapDeferred" in w for w in words):
        assert CONDITION_SWAP_DEFERRED not in text


@given(
    st.dictionaries(
        st.sampled_from(["phase", "residentMember", "residentMembers", "swap", "conditions", "pendingMember"]),
        st.none()
        | st.integers()
        | st.text(max_size=5)
        | st.lists(st.text(max_size=3), max_size=2)
        | st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
    )
)
def test_pool_reason_never_raises_on_a_malformed_status(fields: dict[str, Any]) -> None:
    assert pool_reason(status(**fields), "b").startswith("ModelPool ns/p: ")
