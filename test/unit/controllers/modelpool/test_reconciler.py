"""The pool reconciler over FakeKube: intent recorded before any replica write, idle checks, status patches."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import pytest

from kthena_py.api.modelpool import (
    CONDITION_MEMBERS_VALID,
    CONDITION_READY,
    CONDITION_SWAP_DEFERRED,
    PHASE_DEGRADED,
    REASON_MEMBER_AUTOSCALED,
    REASON_MEMBER_IN_ANOTHER_POOL,
    REASON_PODS_BUSY,
    STEP_RELEASING,
)
from kthena_py.controllers.modelpool.apply import FIELD_MANAGER, status_patch
from kthena_py.controllers.modelpool.idlecheck import IdleProber, load_of
from kthena_py.controllers.modelpool.reconciler import PoolReconciler
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELPOOLS, MODELSERVINGS
from kthena_py.kube import KubeObject, ServerError
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelpool.demand import demand_annotation, format_demand_time, released_annotation
from kthena_py.plan.modelpool.idle import BUSY, IDLE, IdleResult
from kthena_py.plan.modelpool.view import PoolSpec
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.testing.fake.faults import refuse
from kthena_py.vocab.conditions import REASON_SWAP_STALLED
from kthena_py.vocab.labels import SERVING_ENTRY, SERVING_NAME

NS = "ns"


class FixedProber(IdleProber):
    def __init__(self, verdict: str) -> None:
        self.verdict_ = verdict
        self.asked: list[str] = []

    async def verdict(self, spec: PoolSpec, serving: KubeObject, pods: Iterable[KubeObject]) -> IdleResult:
        self.asked.append(serving["metadata"]["name"])
        return IdleResult(self.verdict_, "fixed")  # type: ignore[arg-type]


def cluster(now: float) -> FakeKube:
    kube = FakeKube()
    for name, replicas in (("alpha", 1), ("beta", 0)):
        kube.put(MODELSERVINGS, {"metadata": {"name": name, "namespace": NS}, "spec": {"replicas": replicas}})
    kube.put(
        PODS,
        {
            "metadata": {
                "name": "alpha-0-main-0-0",
                "namespace": NS,
                "labels": {SERVING_NAME: "alpha", SERVING_ENTRY: "true"},
            },
            "status": {
                "phase": "Running",
                "podIP": "127.100.0.9",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    kube.put(
        MODELPOOLS,
        {
            "metadata": {
                "name": "pool",
                "namespace": NS,
                "annotations": {demand_annotation("beta"): format_demand_time(now - 1)},
            },
            "spec": {"members": [{"modelServingRef": {"name": "alpha"}}, {"modelServingRef": {"name": "beta"}}]},
            "status": {"residentMembers": ["alpha"], "residentMember": "alpha"},
        },
    )
    return kube


async def test_intent_is_recorded_before_the_victim_is_scaled_down() -> None:
    now = time.time()
    kube = cluster(now)
    events = RecordedEvents()
    reconciler = PoolReconciler(kube, events, FixedProber(IDLE), clock=lambda: now)
    await reconciler.reconcile(Request(NS, "pool"))
    writes = [c for c in kube.calls if c.verb == "patch"]
    assert [(c.rt, c.subresource, c.name) for c in writes] == [
        (MODELPOOLS, None, "pool"),
        (MODELPOOLS, "status", "pool"),
        (MODELSERVINGS, "scale", "alpha"),
    ]
    annotations = kube.peek(MODELPOOLS, "pool", NS)["metadata"]["annotations"]  # type: ignore[index]
    assert annotations[released_annotation("alpha")] == format_demand_time(now)
    assert all(c.options.get("field_manager") == FIELD_MANAGER for c in writes)
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    assert status["swap"]["step"] == STEP_RELEASING and status["swap"]["from"] == "alpha"
    assert status["residentMembers"] == [] and status["pendingMember"] == "beta"
    assert kube.peek(MODELSERVINGS, "alpha", NS)["spec"]["replicas"] == 0  # type: ignore[index]
    assert "MemberReleased" in [e.reason for e in events.events]


async def test_a_failed_status_write_makes_no_replica_write() -> None:
    now = time.time()
    kube = cluster(now)
    kube.intercept(refuse(ServerError(500, "InternalError", "boom"), "patch", MODELPOOLS, subresource="status"))
    reconciler = PoolReconciler(kube, RecordedEvents(), FixedProber(IDLE), clock=lambda: now)
    with pytest.raises(ServerError):
        await reconciler.reconcile(Request(NS, "pool"))
    assert not [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]
    assert kube.peek(MODELSERVINGS, "alpha", NS)["spec"]["replicas"] == 1  # type: ignore[index]


async def test_a_busy_resident_defers_without_replica_writes() -> None:
    now = time.time()
    kube = cluster(now)
    prober = FixedProber(BUSY)
    result = await PoolReconciler(kube, RecordedEvents(), prober, clock=lambda: now).reconcile(Request(NS, "pool"))
    assert prober.asked == ["alpha"]
    assert not [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    deferred = next(c for c in status["conditions"] if c["type"] == CONDITION_SWAP_DEFERRED)
    assert deferred["status"] == "True" and deferred["reason"] == REASON_PODS_BUSY
    assert result is not None and result.requeue_after is not None and result.requeue_after <= 2


def test_status_patch_clears_what_is_gone_at_top_level_and_in_the_swap() -> None:
    current: dict[str, Any] = {
        "phase": "Swapping",
        "pendingMember": "b",
        "swap": {"to": "b", "from": "a", "step": "Releasing", "drained": "t"},
    }
    new: dict[str, Any] = {"phase": "Swapping", "swap": {"to": "c", "step": "Loading"}}
    assert status_patch(current, new) == {
        "pendingMember": None,
        "phase": "Swapping",
        "swap": {"from": None, "drained": None, "to": "c", "step": "Loading"},
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('# TYPE a gauge\na 2\n# TYPE b gauge\nb{x="1"} 1\nb{x="2"} 1\n', 4.0),
        ("# TYPE a gauge\na 0\n# TYPE b gauge\nb 0\n", 0.0),
        ("# TYPE a gauge\na 0\n", "metric b not exposed"),
        ("a{ 1\n", "unparsable"),
    ],
)
def test_load_of_sums_the_gauges_and_reports_what_is_missing(text: str, expected: float | str) -> None:
    got = load_of(text, ["a", "b"])
    if isinstance(expected, float):
        assert got == expected
    else:
        assert isinstance(got, str) and expected in got


async def test_a_completed_swap_is_counted_once_with_its_steps() -> None:
    now = float(int(time.time()))  # whole seconds: recorded times are truncated to milliseconds
    kube = cluster(now)
    pool = kube.peek(MODELPOOLS, "pool", NS)
    assert pool is not None
    kube.put(
        MODELPOOLS,
        {
            **pool,
            "metadata": {
                **pool["metadata"],
                "annotations": {
                    demand_annotation("beta"): format_demand_time(now - 10),  # served before beta was released
                    released_annotation("beta"): format_demand_time(now - 8),
                },
            },
            "status": {
                "residentMembers": [],
                "swap": {
                    "from": "beta",
                    "to": "alpha",
                    "step": "Loading",
                    "started": format_demand_time(now - 9),
                    "drained": format_demand_time(now - 8),
                    "released": format_demand_time(now - 5),
                },
            },
        },
    )
    labels = {"namespace": NS, "pool": "pool", "result": "completed"}
    before = REGISTRY.get_sample_value("kthena_modelpool_swaps_total", labels) or 0.0
    loading = REGISTRY.get_sample_value("kthena_modelpool_swap_seconds_count", {"step": "loading"}) or 0.0
    reconciler = PoolReconciler(kube, RecordedEvents(), FixedProber(IDLE), clock=lambda: now)
    await reconciler.reconcile(Request(NS, "pool"))
    await reconciler.reconcile(Request(NS, "pool"))
    assert REGISTRY.get_sample_value("kthena_modelpool_swaps_total", labels) == before + 1
    assert REGISTRY.get_sample_value("kthena_modelpool_swap_seconds_count", {"step": "loading"}) == loading + 1
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    assert status["residentMembers"] == ["alpha"] and status["lastSwap"]["durationSeconds"] == 9.0


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


async def test_an_older_pool_keeps_a_shared_member_and_a_policy_is_named() -> None:
    now = time.time()
    kube = cluster(now)
    pool = kube.peek(MODELPOOLS, "pool", NS)
    assert pool is not None
    kube.put(MODELPOOLS, {**pool, "metadata": {**pool["metadata"], "creationTimestamp": "2026-12-02T10:00:00Z"}})
    kube.put(
        MODELPOOLS,
        {
            "metadata": {"name": "older", "namespace": NS, "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"members": [{"modelServingRef": {"name": "alpha"}}]},
        },
    )
    kube.put(
        AUTOSCALINGPOLICIES,
        {
            "metadata": {"name": "hpa", "namespace": NS},
            "spec": {"homogeneousTarget": {"target": {"targetRef": {"kind": "ModelServing", "name": "beta"}}}},
        },
    )
    events = RecordedEvents()
    await PoolReconciler(kube, events, FixedProber(IDLE), clock=lambda: now).reconcile(Request(NS, "pool"))
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    valid = _condition(status, CONDITION_MEMBERS_VALID)
    assert valid["status"] == "False" and valid["reason"] == REASON_MEMBER_IN_ANOTHER_POOL
    assert "alpha" in valid["message"] and "older" in valid["message"]
    # alpha is the older pool's: not resident here, not scaled down; beta waits for alpha's pod to go
    assert status["residentMembers"] == [] and status["swap"]["to"] == "beta"
    assert not [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]
    # the older pool keeps alpha and names the younger pool
    await PoolReconciler(kube, events, FixedProber(IDLE), clock=lambda: now).reconcile(Request(NS, "older"))
    older_valid = _condition(kube.peek(MODELPOOLS, "older", NS)["status"], CONDITION_MEMBERS_VALID)  # type: ignore[index]
    assert older_valid["reason"] == REASON_MEMBER_IN_ANOTHER_POOL and "pool" in older_valid["message"]


async def test_a_policy_on_a_member_is_reported_and_the_pool_keeps_writing() -> None:
    now = time.time()
    kube = cluster(now)
    kube.put(MODELSERVINGS, {"metadata": {"name": "alpha", "namespace": NS}, "spec": {"replicas": 3}})
    kube.put(
        AUTOSCALINGPOLICIES,
        {
            "metadata": {"name": "hpa", "namespace": NS},
            "spec": {"homogeneousTarget": {"target": {"targetRef": {"kind": "ModelServing", "name": "alpha"}}}},
        },
    )
    events = RecordedEvents()
    reconciler = PoolReconciler(kube, events, FixedProber(BUSY), clock=lambda: now)
    await reconciler.reconcile(Request(NS, "pool"))
    await reconciler.reconcile(Request(NS, "pool"))
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    valid = _condition(status, CONDITION_MEMBERS_VALID)
    assert valid["reason"] == REASON_MEMBER_AUTOSCALED and "hpa" in valid["message"] and "alpha" in valid["message"]
    assert [e.reason for e in events.events].count(REASON_MEMBER_AUTOSCALED) == 1
    assert kube.peek(MODELSERVINGS, "alpha", NS)["spec"]["replicas"] == 1  # type: ignore[index]


async def test_a_removed_member_with_pods_still_holds_the_slot() -> None:
    now = time.time()
    kube = cluster(now)
    pool = kube.peek(MODELPOOLS, "pool", NS)
    assert pool is not None
    # alpha was resident and listed; the user removed it from spec.members while it still runs
    kube.put(
        MODELPOOLS,
        {
            **pool,
            "spec": {"members": [{"modelServingRef": {"name": "beta"}}], "default": "beta"},
            "status": {"residentMembers": ["alpha"], "members": [{"name": "alpha"}, {"name": "beta"}]},
        },
    )
    reconciler = PoolReconciler(kube, RecordedEvents(), FixedProber(IDLE), clock=lambda: now)
    await reconciler.reconcile(Request(NS, "pool"))
    assert not [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    assert [m["name"] for m in status["members"]] == ["beta", "alpha"] and status["swap"]["to"] == "beta"
    # a second pass still remembers alpha (from the status it wrote); once alpha is gone, beta comes up
    await reconciler.reconcile(Request(NS, "pool"))
    assert not [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]
    kube.put(MODELSERVINGS, {"metadata": {"name": "alpha", "namespace": NS}, "spec": {"replicas": 0}})
    await kube.delete(PODS, "alpha-0-main-0-0", NS)
    await reconciler.reconcile(Request(NS, "pool"))
    assert kube.peek(MODELSERVINGS, "beta", NS)["spec"]["replicas"] == 1  # type: ignore[index]
    assert kube.peek(MODELSERVINGS, "alpha", NS)["spec"]["replicas"] == 0  # type: ignore[index]
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    assert [m["name"] for m in status["members"]] == ["beta"]


async def test_a_target_loading_past_the_budget_degrades_the_pool_once() -> None:
    now = time.time()
    kube = cluster(now)
    pool = kube.peek(MODELPOOLS, "pool", NS)
    assert pool is not None
    kube.put(MODELSERVINGS, {"metadata": {"name": "alpha", "namespace": NS}, "spec": {"replicas": 0}})
    await kube.delete(PODS, "alpha-0-main-0-0", NS)
    kube.put(MODELSERVINGS, {"metadata": {"name": "beta", "namespace": NS}, "spec": {"replicas": 1}})
    kube.put(
        PODS,
        {
            "metadata": {
                "name": "beta-0-main-0-0",
                "namespace": NS,
                "labels": {SERVING_NAME: "beta", SERVING_ENTRY: "true"},
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            },
        },
    )
    swap = {"from": "alpha", "to": "beta", "step": "Loading", "started": format_demand_time(now - 100)}
    swap |= {"drained": format_demand_time(now - 95), "released": format_demand_time(now - 90)}
    kube.put(
        MODELPOOLS,
        {**pool, "spec": {**pool["spec"], "swapBudget": "60s"}, "status": {"residentMembers": [], "swap": swap}},
    )
    events = RecordedEvents()
    reconciler = PoolReconciler(kube, events, FixedProber(IDLE), clock=lambda: now)
    await reconciler.reconcile(Request(NS, "pool"))
    await reconciler.reconcile(Request(NS, "pool"))
    status = kube.peek(MODELPOOLS, "pool", NS)["status"]  # type: ignore[index]
    ready = _condition(status, CONDITION_READY)
    assert status["phase"] == PHASE_DEGRADED and ready["reason"] == REASON_SWAP_STALLED
    assert "beta-0-main-0-0" in ready["message"] and "ContainersNotReady" in ready["message"]
    assert status["swap"]["to"] == "beta" and status["swap"]["step"] == "Loading"
    assert [e.reason for e in events.events].count(REASON_SWAP_STALLED) == 1
    assert kube.peek(MODELSERVINGS, "alpha", NS)["spec"]["replicas"] == 0  # type: ignore[index]
