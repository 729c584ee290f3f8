"""Coordinated role rollouts: the arithmetic (table), fleets (P/D with maxSkew and dependencies) and properties."""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import revision_data, role_template_hash
from kthena_py.plan.modelserving.rollout.coordination import (
    REASON_DEPENDENCY,
    REASON_RETAINED,
    REASON_SKEW,
    RoleCounts,
    coordinate,
)
from kthena_py.plan.modelserving.rollout.rollout import plan_rollout

from .builders import VOLCANO, ms_doc, parse, ref_of, role_doc
from .fleet import Fleet

Q = Fraction(1, 4)


def _counts(role: str, n: int, ready: int, started: int, candidates: int, **kw: Any) -> RoleCounts:
    ordinals = tuple(range(n - 1, n - 1 - candidates, -1))
    return RoleCounts(role, n, ready, started, candidates=ordinals, ready_candidates=frozenset(ordinals), **kw)


# --- the arithmetic ---------------------------------------------------------------------------------------------


def test_skew_caps_the_started_instances_of_each_role() -> None:
    decision = coordinate([_counts("prefill", 4, 0, 0, 4), _counts("decode", 8, 0, 0, 8)], Q, {})
    assert decision.allowed == {"prefill": (3,), "decode": (7, 6)}  # floor(0.25*4)=1, floor(0.25*8)=2
    # prefill at 25% ready, decode at 1/8: decode is the baseline; prefill waits, decode may add one
    decision = coordinate([_counts("prefill", 4, 1, 1, 3), _counts("decode", 8, 1, 2, 6)], Q, {})
    assert decision.allowed["prefill"] == () and decision.allowed["decode"] == (7,)
    assert [h.reason for h in decision.holds] == [REASON_SKEW]
    assert "role prefill waits" in decision.holds[0].message and "maxSkew 25%" in decision.holds[0].message


def test_rounding_never_deadlocks_the_laggard_moves_alone() -> None:
    # one instance is 33% > maxSkew 25%: nobody may start by the rule; with nothing in flight the laggard moves
    decision = coordinate([_counts("a", 3, 0, 0, 3), _counts("b", 3, 0, 0, 3)], Q, {})
    assert decision.allowed == {"a": (2,), "b": ()}
    # but not while something is in flight
    decision = coordinate([_counts("a", 3, 0, 1, 2), _counts("b", 3, 0, 0, 3)], Q, {})
    assert decision.allowed == {"a": (), "b": ()}


def test_partition_capped_role_keeps_the_others_within_skew() -> None:
    # prefill 4 with 2 protected is done at 50%; decode may go up to 75% and no further
    decision = coordinate([_counts("prefill", 4, 2, 2, 0), _counts("decode", 8, 6, 6, 2)], Q, {})
    assert decision.allowed["decode"] == ()
    assert decision.holds and decision.holds[0].role == "decode"


def test_root_waits_for_its_dependency_closure() -> None:
    deps = {"decode": ["prefill"]}
    decision = coordinate([_counts("prefill", 4, 0, 0, 4), _counts("decode", 8, 0, 0, 8)], Q, deps)
    assert decision.allowed == {"prefill": (3,), "decode": ()}
    assert decision.holds[0].reason == REASON_DEPENDENCY and "prefill" in decision.holds[0].message
    decision = coordinate([_counts("prefill", 4, 1, 1, 3), _counts("decode", 8, 0, 0, 8)], Q, deps)
    assert decision.allowed["decode"] == (7, 6)
    # transitive: a -> b -> c, a waits for c too; the internal role b does not wait
    chain = {"a": ["b"], "b": ["c"]}
    roles = [_counts("a", 4, 0, 0, 4), _counts("b", 4, 1, 1, 3), _counts("c", 4, 0, 0, 4)]
    decision = coordinate(roles, Fraction(1), chain)
    assert decision.allowed["a"] == () and "c" in decision.holds[0].message
    assert decision.allowed["b"] and decision.allowed["c"]


def test_dependency_keeps_one_old_ready_replica_while_callers_are_old() -> None:
    deps = {"decode": ["prefill"]}
    roles = [
        _counts("prefill", 2, 1, 1, 1, old_ready=1, old_live=1),
        _counts("decode", 2, 1, 1, 1, old_ready=1, old_live=1),
    ]
    decision = coordinate(roles, Fraction(1), deps)
    assert decision.allowed == {"prefill": (), "decode": (1,)}
    assert decision.holds[0].reason == REASON_RETAINED
    # once decode has no old replica left, prefill's last old one may go
    roles[1] = _counts("decode", 2, 2, 2, 0, old_ready=0, old_live=0)
    assert coordinate(roles, Fraction(1), deps).allowed["prefill"] == (1,)


# --- fleets -------------------------------------------------------------------------------------------------------


def _pd(prefill: int = 4, decode: int = 8, skew: str = "25%", deps: bool = False, **extra: Any) -> dict[str, Any]:
    p = role_doc("prefill", replicas=prefill) | {"maxUnavailable": extra.get("p_unavailable", 2)}
    d = role_doc("decode", replicas=decode) | {"maxUnavailable": extra.get("d_unavailable", 4)}
    if "p_partition" in extra:
        p["partition"] = extra["p_partition"]
    doc = ms_doc(p, d, replicas=1)
    coordination: dict[str, Any] = {"maxSkew": skew}
    if deps:
        coordination["dependencies"] = [{"role": "decode", "dependsOn": ["prefill"]}]
    doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate", "roleCoordination": coordination}
    if extra.get("in_place"):
        doc["spec"]["rolloutStrategy"]["updateMethod"] = "InPlace"
    return doc


def _skews(fleet: Fleet) -> list[Fraction]:
    out = []
    for sample in fleet.samples:
        ratios = [Fraction(ready, n) for ready, n in sample.values()]
        out.append(max(ratios) - min(ratios))
    return out


def _started(doc: dict[str, Any]) -> Fleet:
    fleet = Fleet(doc)
    fleet.settle()
    return fleet


@pytest.mark.parametrize("in_place", [False, True])
def test_pd_rollout_stays_within_max_skew_at_every_step(in_place: bool) -> None:
    fleet = _started(_pd(in_place=in_place))
    fleet.set_image("img:2")
    fleet.sampling = True
    fleet.settle()
    skews = _skews(fleet)
    assert skews and max(skews) <= Q, max(skews)
    assert set(fleet.images().values()) == {"img:2"}
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]
    blocked = fleet.condition("CoordinatedRoleRolloutBlocked")
    assert blocked is not None and (blocked["status"], blocked["reason"]) == ("False", "RolloutComplete")


def test_uncoordinated_rollout_shows_the_skew_it_prevents() -> None:
    doc = _pd(p_unavailable=1, d_unavailable=4)  # prefill moves 25% a step, decode 50%
    del doc["spec"]["rolloutStrategy"]["roleCoordination"]
    fleet = _started(doc)
    fleet.set_image("img:2")
    fleet.sampling = True
    fleet.settle()
    assert max(_skews(fleet)) > Q


def test_decode_starts_only_after_prefill_has_target_ready_capacity() -> None:
    fleet = _started(_pd(deps=True))
    fleet.set_image("img:2")
    fleet.sampling = True
    first_decode_start: int | None = None
    data = revision_data(parse(fleet.doc).spec)
    decode_hash = role_template_hash(data, data.roles[1])
    for step in range(200):
        fleet.reconcile()
        decode_new = [
            p
            for n, p in fleet.cluster.pods().items()
            if "-decode-" in n and p["metadata"]["labels"][naming.LABEL_ROLE_TEMPLATE_HASH] == decode_hash
        ]
        decode_missing = len([n for n in fleet.cluster.pods() if "-decode-" in n]) < 8
        if first_decode_start is None and (decode_new or decode_missing):
            first_decode_start = step
            assert fleet.target_ready()["prefill"][0] >= 1
        if not fleet.tick() and not fleet.reconcile():
            break
    assert first_decode_start is not None
    held = [c for c in fleet.events if c[1] == "RoleUpdating" and "decode" in c[2]]
    assert held
    assert set(fleet.images().values()) == {"img:2"}


def test_stalled_role_blocks_the_others_with_the_condition_and_clears_on_recovery() -> None:
    fleet = _started(_pd(prefill=4, decode=8))
    fleet.set_image("img:bad", role=0)
    fleet.set_image("img:2", role=1)
    fleet.settle()
    blocked = fleet.condition("CoordinatedRoleRolloutBlocked")
    assert blocked is not None and blocked["status"] == "True" and blocked["reason"] == "SkewLimit", blocked
    assert "llama-0: role decode waits" in blocked["message"]
    target = fleet.target_ready()
    assert target["prefill"][0] == 0 and target["decode"][0] == 2  # decode held at maxSkew of 8
    condition = fleet.condition()
    assert condition is not None and condition["status"] == "True"
    # recovery: a good prefill image resumes both roles and clears the condition
    fleet.set_image("img:3", role=0)
    fleet.sampling = True
    fleet.settle()
    assert max(_skews(fleet)) <= Q
    blocked = fleet.condition("CoordinatedRoleRolloutBlocked")
    assert blocked is not None and blocked["status"] == "False" and blocked["reason"] == "RolloutComplete"
    images = fleet.images()
    assert {i for n, i in images.items() if "-prefill-" in n} == {"img:3"}
    assert {i for n, i in images.items() if "-decode-" in n} == {"img:2"}


def test_partition_makes_a_coordinated_canary() -> None:
    fleet = _started(_pd(prefill=4, decode=8, p_partition=2))
    fleet.set_image("img:2")
    fleet.sampling = True
    fleet.settle()
    assert max(_skews(fleet)) <= Q
    target = fleet.target_ready()
    assert target == {"prefill": (2, 4), "decode": (6, 8)}  # 50% and 50% + maxSkew
    blocked = fleet.condition("CoordinatedRoleRolloutBlocked")
    assert blocked is not None and blocked["status"] == "True"


def test_no_condition_without_coordination_or_rollout() -> None:
    fleet = _started(_pd())
    assert fleet.condition("CoordinatedRoleRolloutBlocked") is None
    doc = _pd()
    del doc["spec"]["rolloutStrategy"]["roleCoordination"]
    fleet = _started(doc)
    fleet.set_image("img:2")
    fleet.settle()
    assert fleet.condition("CoordinatedRoleRolloutBlocked") is None


# --- properties ---------------------------------------------------------------------------------------------------

EXAMPLES = int(os.environ.get("KTHENA_PY_HYPOTHESIS_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    prefill=st.integers(1, 5),
    decode=st.integers(1, 8),
    skew=st.sampled_from(["10%", "25%", "50%", "100%"]),
    p_unavailable=st.integers(1, 3),
    d_unavailable=st.integers(1, 4),
    deps=st.booleans(),
    in_place=st.booleans(),
    schedule=st.lists(st.lists(st.booleans(), max_size=14), max_size=30),
)
def test_skew_bound_at_every_step_and_progress(
    prefill: int,
    decode: int,
    skew: str,
    p_unavailable: int,
    d_unavailable: int,
    deps: bool,
    in_place: bool,
    schedule: list[list[bool]],
) -> None:
    doc = _pd(prefill, decode, skew, deps, p_unavailable=p_unavailable, d_unavailable=d_unavailable, in_place=in_place)
    if deps and prefill == 1:
        doc["spec"]["template"]["roles"][0]["maxSurge"] = 1  # a lone dependency needs room for old + new
    fleet = _started(doc)
    fleet.set_image("img:2")
    fleet.sampling = True
    for chosen in schedule:
        ms = parse(fleet.doc)
        plan = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
        fleet._run(plan)  # writes the status share when the plan neither creates nor deletes
        fleet.reconcile(rollout=False)
        pods = sorted(fleet.cluster.pods())
        fleet.tick(only={name for name, ok in zip(pods, chosen, strict=False) if ok})
    fleet.settle(rounds=400)
    bound = max(Fraction(int(skew[:-1]), 100), *(Fraction(1, n) for n in (prefill, decode)))
    assert max(_skews(fleet)) <= bound
    assert set(fleet.images().values()) == {"img:2"}
    status = fleet.doc["status"]
    assert status["currentRevision"] == status["updateRevision"]
    # (absent when every rollout step of this harness took something down and so wrote no status)
    assert (fleet.condition() or {"reason": "RolloutComplete"})["reason"] == "RolloutComplete"
    if in_place:
        assert set(fleet.patches.values()) <= {1}
