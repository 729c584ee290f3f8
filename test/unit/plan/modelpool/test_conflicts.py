"""Members another writer claims: who keeps a member two pools list, and what MembersValid says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.modelpool import (
    CONDITION_MEMBERS_VALID,
    CONDITION_READY,
    PHASE_DEGRADED,
    PHASE_READY,
    REASON_MEMBER_MISSING,
    STEP_LOADING,
)
from kthena_py.plan.modelpool.conflicts import MemberConflicts, managed_spec, member_conflicts
from kthena_py.plan.modelpool.status import render_status
from kthena_py.plan.modelpool.swap import plan
from kthena_py.plan.modelpool.view import Member, PoolSpec, PoolState, Swap
from kthena_py.vocab.conditions import REASON_MEMBER_AUTOSCALED, REASON_MEMBER_IN_ANOTHER_POOL, REASON_MEMBERS_FOUND

NOW = 1_796_295_600.0


def pool(name: str, created: str | None, *members: str) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if created is not None:
        md["creationTimestamp"] = created
    return {"metadata": md, "spec": {"members": [{"modelServingRef": {"name": m}} for m in members]}}


def policy(name: str, target: str, kind: str = "ModelServing") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"homogeneousTarget": {"target": {"targetRef": {"kind": kind, "name": target}}}},
    }


EARLY, LATE = "2026-12-01T10:00:00Z", "2026-12-02T10:00:00Z"


@pytest.mark.parametrize(
    ("me", "others", "policies", "expected"),
    [
        pytest.param(pool("p", EARLY, "a", "b"), [], [], MemberConflicts(), id="alone"),
        pytest.param(
            pool("young", LATE, "a", "b"),
            [pool("old", EARLY, "a")],
            [],
            MemberConflicts(yielded={"a": "old"}),
            id="younger-yields",
        ),
        pytest.param(
            pool("old", EARLY, "a", "b"),
            [pool("young", LATE, "a"), pool("young2", LATE, "a", "c")],
            [],
            MemberConflicts(kept={"a": ("young", "young2")}),
            id="older-keeps",
        ),
        pytest.param(
            pool("b-pool", EARLY, "a"),
            [pool("a-pool", EARLY, "a")],
            [],
            MemberConflicts(yielded={"a": "a-pool"}),
            id="same-time-by-name",
        ),
        pytest.param(
            pool("a-pool", None, "a"),
            [pool("z-pool", LATE, "a")],
            [],
            MemberConflicts(yielded={"a": "z-pool"}),
            id="no-timestamp-is-newest",
        ),
        pytest.param(
            pool("p", EARLY, "a", "b"),
            [pool("p", EARLY, "a")],
            [policy("hpa", "b"), policy("hpa2", "b"), policy("other", "x"), policy("wrongkind", "a", "Deployment")],
            MemberConflicts(autoscaled={"b": ("hpa", "hpa2")}),
            id="policies-self-skipped",
        ),
    ],
)
def test_member_conflicts(
    me: dict[str, Any], others: list[dict[str, Any]], policies: list[dict[str, Any]], expected: MemberConflicts
) -> None:
    assert member_conflicts(me, [me, *others], policies) == expected


def test_managed_spec_drops_yielded_members_and_default() -> None:
    spec = PoolSpec(members=("a", "b"), default="a")
    assert managed_spec(spec, MemberConflicts(yielded={"a": "old"})) == PoolSpec(members=("b",), default=None)
    assert managed_spec(spec, MemberConflicts(autoscaled={"a": ("hpa",)})) == spec


def test_a_yielded_member_is_never_scaled_but_holds_its_slot() -> None:
    spec = PoolSpec(members=("a", "b"), default="b")
    managed = managed_spec(spec, MemberConflicts(yielded={"a": "old"}))
    members = {"a": Member("a", replicas=1, pods=1, ready_pods=1), "b": Member("b")}
    # the younger pool had adopted a: it drops it from its residents, does not scale it, and holds b back
    d = plan(managed, PoolState(residents=("a",)), members, {}, NOW)
    assert "a" not in (d.state.residents or ()) and "a" not in d.replicas
    assert d.state.swap == Swap(to="b", step=STEP_LOADING, started=NOW)
    assert d.replicas == {}
    # once the older pool took a down, b comes up
    gone = {**members, "a": Member("a")}
    assert plan(managed, d.state, gone, {}, NOW + 1).replicas == {"b": 1}


def _valid(spec: PoolSpec, members: dict[str, Member], conflicts: MemberConflicts) -> dict[str, str]:
    status = render_status(
        spec=spec,
        state=PoolState(residents=()),
        members=members,
        demand={},
        previous={},
        completed=None,
        generation=1,
        namespace="ns",
        now=NOW,
        conflicts=conflicts,
    )
    return next(c for c in status["conditions"] if c["type"] == CONDITION_MEMBERS_VALID)


SPEC = PoolSpec(members=("a", "b"))
FOUND = {"a": Member("a"), "b": Member("b")}


@pytest.mark.parametrize(
    ("members", "conflicts", "reason", "names"),
    [
        (FOUND, MemberConflicts(), REASON_MEMBERS_FOUND, []),
        (FOUND, MemberConflicts(yielded={"a": "old"}), REASON_MEMBER_IN_ANOTHER_POOL, ["a", "old", "older"]),
        (FOUND, MemberConflicts(kept={"b": ("young",)}), REASON_MEMBER_IN_ANOTHER_POOL, ["b", "young", "younger"]),
        (FOUND, MemberConflicts(autoscaled={"b": ("hpa",)}), REASON_MEMBER_AUTOSCALED, ["b", "hpa", "keeps writing"]),
        (
            FOUND,
            MemberConflicts(yielded={"a": "old"}, autoscaled={"b": ("hpa",)}),
            REASON_MEMBER_IN_ANOTHER_POOL,
            ["old"],
        ),
        (
            {"a": Member("a", exists=False), "b": Member("b")},
            MemberConflicts(autoscaled={"b": ("hpa",)}),
            REASON_MEMBER_MISSING,
            ["a"],
        ),
    ],
)
def test_members_valid_names_who_else_writes(
    members: dict[str, Member], conflicts: MemberConflicts, reason: str, names: list[str]
) -> None:
    condition = _valid(SPEC, members, conflicts)
    assert condition["reason"] == reason
    assert condition["status"] == ("True" if reason == REASON_MEMBERS_FOUND else "False")
    for name in names:
        assert name in condition["message"]


def _listed(obj: dict[str, Any]) -> set[str]:
    return {m["modelServingRef"]["name"] for m in obj["spec"]["members"]}


_NAMES = st.sampled_from(("p0", "p1", "p2", "p3"))
_MEMBERS = st.lists(st.sampled_from(("a", "b", "c")), min_size=1, max_size=3, unique=True)
_TIMES = st.sampled_from((EARLY, LATE, None))


@settings(max_examples=200, deadline=None)
@given(pools=st.dictionaries(_NAMES, st.tuples(_TIMES, _MEMBERS), min_size=1, max_size=4))
def test_every_member_is_managed_by_exactly_one_pool(pools: dict[str, tuple[str | None, list[str]]]) -> None:
    objects = [pool(name, created, *members) for name, (created, members) in pools.items()]
    managers: dict[str, list[str]] = {}
    for me in objects:
        conflicts = member_conflicts(me, objects, [])
        spec = PoolSpec(members=tuple(m["modelServingRef"]["name"] for m in me["spec"]["members"]))
        for member in managed_spec(spec, conflicts).members:
            managers.setdefault(member, []).append(me["metadata"]["name"])
        # a pool reports a conflict exactly for the members another pool lists too
        shared = {m for m in spec.members for other in objects if other is not me and m in _listed(other)}
        assert set(conflicts.yielded) | set(conflicts.kept) == shared
    listed = {m for _, members in pools.values() for m in members}
    assert set(managers) == listed
    assert all(len(owners) == 1 for owners in managers.values())


def test_a_conflict_degrades_the_phase_but_a_ready_resident_stays_ready() -> None:
    members = {"a": Member("a", replicas=1, pods=1, ready_pods=1), "b": Member("b")}
    for conflicts, phase in (
        (MemberConflicts(), PHASE_READY),
        (MemberConflicts(kept={"b": ("young",)}), PHASE_DEGRADED),
        (MemberConflicts(autoscaled={"a": ("hpa",)}), PHASE_DEGRADED),
    ):
        status = render_status(
            spec=SPEC,
            state=PoolState(residents=("a",)),
            members=members,
            demand={},
            previous={},
            completed=None,
            generation=1,
            namespace="ns",
            now=NOW,
            conflicts=conflicts,
        )
        ready = next(c for c in status["conditions"] if c["type"] == CONDITION_READY)
        assert status["phase"] == phase and ready["status"] == "True", (conflicts, ready)
