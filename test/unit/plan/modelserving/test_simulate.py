"""The rollout simulation behind ``kthena-py rollout plan``: step sequences, outcomes and availability."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.simulation import Readiness, simulate_rollout

from .builders import ms_doc, role_doc


def _group_doc(replicas: int, image: str = "img:1", **config: Any) -> dict[str, Any]:
    doc = ms_doc(role_doc("decode", workers=1, image=image), replicas=replicas)
    doc["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config}
    return doc


def _images(doc: dict[str, Any], image: str) -> dict[str, Any]:
    new = copy.deepcopy(doc)
    for role in new["spec"]["template"]["roles"]:
        for key in ("entryTemplate", "workerTemplate"):
            if key in role:
                role[key]["spec"]["containers"][0]["image"] = image
    return new


@dataclass
class Case:
    name: str
    replicas: int
    config: dict[str, Any]
    readiness: Readiness = field(default_factory=Readiness)
    take_down: list[list[str]] = field(default_factory=list)
    """Per step, the groups taken down (steps without any are left out)."""
    surge: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    outcome: str = "complete"
    min_available: int = 0
    protected: list[str] = field(default_factory=list)
    final_reason: str = "RolloutComplete"


CASES = [
    Case(
        "max unavailable 2 of 5: highest ordinals first, two at a time",
        5,
        {"maxUnavailable": 2},
        take_down=[["llama-4", "llama-3"], ["llama-2", "llama-1"], ["llama-0"]],
        min_available=3,
    ),
    Case(
        "partition canary: only the last group moves",
        4,
        {"partition": 3},
        take_down=[["llama-3"]],
        outcome="partition",
        min_available=3,
        protected=["llama-0", "llama-1", "llama-2"],
        final_reason="PartitionReached",
    ),
    Case(
        "surge 1, max unavailable 0: availability never drops, the surge group goes at the end",
        3,
        {"maxUnavailable": 0, "maxSurge": 1},
        take_down=[["llama-2"], ["llama-1"], ["llama-0"]],
        surge=["llama-3"],
        removed=["llama-3"],
        min_available=3,
    ),
    Case(
        "bad image: stalls with max unavailable groups down",
        6,
        {"maxUnavailable": 2},
        readiness=Readiness(update_revision=False),
        take_down=[["llama-5", "llama-4"]],
        outcome="stalled",
        min_available=4,
        final_reason="UpdateStalled",
    ),
    Case(
        "one unit ready per step: the rollout waits for the slow one",
        4,
        {"maxUnavailable": 2},
        readiness=Readiness(per_step=1),
        take_down=[["llama-3", "llama-2"], ["llama-1"], ["llama-0"]],
        min_available=2,
    ),
    Case(
        "a group that never comes back holds one unit of the budget",
        4,
        {"maxUnavailable": 2},
        readiness=Readiness(never=frozenset({"llama-3"})),
        take_down=[["llama-3", "llama-2"], ["llama-1"], ["llama-0"]],
        outcome="stalled",
        min_available=2,
        final_reason="GroupsUpdating",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rollout_plan_steps(case: Case) -> None:
    old = _group_doc(case.replicas, **case.config)
    report = simulate_rollout(old, _images(old, "img:2"), case.readiness)
    assert [list(s.take_down) for s in report.steps if s.take_down] == case.take_down
    assert [u.unit for s in report.steps for u in s.surge] == case.surge
    assert [u for s in report.steps for u in s.removed] == case.removed
    assert report.outcome == case.outcome
    assert report.min_available == case.min_available
    last = report.steps[-1]
    assert last.condition is not None and last.condition[1] == case.final_reason
    assert list(last.protected) == case.protected
    # every unit taken down comes back on the new revision in the same step
    for step in report.steps:
        assert sorted(u.unit for u in step.created) == sorted(step.take_down)
        assert {u.revision for u in step.created + step.surge} <= {report.new_revision}


def test_a_stall_names_the_stuck_pods_and_a_fix_is_not_needed_to_report_it() -> None:
    old = _group_doc(4, maxUnavailable=1)
    report = simulate_rollout(old, _images(old, "img:2"), Readiness(update_revision=False))
    condition = report.steps[-1].condition
    assert condition is not None and condition[:2] == ("True", "UpdateStalled")
    assert "llama-3 (pod llama-3-decode-0-0 ImagePullBackOff)" in condition[2]


def test_no_change_to_the_pods_is_complete_at_once() -> None:
    old = _group_doc(3)
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 3
    report = simulate_rollout(old, new)
    assert report.old_revision == report.new_revision
    assert report.outcome == "complete" and len(report.steps) == 1 and not report.steps[0].acted


def test_old_status_in_the_input_is_ignored() -> None:
    old = _group_doc(2)
    old["status"] = {"currentRevision": "nonsense", "replicas": 7}
    report = simulate_rollout(old, _images(old, "img:2"))
    assert report.outcome == "complete"
    assert [list(s.take_down) for s in report.steps if s.take_down] == [["llama-1"], ["llama-0"]]


def test_role_rolling_update_moves_one_role_per_its_own_budget() -> None:
    prefill = role_doc("prefill", replicas=3) | {"maxUnavailable": 1}
    old = ms_doc(prefill, role_doc("decode", workers=1), replicas=2)
    old["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    new = copy.deepcopy(old)
    new["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = "img:2"
    report = simulate_rollout(old, new)
    assert report.role_granularity and report.outcome == "complete"
    downs = [list(s.take_down) for s in report.steps if s.take_down]
    assert downs == [
        ["llama-0/prefill-2", "llama-1/prefill-2"],
        ["llama-0/prefill-1", "llama-1/prefill-1"],
        ["llama-0/prefill-0", "llama-1/prefill-0"],
    ]
    assert all("/decode-" not in unit for step in downs for unit in step)
    assert dict((r, low) for r, low, _ in report.min_role_ready) == {"prefill": 4, "decode": 2}


def test_same_input_same_report() -> None:
    old = _group_doc(4, maxUnavailable=2, maxSurge=1)
    assert simulate_rollout(old, _images(old, "img:2")) == simulate_rollout(old, _images(old, "img:2"))


@settings(max_examples=20, deadline=None)
@given(
    replicas=st.integers(1, 5),
    max_unavailable=st.integers(0, 3),
    max_surge=st.integers(0, 2),
    partition=st.integers(0, 5),
)
def test_rollouts_converge_within_the_budget(
    replicas: int, max_unavailable: int, max_surge: int, partition: int
) -> None:
    if max_unavailable == 0 and max_surge == 0:
        max_surge = 1  # both 0 is rejected at admission
    config = {"maxUnavailable": max_unavailable, "maxSurge": max_surge, "partition": partition}
    old = _group_doc(replicas, **config)
    report = simulate_rollout(old, _images(old, "img:2"))
    assert report.outcome == ("partition" if partition > 0 else "complete")
    assert report.min_available >= max(0, replicas - max_unavailable)
    moved = {unit for step in report.steps for unit in step.take_down}
    protected = {f"llama-{g}" for g in range(min(partition, replicas))}
    assert not moved & protected
    assert len(moved) == replicas - len(protected)
    # no more steps taking units down than the ideal, ceil(movable / per-step budget)
    per_step = max(1, max_unavailable + max_surge)
    assert sum(1 for s in report.steps if s.take_down) <= math.ceil(len(moved) / per_step) + 1


def test_in_place_rollout_is_planned_as_patches() -> None:
    old = _group_doc(4, maxUnavailable=2)
    old["spec"]["rolloutStrategy"]["updateMethod"] = "InPlace"
    report = simulate_rollout(old, _images(old, "img:2"))
    assert report.outcome == "complete"
    assert [list(s.patched) for s in report.steps if s.patched] == [["llama-3", "llama-2"], ["llama-1", "llama-0"]]
    assert not any(s.take_down or s.created for s in report.steps)
    assert report.min_available == 2


def test_coordinated_rollout_shows_the_holds() -> None:
    prefill = role_doc("prefill", replicas=4) | {"maxUnavailable": 2}
    decode = role_doc("decode", replicas=8) | {"maxUnavailable": 4}
    old = ms_doc(prefill, decode, replicas=1)
    old["spec"]["rolloutStrategy"] = {
        "type": "RoleRollingUpdate",
        "roleCoordination": {"maxSkew": "25%", "dependencies": [{"role": "decode", "dependsOn": ["prefill"]}]},
    }
    report = simulate_rollout(old, _images(old, "img:2"))
    assert report.outcome == "complete"
    first = next(s for s in report.steps if s.take_down)
    assert first.take_down == ("llama-0/prefill-3",)  # decode waits for prefill's target-version capacity
    assert any("decode waits for target-version Ready capacity of prefill" in h for h in first.held)
