"""The reconcilers' glue, with a fake API client, a fake scraper and a virtual wall clock."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any
from urllib.parse import urlsplit

import pytest

from kthena_py.controllers.autoscaling import _policies_targeting
from kthena_py.controllers.autoscaling.base import Deps, Settings
from kthena_py.controllers.autoscaling.disaggregated import role_patch
from kthena_py.controllers.autoscaling.heterogeneous import HeterogeneousReconciler
from kthena_py.controllers.autoscaling.history import HISTORY_ANNOTATION
from kthena_py.controllers.autoscaling.homogeneous import TargetReconciler
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube import ServerError
from kthena_py.kube.resources import PODS
from kthena_py.plan.autoscaling import Scrape, parse_exposition
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import RecordedEvents

from .conftest import UNLIMITED, Cluster, gauge, modelserving, pod, policy, put


class FakeScraper:
    """Answers scrapes from bodies by pod IP and queries from values by query string."""

    def __init__(self, clock: list[float]) -> None:
        self.bodies: dict[str, str] = {}
        self.values: dict[str, float] = {}
        self.clock = clock
        self.requests = 0

    async def fetch_all(
        self, requests: Sequence[tuple[Any, str, Collection[str]]], *, deadline: float
    ) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, url, names in requests:
            self.requests += 1
            body = self.bodies.get(urlsplit(url).hostname or "")
            out[key] = f"{url}: HTTP 503" if body is None else Scrape(self.clock[0], parse_exposition(body, names))
        return out

    async def query(self, server_url: str, query: str, *, timeout: float) -> float | str:
        return self.values.get(query, f"no answer for {query}")


class World:
    def __init__(self) -> None:
        self.clock = [1_000_000.0]
        self.cluster = Cluster()
        self.cache = self.cluster.cache
        self.client = self.cluster
        self.recorder = RecordedEvents()
        self.scraper = FakeScraper(self.clock)
        self.deps = Deps(
            self.cluster.kube,
            self.cache,
            self.recorder,
            self.scraper,
            Settings(sync_period=15.0),
            wall_clock=lambda: self.clock[0],
        )
        self.main = TargetReconciler(self.deps)
        self.hetero = HeterogeneousReconciler(self.deps)

    def events(self) -> list[tuple[str, str, str]]:
        return [(e.type, e.reason, e.message) for e in self.recorder.events]

    def tick(self, seconds: float = 15.0) -> None:
        self.clock[0] += seconds

    def get(self, rt: Any, name: str) -> dict[str, Any]:
        obj = self.cache.get(rt, name, "ns")
        assert obj is not None
        return obj

    def status(self, name: str = "p") -> dict[str, Any]:
        return self.get(AUTOSCALINGPOLICIES, name).get("status") or {}

    def condition(self, type_: str, name: str = "p") -> tuple[str, str]:
        for c in self.status(name).get("conditions") or []:
            if c["type"] == type_:
                return c["status"], c["reason"]
        raise AssertionError(f"no condition {type_}")


def homogeneous_spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerancePercent": 0,
        "metrics": [{"name": "load", "targetValue": "1"}],
        "behavior": UNLIMITED,
        "homogeneousTarget": {
            "minReplicas": 1,
            "maxReplicas": 10,
            "target": {"targetRef": {"name": "ms"}, "metricSources": {"load": {"pod": {"port": 8100}}}},
        },
    }
    spec.update(overrides)
    return spec


def sample(name: str, labels: dict[str, str]) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_homogeneous_scales_through_the_scale_subresource_then_stays_quiet() -> None:
    w = World()
    put(w.cluster, MODELSERVINGS, modelserving("ms", 1))
    put(w.cluster, PODS, pod("p0", "10.0.0.1"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec()))
    w.scraper.bodies["10.0.0.1"] = gauge("load", 10)

    result = await w.main.reconcile(Request("ns", "p"))
    assert result is not None and result.requeue_after is not None and 0 < result.requeue_after <= 15
    assert [(c.name, c.body) for c in w.client.writes("scale")] == [("ms", 10)]
    assert w.get(MODELSERVINGS, "ms")["spec"]["replicas"] == 10
    [(kind, reason, message)] = w.events()
    assert (kind, reason) == ("Normal", "SuccessfulRescale")
    assert "New size: 10 (was 1)" in message and "load=10 per replica over 1 replicas (target 1)" in message
    status = w.status()
    assert status["observedGeneration"] == 1
    entry = status["homogeneousStatus"]
    assert (entry["name"], entry["currentReplicas"], entry["desiredReplicas"], entry["mode"]) == ("ms", 1, 10, "Stable")
    assert "lastScaleTime" in entry
    assert w.condition("Ready") == ("True", "Reconciled")
    assert w.condition("TargetFound") == ("True", "TargetFound")
    assert w.condition("MetricsAvailable") == ("True", "AllMetricsAvailable")
    annotation = w.get(AUTOSCALINGPOLICIES, "p")["metadata"]["annotations"][HISTORY_ANNOTATION]
    assert json.loads(annotation)["units"]["homogeneous"]["replicas"][-1][1] == 10
    labels = {"namespace": "ns", "policy": "p", "target": "ns/ms"}
    assert sample("kthena_autoscaler_desired_replicas", labels) == 10
    assert sample("kthena_autoscaler_current_replicas", labels) == 1
    assert sample("kthena_autoscaler_metric_value", {**labels, "metric": "load"}) == 10

    # Next pass: 10 replicas, one of them reporting 10, nine not ready yet (HPA rule): hold 10.
    w.tick()
    await w.main.reconcile(Request("ns", "p"))
    assert len(w.client.writes("scale")) == 1
    writes = len(w.client.calls)
    # A steady pass writes nothing at all.
    w.tick()
    await w.main.reconcile(Request("ns", "p"))
    assert len(w.client.calls) == writes
    assert len(w.events()) == 1


async def test_panic_step_up_and_stabilized_step_down() -> None:
    w = World()
    behavior = {
        "scaleUp": {
            "stablePolicy": {"instances": 1, "percent": 0, "period": "60s"},
            "panicPolicy": {"percent": 1000, "panicThresholdPercent": 200, "panicModeHold": "30s"},
        },
        "scaleDown": {"instances": 10, "percent": 100, "period": "15s", "stabilizationWindow": "60s"},
    }
    put(w.cluster, MODELSERVINGS, modelserving("ms", 2))
    put(w.cluster, PODS, pod("p0", "10.0.0.1", group="ms-0"), pod("p1", "10.0.0.2", group="ms-1"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(behavior=behavior)))
    for ip in ("10.0.0.1", "10.0.0.2"):
        w.scraper.bodies[ip] = gauge("load", 1)
    await w.main.reconcile(Request("ns", "p"))
    assert w.client.writes("scale") == []
    # Step up: 4x the target on each pod. Panic mode scales to 8 at once (the stable limit would allow +1).
    for ip in ("10.0.0.1", "10.0.0.2"):
        w.scraper.bodies[ip] = gauge("load", 4)
    w.tick()
    await w.main.reconcile(Request("ns", "p"))
    assert [c.body for c in w.client.writes("scale")] == [8]
    assert w.status()["homogeneousStatus"]["mode"] == "Panic"
    assert "Panic mode" in w.events()[-1][2]
    # Step down to the target: nothing happens before the stabilization window has passed.
    for ip in ("10.0.0.1", "10.0.0.2"):
        w.scraper.bodies[ip] = gauge("load", 0.25)
    for _ in range(4):
        w.tick()
        await w.main.reconcile(Request("ns", "p"))
    assert [c.body for c in w.client.writes("scale")] == [8]
    for _ in range(8):
        w.tick()
        await w.main.reconcile(Request("ns", "p"))
    assert w.get(MODELSERVINGS, "ms")["spec"]["replicas"] < 8
    assert w.status()["homogeneousStatus"]["mode"] == "Stable"


async def test_missing_metrics_hold_and_warn_once() -> None:
    w = World()
    put(w.cluster, MODELSERVINGS, modelserving("ms", 3))
    put(w.cluster, PODS, pod("p0", "10.0.0.1"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec()))
    await w.main.reconcile(Request("ns", "p"))  # the scrape fails (no body)
    assert w.client.writes("scale") == []
    assert w.condition("MetricsAvailable") == ("False", "NoMetrics")
    assert "HTTP 503" in next(c for c in w.status()["conditions"] if c["type"] == "MetricsAvailable")["message"]
    assert w.status()["homogeneousStatus"]["desiredReplicas"] == 3
    w.tick()
    await w.main.reconcile(Request("ns", "p"))
    assert [e[1] for e in w.events()] == ["NoMetrics"]
    assert sample("kthena_autoscaler_scrape_errors_total", {"namespace": "ns", "policy": "p", "source": "pod"}) >= 2


async def test_target_not_found_then_found() -> None:
    w = World()
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec()))
    result = await w.main.reconcile(Request("ns", "p"))
    assert result is not None and result.requeue_after
    assert w.condition("TargetFound") == ("False", "TargetNotFound")
    assert w.condition("Ready") == ("False", "TargetNotFound")
    put(w.cluster, MODELSERVINGS, modelserving("ms", 2))
    await w.main.reconcile(Request("ns", "p"))
    assert w.condition("TargetFound") == ("True", "TargetFound")


async def test_invalid_policy_is_reported_not_requeued() -> None:
    w = World()
    spec = homogeneous_spec(metrics=[{"name": "load", "targetValue": "0"}])
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", spec))
    assert await w.main.reconcile(Request("ns", "p")) is None
    assert w.condition("Ready") == ("False", "InvalidSpec")
    assert w.events()[0][:2] == ("Warning", "InvalidSpec")
    assert "metric target value must be greater than 0" in w.events()[0][2]
    bad_group = homogeneous_spec()
    bad_group["homogeneousTarget"]["target"]["targetRef"]["apiVersion"] = "apps/v1"
    put(w.cluster, AUTOSCALINGPOLICIES, policy("q", bad_group))
    assert await w.main.reconcile(Request("ns", "q")) is None
    assert w.condition("TargetFound", "q") == ("False", "TargetInvalid")


async def test_failed_scale_keeps_the_history() -> None:
    w = World()
    put(w.cluster, MODELSERVINGS, modelserving("ms", 1))
    put(w.cluster, PODS, pod("p0", "10.0.0.1"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec()))
    w.scraper.bodies["10.0.0.1"] = gauge("load", 5)
    w.client.fail["scale"] = ServerError(500, "InternalError", "etcd is down")
    result = await w.main.reconcile(Request("ns", "p"))
    assert result is not None and result.requeue_after  # retried at the next period, not in a tight loop
    assert w.condition("Ready") == ("False", "ScaleFailed")
    assert [e for e in w.events() if e[1] == "FailedRescale"] == [
        ("Warning", "FailedRescale", "cannot scale ns/ms from 1 to 5: 500 InternalError: etcd is down")
    ]
    assert not [e for e in w.events() if e[1] == "ScaleFailed"]  # one event per refusal, not two
    assert HISTORY_ANNOTATION not in (w.get(AUTOSCALINGPOLICIES, "p")["metadata"].get("annotations") or {})
    del w.client.fail["scale"]
    w.tick()
    await w.main.reconcile(Request("ns", "p"))
    assert w.get(MODELSERVINGS, "ms")["spec"]["replicas"] == 5
    assert w.condition("Ready") == ("True", "Reconciled")


async def test_deleted_policy_drops_memory_and_series() -> None:
    w = World()
    put(w.cluster, MODELSERVINGS, modelserving("ms", 1))
    put(w.cluster, PODS, pod("p0", "10.0.0.1"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("gone", homogeneous_spec()))
    w.scraper.bodies["10.0.0.1"] = gauge("load", 1)
    await w.main.reconcile(Request("ns", "gone"))
    labels = {"namespace": "ns", "policy": "gone", "target": "ns/ms"}
    assert sample("kthena_autoscaler_desired_replicas", labels) == 1
    await w.cluster.kube.delete(AUTOSCALINGPOLICIES, "gone", "ns")
    assert await w.main.reconcile(Request("ns", "gone")) is None
    assert sample("kthena_autoscaler_desired_replicas", labels) is None
    assert len(w.main.store) == 0


def disaggregated_spec() -> dict[str, Any]:
    def role(metric: str, low: int, high: int) -> dict[str, Any]:
        return {
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [{"name": metric, "targetValue": "1"}],
            "metricSources": {metric: {"pod": {"port": 8100}}},
        }

    return {
        "tolerancePercent": 0,
        "behavior": UNLIMITED,
        "disaggregatedTarget": {
            "targetRef": {"name": "pd"},
            "roles": {"prefill": role("prefill_load", 1, 8), "decode": role("decode_load", 2, 16)},
            "ratioConstraint": {
                "numeratorRole": "prefill",
                "denominatorRole": "decode",
                "minRatio": "250m",
                "maxRatio": "1",
            },
        },
    }


async def test_disaggregated_ratio_raises_decode() -> None:
    # Kthena's TestDoDisaggregatedScale_RatioRaisesDecode.
    w = World()
    put(w.cluster, MODELSERVINGS, modelserving("pd", 1, roles=[("prefill", None), ("decode", 2)]))
    put(
        w.cluster,
        PODS,
        pod("pf", "10.0.1.1", ms="pd", role="prefill", role_id="prefill-0"),
        pod("d0", "10.0.1.2", ms="pd", role="decode", role_id="decode-0"),
        pod("d1", "10.0.1.3", ms="pd", role="decode", role_id="decode-1"),
    )
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", disaggregated_spec()))
    w.scraper.bodies.update(
        {"10.0.1.1": gauge("prefill_load", 6), "10.0.1.2": gauge("decode_load", 1), "10.0.1.3": gauge("decode_load", 1)}
    )
    await w.main.reconcile(Request("ns", "p"))
    [call] = w.client.writes("patch")[:1]
    assert call.rt == "modelservings" and call.kwargs["patch_type"] == "json"
    assert call.body == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-pd"},
        {"op": "test", "path": "/spec/template/roles/0/name", "value": "prefill"},
        {"op": "add", "path": "/spec/template/roles/0/replicas", "value": 6},
        {"op": "test", "path": "/spec/template/roles/1/name", "value": "decode"},
        {"op": "add", "path": "/spec/template/roles/1/replicas", "value": 6},
    ]
    status = w.status()["disaggregatedStatus"]
    assert status["ratioAdjusted"] is True
    assert status["ratioStatus"] == {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "1"}
    roles = {r["name"]: (r["currentReplicas"], r["desiredReplicas"]) for r in status["roles"]}
    assert roles == {"decode": (2, 2), "prefill": (1, 6)}
    assert w.condition("RatioConstraintViolated") == ("False", "RatioSatisfied")
    assert "prefill 1->6" in w.events()[-1][2] and "decode 2->6" in w.events()[-1][2]
    assert not [e for e in w.events() if e[0] == "Warning"]


async def test_disaggregated_missing_role() -> None:
    w = World()
    put(w.cluster, MODELSERVINGS, modelserving("pd", 1, roles=[("prefill", 1)]))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", disaggregated_spec()))
    await w.main.reconcile(Request("ns", "p"))
    assert w.condition("TargetFound") == ("False", "TargetInvalid")
    message = next(c for c in w.status()["conditions"] if c["type"] == "TargetFound")["message"]
    assert message == "role decode not found in model serving ns/pd"


def test_role_patch_vector() -> None:
    ms = modelserving("pd", 1, roles=[("prefill", None), ("decode", 2)])
    ops = role_patch(ms, {"prefill": 3, "decode": 4})
    assert len(ops) == 5 and ops[0]["path"] == "/metadata/uid"
    assert role_patch(ms, {"prefill": 1, "decode": 2}) == []


async def test_heterogeneous_total_then_split() -> None:
    # Kthena's controller vector: ms-a2(10, 1..5), ms-b2(20, 2..4), current 1 + 2, load 100 per pod, target 1.
    w = World()
    spec = {
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
                    "target": {"targetRef": {"name": name}, "metricSources": {"load": {"pod": {}}}},
                }
                for name, cost, low, high in (("ms-a2", 10, 1, 5), ("ms-b2", 20, 2, 4))
            ],
        },
    }
    put(w.cluster, MODELSERVINGS, modelserving("ms-a2", 1), modelserving("ms-b2", 2))
    put(w.cluster, PODS, pod("a", "10.0.2.1", ms="ms-a2"), pod("b", "10.0.2.2", ms="ms-b2"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("h", spec))
    w.scraper.bodies.update({"10.0.2.1": gauge("load", 100), "10.0.2.2": gauge("load", 100)})
    assert await w.main.reconcile(Request("ns", "h")) is None  # not this controller's policy
    await w.hetero.reconcile(Request("ns", "h"))
    assert sorted((c.name, c.body) for c in w.client.writes("scale")) == [("ms-a2", 5), ("ms-b2", 4)]
    entries = {e["name"]: (e["currentReplicas"], e["desiredReplicas"]) for e in w.status("h")["heterogeneousStatus"]}
    assert entries == {"ns/ms-a2": (1, 5), "ns/ms-b2": (2, 4)}
    assert "New total: 9 (was 3)" in w.events()[-1][2]
    labels = {"namespace": "ns", "policy": "h", "target": "ns/ms-b2"}
    assert sample("kthena_autoscaler_desired_replicas", labels) == 4


def test_modelserving_events_map_to_the_policies_that_target_them() -> None:
    w = World()
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec()), policy("d", disaggregated_spec()))
    mapper = _policies_targeting(w.deps, frozenset({"homogeneous", "disaggregated"}))
    assert sorted(r.name for r in mapper(modelserving("ms"))) == ["p"]
    assert sorted(r.name for r in mapper(modelserving("pd"))) == ["d"]
    assert list(_policies_targeting(w.deps, frozenset({"heterogeneous"}))(modelserving("ms"))) == []


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


async def test_restart_restores_the_history_from_the_annotation() -> None:
    w = World()
    behavior = {
        "scaleUp": {"stablePolicy": {"period": "0s"}},
        "scaleDown": {"instances": 10, "percent": 100, "period": "0s", "stabilizationWindow": "60s"},
    }
    put(w.cluster, MODELSERVINGS, modelserving("ms", 2))
    put(w.cluster, PODS, pod("p0", "10.0.0.1", group="ms-0"), pod("p1", "10.0.0.2", group="ms-1"))
    put(w.cluster, AUTOSCALINGPOLICIES, policy("p", homogeneous_spec(behavior=behavior)))
    for ip in ("10.0.0.1", "10.0.0.2"):
        w.scraper.bodies[ip] = gauge("load", 4)
    for _ in range(3):
        await w.main.reconcile(Request("ns", "p"))
        w.tick()
    assert w.get(MODELSERVINGS, "ms")["spec"]["replicas"] == 8
    for _ in range(6):  # the pre-scale recommendation leaves the history (one more checkpoint)
        w.tick()
        await w.main.reconcile(Request("ns", "p"))
    writes = len(w.client.calls)
    # Steady for longer than the stabilization window: nothing is written (the checkpoint is older than 60 s).
    for _ in range(6):
        w.tick()
        await w.main.reconcile(Request("ns", "p"))
    assert len(w.client.calls) == writes
    # A new process (empty memory) while the load drops: the history comes back from the annotation and is
    # re-seeded with the current count, so no scale-down happens within the stabilization window.
    w.main = TargetReconciler(w.deps)
    for ip in ("10.0.0.1", "10.0.0.2"):
        w.scraper.bodies[ip] = gauge("load", 0.25)
    for _ in range(3):
        w.tick()
        await w.main.reconcile(Request("ns", "p"))
    assert w.get(MODELSERVINGS, "ms")["spec"]["replicas"] == 8
    for _ in range(3):
        w.tick()
        await w.main.reconcile(Request("ns", "p"))
    assert w.get(MODELSERVINGS, "ms")["spec"]["replicas"] < 8
