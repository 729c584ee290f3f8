"""The ``autoscaling`` reconciler's homogeneous pass through FakeKube, real /metrics scrapes and a virtual clock."""

from __future__ import annotations

import json

import pytest

from kthena_py.controllers.autoscaling import _policies_targeting
from kthena_py.controllers.autoscaling.base import Settings
from kthena_py.controllers.autoscaling.history import HISTORY_ANNOTATION
from kthena_py.controllers.autoscaling.homogeneous import FIELD_MANAGER, TargetReconciler
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube import Conflict, ServerError
from kthena_py.kube.resources import PODS
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake.faults import refuse

from .conftest import IPS, Scene, disaggregated_spec, gauge, homogeneous_spec, modelserving, pod, policy, sample

REQUEST = Request("ns", "p")


def one_pod(scene: Scene, load: float, replicas: int = 1) -> None:
    """``ns/ms`` at ``replicas`` with one ready entry pod reporting ``load``, and the homogeneous policy ``p``."""
    scene.put(MODELSERVINGS, modelserving("ms", replicas))
    scene.put(PODS, pod("p0", IPS[0]))
    scene.put(AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(scene.port)))
    scene.servers.bodies[IPS[0]] = gauge("load", load)


async def test_scales_through_the_scale_subresource_then_stays_quiet(scene: Scene) -> None:
    one_pod(scene, 10)
    reconciler = TargetReconciler(scene.deps)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after is not None and 0 < result.requeue_after <= 15
    assert scene.scales() == [("ms", 10)]
    assert scene.replicas() == 10
    [(kind, reason, message)] = scene.recorded()
    assert (kind, reason) == ("Normal", "SuccessfulRescale")
    assert "New size: 10 (was 1)" in message and "load=10 per replica over 1 replicas (target 1)" in message
    status = scene.status()
    assert status["observedGeneration"] == 1
    entry = status["homogeneousStatus"]
    assert (entry["name"], entry["currentReplicas"], entry["desiredReplicas"], entry["mode"]) == ("ms", 1, 10, "Stable")
    assert "lastScaleTime" in entry
    assert scene.condition("Ready") == ("True", "Reconciled")
    assert scene.condition("TargetFound") == ("True", "TargetFound")
    assert scene.condition("MetricsAvailable") == ("True", "AllMetricsAvailable")
    status_writes = [c for c in scene.kube.calls_of("patch", AUTOSCALINGPOLICIES) if c.subresource == "status"]
    assert [c.options["field_manager"] for c in status_writes] == [FIELD_MANAGER]
    annotation = scene.get(AUTOSCALINGPOLICIES, "p")["metadata"]["annotations"][HISTORY_ANNOTATION]
    assert json.loads(annotation)["units"]["homogeneous"]["replicas"][-1][1] == 10
    labels = {"namespace": "ns", "policy": "p", "target": "ns/ms"}
    assert sample("kthena_autoscaler_desired_replicas", labels) == 10
    assert sample("kthena_autoscaler_current_replicas", labels) == 1
    assert sample("kthena_autoscaler_metric_value", {**labels, "metric": "load"}) == 10

    # Next pass: 10 replicas, one of them reporting 10, nine not ready yet (HPA rule): hold 10.
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert len(scene.scales()) == 1
    writes = len(scene.writes())
    # A steady pass writes nothing at all.
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert len(scene.writes()) == writes
    assert len(scene.recorded()) == 1


async def test_panic_step_up_and_stabilized_step_down(scene: Scene) -> None:
    behavior = {
        "scaleUp": {
            "stablePolicy": {"instances": 1, "percent": 0, "period": "60s"},
            "panicPolicy": {"percent": 1000, "panicThresholdPercent": 200, "panicModeHold": "30s"},
        },
        "scaleDown": {"instances": 10, "percent": 100, "period": "15s", "stabilizationWindow": "60s"},
    }
    scene.put(MODELSERVINGS, modelserving("ms", 2))
    scene.put(PODS, pod("p0", IPS[0], group="ms-0"), pod("p1", IPS[1], group="ms-1"))
    scene.put(AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(scene.port, behavior=behavior)))
    reconciler = TargetReconciler(scene.deps)

    def load(value: float) -> None:
        for ip in IPS[:2]:
            scene.servers.bodies[ip] = gauge("load", value)

    load(1)
    await reconciler.reconcile(REQUEST)
    assert scene.scales() == []
    # Step up: 4x the target on each pod. Panic mode scales to 8 at once (the stable limit would allow +1).
    load(4)
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert scene.scales() == [("ms", 8)]
    assert scene.status()["homogeneousStatus"]["mode"] == "Panic"
    assert "Panic mode" in scene.recorded()[-1][2]
    # Step down to the target: nothing happens before the stabilization window has passed.
    load(0.25)
    for _ in range(4):
        scene.tick()
        await reconciler.reconcile(REQUEST)
    assert scene.scales() == [("ms", 8)]
    for _ in range(8):
        scene.tick()
        await reconciler.reconcile(REQUEST)
    assert scene.replicas() < 8
    assert scene.status()["homogeneousStatus"]["mode"] == "Stable"


async def test_missing_metrics_hold_and_warn_once(scene: Scene) -> None:
    one_pod(scene, 0, replicas=3)
    scene.servers.status[IPS[0]] = 503
    reconciler = TargetReconciler(scene.deps)
    await reconciler.reconcile(REQUEST)
    assert scene.scales() == []
    assert scene.condition("MetricsAvailable") == ("False", "NoMetrics")
    assert "HTTP 503" in scene.message("MetricsAvailable")
    assert scene.status()["homogeneousStatus"]["desiredReplicas"] == 3
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert [e[1] for e in scene.recorded()] == ["NoMetrics"]
    errors = sample("kthena_autoscaler_scrape_errors_total", {"namespace": "ns", "policy": "p", "source": "pod"})
    assert errors is not None and errors >= 2


async def test_target_not_found_then_found(scene: Scene) -> None:
    scene.put(AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(scene.port)))
    reconciler = TargetReconciler(scene.deps)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after
    assert scene.condition("TargetFound") == ("False", "TargetNotFound")
    assert scene.condition("Ready") == ("False", "TargetNotFound")
    scene.put(MODELSERVINGS, modelserving("ms", 2))
    await reconciler.reconcile(REQUEST)
    assert scene.condition("TargetFound") == ("True", "TargetFound")


async def test_invalid_policy_is_reported_not_requeued(scene: Scene) -> None:
    spec = homogeneous_spec(scene.port, metrics=[{"name": "load", "targetValue": "0"}])
    scene.put(AUTOSCALINGPOLICIES, policy("p", spec))
    reconciler = TargetReconciler(scene.deps)
    assert await reconciler.reconcile(REQUEST) is None
    assert scene.condition("Ready") == ("False", "InvalidSpec")
    assert scene.recorded()[0][:2] == ("Warning", "InvalidSpec")
    assert "metric target value must be greater than 0" in scene.recorded()[0][2]
    bad_group = homogeneous_spec(scene.port)
    bad_group["homogeneousTarget"]["target"]["targetRef"]["apiVersion"] = "apps/v1"
    scene.put(AUTOSCALINGPOLICIES, policy("q", bad_group))
    assert await reconciler.reconcile(Request("ns", "q")) is None
    assert scene.condition("TargetFound", "q") == ("False", "TargetInvalid")


async def test_a_refused_scale_keeps_the_history_and_is_retried_at_the_next_period(scene: Scene) -> None:
    one_pod(scene, 5)
    reconciler = TargetReconciler(scene.deps)
    remove = scene.kube.intercept(
        refuse(ServerError(500, "InternalError", "etcd is down"), "patch", MODELSERVINGS, subresource="scale")
    )
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after  # retried at the next period, not in a tight loop
    assert scene.replicas() == 1
    assert scene.condition("Ready") == ("False", "ScaleFailed")
    assert [e for e in scene.recorded() if e[1] == "FailedRescale"] == [
        ("Warning", "FailedRescale", "cannot scale ns/ms from 1 to 5: 500 InternalError: etcd is down")
    ]
    assert not [e for e in scene.recorded() if e[1] == "ScaleFailed"]  # one event per refusal, not two
    assert HISTORY_ANNOTATION not in (scene.get(AUTOSCALINGPOLICIES, "p")["metadata"].get("annotations") or {})
    remove()
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert scene.replicas() == 5
    assert scene.condition("Ready") == ("True", "Reconciled")


async def test_a_target_deleted_before_the_scale_write_is_reported_missing(scene: Scene) -> None:
    """The cache still shows the ModelServing (its watch lags); the scale write meets NotFound."""
    one_pod(scene, 5)
    reconciler = TargetReconciler(scene.deps)
    scene.kube.hold()
    await scene.kube.delete(MODELSERVINGS, "ms", "ns")
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after
    assert scene.scales() == [("ms", 5)]  # tried, refused by the API server
    scene.kube.release()
    assert scene.condition("TargetFound") == ("False", "TargetNotFound")
    assert scene.condition("Ready") == ("False", "TargetNotFound")
    assert "SuccessfulRescale" not in [e[1] for e in scene.recorded()]
    assert "FailedRescale" not in [e[1] for e in scene.recorded()]  # a missing target is not a failed write
    assert HISTORY_ANNOTATION not in (scene.get(AUTOSCALINGPOLICIES, "p")["metadata"].get("annotations") or {})


async def test_a_refused_status_write_does_not_fail_the_pass(scene: Scene) -> None:
    one_pod(scene, 4)
    reconciler = TargetReconciler(scene.deps)
    status_refusal = refuse(Conflict(409, "Conflict", "injected"), "patch", AUTOSCALINGPOLICIES, subresource="status")
    remove = scene.kube.intercept(status_refusal)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after  # the usual period: the status is written next pass
    assert len(status_refusal.refused) == 1
    assert scene.replicas() == 4  # the scale itself went through
    assert scene.status() == {}
    remove()
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert scene.condition("Ready") == ("True", "Reconciled")


async def test_a_refused_checkpoint_is_written_by_the_next_pass(scene: Scene) -> None:
    one_pod(scene, 3)
    reconciler = TargetReconciler(scene.deps)
    checkpoint = refuse(ServerError(500, "InternalError", "injected"), "patch", AUTOSCALINGPOLICIES, subresource=None)
    remove = scene.kube.intercept(checkpoint)
    await reconciler.reconcile(REQUEST)
    assert len(checkpoint.refused) == 1 and HISTORY_ANNOTATION in json.dumps(checkpoint.refused[0].body)
    assert scene.replicas() == 3 and scene.condition("Ready") == ("True", "Reconciled")
    assert HISTORY_ANNOTATION not in (scene.get(AUTOSCALINGPOLICIES, "p")["metadata"].get("annotations") or {})
    remove()
    scene.tick()
    await reconciler.reconcile(REQUEST)
    annotation = scene.get(AUTOSCALINGPOLICIES, "p")["metadata"]["annotations"][HISTORY_ANNOTATION]
    assert json.loads(annotation)["units"]["homogeneous"]["replicas"][-1][1] == 3


async def test_deleted_policy_drops_memory_and_series(scene: Scene) -> None:
    scene.put(MODELSERVINGS, modelserving("ms", 1))
    scene.put(PODS, pod("p0", IPS[0]))
    scene.put(AUTOSCALINGPOLICIES, policy("gone", homogeneous_spec(scene.port)))
    scene.servers.bodies[IPS[0]] = gauge("load", 1)
    reconciler = TargetReconciler(scene.deps)
    await reconciler.reconcile(Request("ns", "gone"))
    labels = {"namespace": "ns", "policy": "gone", "target": "ns/ms"}
    assert sample("kthena_autoscaler_desired_replicas", labels) == 1
    await scene.kube.delete(AUTOSCALINGPOLICIES, "gone", "ns")
    assert await reconciler.reconcile(Request("ns", "gone")) is None
    assert sample("kthena_autoscaler_desired_replicas", labels) is None
    assert len(reconciler.store) == 0


async def test_restart_restores_the_history_from_the_annotation(scene: Scene) -> None:
    behavior = {
        "scaleUp": {"stablePolicy": {"period": "0s"}},
        "scaleDown": {"instances": 10, "percent": 100, "period": "0s", "stabilizationWindow": "60s"},
    }
    scene.put(MODELSERVINGS, modelserving("ms", 2))
    scene.put(PODS, pod("p0", IPS[0], group="ms-0"), pod("p1", IPS[1], group="ms-1"))
    scene.put(AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(scene.port, behavior=behavior)))
    reconciler = TargetReconciler(scene.deps)

    def load(value: float) -> None:
        for ip in IPS[:2]:
            scene.servers.bodies[ip] = gauge("load", value)

    load(4)
    for _ in range(3):
        await reconciler.reconcile(REQUEST)
        scene.tick()
    assert scene.replicas() == 8
    for _ in range(6):  # the pre-scale recommendation leaves the history (one more checkpoint)
        scene.tick()
        await reconciler.reconcile(REQUEST)
    writes = len(scene.writes())
    # Steady for longer than the stabilization window: nothing is written (the checkpoint is older than 60 s).
    for _ in range(6):
        scene.tick()
        await reconciler.reconcile(REQUEST)
    assert len(scene.writes()) == writes
    # A new process (empty memory) while the load drops: the history comes back from the annotation and is
    # re-seeded with the current count, so no scale-down happens within the stabilization window.
    reconciler = TargetReconciler(scene.deps)
    load(0.25)
    for _ in range(3):
        scene.tick()
        await reconciler.reconcile(REQUEST)
    assert scene.replicas() == 8
    for _ in range(3):
        scene.tick()
        await reconciler.reconcile(REQUEST)
    assert scene.replicas() < 8


async def test_modelserving_events_map_to_the_policies_that_target_them(scene: Scene) -> None:
    scene.put(
        AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(scene.port)), policy("d", disaggregated_spec(scene.port))
    )
    mapper = _policies_targeting(scene.deps, frozenset({"homogeneous", "disaggregated"}))
    assert sorted(r.name for r in mapper(modelserving("ms"))) == ["p"]
    assert sorted(r.name for r in mapper(modelserving("pd"))) == ["d"]
    assert list(_policies_targeting(scene.deps, frozenset({"heterogeneous"}))(modelserving("ms"))) == []


@pytest.mark.parametrize(
    ("env", "period"),
    [
        ({}, 15.0),
        ({"KTHENA_PY_AUTOSCALER_SYNC_PERIOD": "2.5"}, 2.5),
        ({"KTHENA_PY_AUTOSCALER_SYNC_PERIOD": "-1"}, 15.0),
        ({"KTHENA_PY_AUTOSCALER_SYNC_PERIOD": "x"}, 15.0),
    ],
)
def test_sync_period_from_environment(env: dict[str, str], period: float) -> None:
    settings = Settings.from_env(environ=env)
    assert settings.sync_period == period
    assert settings.scrape_timeout <= settings.collect_deadline <= 10
    assert Settings.from_env(1.0, environ=env).sync_period == 1.0
