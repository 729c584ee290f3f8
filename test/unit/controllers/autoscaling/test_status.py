"""Conditions keep their transition time; the status is written only when it changes."""

from __future__ import annotations

from kthena_py.controllers.autoscaling.status import (
    ConditionUpdate,
    build_status,
    merge_conditions,
    rfc3339,
    scaling_entry,
    write_status,
)
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES
from kthena_py.testing.fake import FakeKube

from .conftest import policy


def test_transition_time_moves_only_with_the_status() -> None:
    old = [
        {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "", "lastTransitionTime": "T0"},
        {"type": "Custom", "status": "True", "reason": "Mine", "message": "", "lastTransitionTime": "T0"},
    ]
    same = merge_conditions(old, [ConditionUpdate("Ready", "True", "Reconciled", "again")], 2, "T1")
    assert (
        same[0]["lastTransitionTime"] == "T0" and same[0]["message"] == "again" and same[0]["observedGeneration"] == 2
    )
    assert same[1] == old[1]
    flipped = merge_conditions(old, [ConditionUpdate("Ready", "False", "ScaleFailed", "x")], 2, "T1")
    assert flipped[0]["lastTransitionTime"] == "T1"
    added = merge_conditions([], [ConditionUpdate("TargetFound", "True", "TargetFound", "")], 1, "T1")
    assert added == [
        {
            "type": "TargetFound",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": "T1",
            "reason": "TargetFound",
            "message": "",
        }
    ]


def test_build_status_keeps_one_target_field() -> None:
    old = {"disaggregatedStatus": {"roles": []}, "conditions": []}
    status = build_status(old, generation=3, conditions=[], now="T", target={"homogeneousStatus": {"x": 1}})
    assert status == {"observedGeneration": 3, "conditions": [], "homogeneousStatus": {"x": 1}}
    kept = build_status(old, generation=3, conditions=[], now="T", target=None)
    assert kept["disaggregatedStatus"] == {"roles": []}
    assert "disaggregatedStatus" not in build_status(old, generation=3, conditions=[], now="T", target={})


def test_scaling_entry_keeps_last_scale_time() -> None:
    previous = {"lastScaleTime": "2026-01-01T00:00:00Z"}
    assert (
        scaling_entry("a", 1, 2, "Stable", previous=previous, scaled_at=None)["lastScaleTime"]
        == previous["lastScaleTime"]
    )
    assert scaling_entry(None, 1, 2, "Panic", previous=previous, scaled_at="NOW")["lastScaleTime"] == "NOW"
    assert "lastScaleTime" not in scaling_entry("a", 1, 1, "Stable", previous=None, scaled_at=None)
    assert rfc3339(0) == "1970-01-01T00:00:00Z"


async def test_write_status_only_on_change() -> None:
    kube = FakeKube()
    obj = policy("p", {})
    obj["status"] = {"observedGeneration": 1, "homogeneousStatus": {"currentReplicas": 1}}
    kube.put(AUTOSCALINGPOLICIES, obj)
    assert not await write_status(kube, obj, dict(obj["status"]), "fm")
    assert await write_status(kube, obj, {"observedGeneration": 2}, "fm")
    [call] = kube.calls
    assert (call.verb, call.subresource, call.options["field_manager"]) == ("patch", "status", "fm")
    assert call.body == {"metadata": {"uid": "uid-p"}, "status": {"homogeneousStatus": None, "observedGeneration": 2}}
    assert (kube.peek(AUTOSCALINGPOLICIES, "p", "ns") or {})["status"] == {"observedGeneration": 2}


async def test_write_status_of_a_deleted_policy_is_no_write() -> None:
    kube = FakeKube()
    obj = policy("p", {})
    assert not await write_status(kube, obj, {"observedGeneration": 1}, "fm")  # NotFound: the policy is gone
    assert [c.verb for c in kube.calls] == ["patch"]
