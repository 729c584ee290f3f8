"""The ``autoscaling-heterogeneous`` reconciler through FakeKube: the total, its split, partial failures."""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.autoscaling.heterogeneous import FIELD_MANAGER, HeterogeneousReconciler
from kthena_py.controllers.autoscaling.history import HISTORY_ANNOTATION
from kthena_py.controllers.autoscaling.homogeneous import TargetReconciler
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube import ServerError
from kthena_py.kube.resources import PODS
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake.faults import refuse

from .conftest import IPS, UNLIMITED, Scene, gauge, modelserving, pod, policy, sample

REQUEST = Request("ns", "h")


def two_targets(scene: Scene) -> None:
    """Kthena's controller vector: ms-a2 (cost 10, 1..5), ms-b2 (cost 20, 2..4), current 1 + 2, load 100 per pod."""
    spec: dict[str, Any] = {
        "tolerancePercent": 0,
        "metrics": [{"name": "load", "targetValue": "1"}],
        "behavior": UNLIMITED,
        "heterogeneousTarget": {
            "costExpansionRatePercent": 100,
            "params": [
                {
                    "cost": cost,
                    "minReplicas": low,
                    "maxReplicas": high,
                    "target": {"targetRef": {"name": name}, "metricSources": {"load": {"pod": {"port": scene.port}}}},
                }
                for name, cost, low, high in (("ms-a2", 10, 1, 5), ("ms-b2", 20, 2, 4))
            ],
        },
    }
    scene.put(MODELSERVINGS, modelserving("ms-a2", 1), modelserving("ms-b2", 2))
    scene.put(PODS, pod("a", IPS[0], ms="ms-a2"), pod("b", IPS[1], ms="ms-b2"))
    scene.put(AUTOSCALINGPOLICIES, policy("h", spec))
    scene.servers.bodies.update({IPS[0]: gauge("load", 100), IPS[1]: gauge("load", 100)})


async def test_the_total_then_its_split(scene: Scene) -> None:
    two_targets(scene)
    assert await TargetReconciler(scene.deps).reconcile(REQUEST) is None  # not this controller's policy
    assert scene.writes() == []
    await HeterogeneousReconciler(scene.deps).reconcile(REQUEST)
    assert sorted(scene.scales()) == [("ms-a2", 5), ("ms-b2", 4)]
    assert (scene.replicas("ms-a2"), scene.replicas("ms-b2")) == (5, 4)
    entries = {
        e["name"]: (e["currentReplicas"], e["desiredReplicas"]) for e in scene.status("h")["heterogeneousStatus"]
    }
    assert entries == {"ns/ms-a2": (1, 5), "ns/ms-b2": (2, 4)}
    assert "New total: 9 (was 3)" in scene.recorded()[-1][2]
    status_writes = [c for c in scene.kube.calls_of("patch", AUTOSCALINGPOLICIES) if c.subresource == "status"]
    assert [c.options["field_manager"] for c in status_writes] == [FIELD_MANAGER]
    labels = {"namespace": "ns", "policy": "h", "target": "ns/ms-b2"}
    assert sample("kthena_autoscaler_desired_replicas", labels) == 4


async def test_a_partial_failure_keeps_what_moved_and_the_next_pass_starts_from_the_cluster(scene: Scene) -> None:
    two_targets(scene)
    reconciler = HeterogeneousReconciler(scene.deps)
    refusal = refuse(ServerError(500, "InternalError", "etcd is down"), "patch", MODELSERVINGS, name="ms-b2")
    remove = scene.kube.intercept(refusal)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after
    assert len(refusal.refused) == 1
    assert (scene.replicas("ms-a2"), scene.replicas("ms-b2")) == (5, 2)
    assert scene.condition("Ready", "h") == ("False", "ScaleFailed")
    (moved,) = [e for e in scene.recorded() if e[1] == "SuccessfulRescale"]
    assert "ms-a2 1->5" in moved[2] and "ms-b2" not in moved[2]
    assert [e for e in scene.recorded() if e[0] == "Warning"] == [
        ("Warning", "FailedRescale", "cannot scale ns/ms-b2 to 4: 500 InternalError: etcd is down")
    ]
    assert HISTORY_ANNOTATION not in (scene.get(AUTOSCALINGPOLICIES, "h")["metadata"].get("annotations") or {})
    remove()
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert scene.scales()[-1] == ("ms-b2", 4)  # only the target that still has to move
    assert (scene.replicas("ms-a2"), scene.replicas("ms-b2")) == (5, 4)
    assert scene.condition("Ready", "h") == ("True", "Reconciled")


async def test_a_target_deleted_before_its_scale_write_is_reported_missing(scene: Scene) -> None:
    two_targets(scene)
    scene.kube.hold()
    await scene.kube.delete(MODELSERVINGS, "ms-b2", "ns")
    result = await HeterogeneousReconciler(scene.deps).reconcile(REQUEST)
    assert result is not None and result.requeue_after
    assert scene.replicas("ms-a2") == 5
    assert scene.condition("TargetFound", "h") == ("False", "TargetNotFound")
    assert scene.message("TargetFound", "h") == "model serving ns/ms-b2 not found"
    assert "FailedRescale" not in [e[1] for e in scene.recorded()]


async def test_a_missing_target_scales_nothing(scene: Scene) -> None:
    two_targets(scene)
    await scene.kube.delete(MODELSERVINGS, "ms-a2", "ns")
    await HeterogeneousReconciler(scene.deps).reconcile(REQUEST)
    assert scene.scales() == []
    assert scene.condition("Ready", "h") == ("False", "TargetNotFound")
    assert scene.message("Ready", "h") == "model serving ns/ms-a2 not found"
