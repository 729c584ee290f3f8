"""Lossless round trips of realistic manifests, and the documented defaults."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_py.api import (
    AutoscalingPolicy,
    IntOrString,
    ModelBooster,
    ModelServing,
    ModelServingSpec,
    PodTemplateSpec,
    Role,
    ServingGroup,
    to_dict,
)
from kthena_py.api.validation import KINDS

from .corpus import base_names, load_base
from .helpers import contains

API_VERSION = "workload.serving.volcano.sh/v1alpha1"
CONTAINERS = {"containers": [{"name": "c", "image": "nginx"}]}


@pytest.mark.parametrize("name", base_names())
def test_base_manifest_roundtrip(name: str) -> None:
    document = load_base(name)
    original = copy.deepcopy(document)
    model = KINDS[document["kind"]][0]
    obj = model.model_validate(document)
    assert document == original, "validation must not mutate its input"
    assert to_dict(obj, with_defaults=False) == document
    defaulted = to_dict(obj)
    assert contains(defaulted, document)
    again = model.model_validate(defaulted)
    assert to_dict(again) == defaulted
    assert to_dict(again, with_defaults=False) == defaulted


def test_realistic_manifest_values_are_readable() -> None:
    ms = ModelServing.model_validate(load_base("modelserving-pd"))
    assert ms.name == "llama-pd" and ms.namespace == "serving"
    assert ms.annotations["scheduling.volcano.sh/queue-name"] == "inference"
    prefill, decode = ms.spec.template.roles
    assert prefill.max_unavailable == IntOrString(1)  # CRD default
    assert decode.worker_template is None
    assert ms.spec.rollout_strategy is not None
    config = ms.spec.rollout_strategy.rolling_update_configuration
    assert config is not None and config.max_unavailable.scaled_value(ms.spec.replicas, round_up=False) == 1
    topology = ms.spec.template.network_topology
    assert topology is not None and topology.role_policy is not None and topology.role_policy.mode == "soft"
    policy = AutoscalingPolicy.model_validate(load_base("autoscalingpolicy-disaggregated"))
    target = policy.spec.disaggregated_target
    assert target is not None and target.ratio_constraint is not None
    assert str(target.ratio_constraint.min_ratio.value) == "0.25"
    decode_source = (target.roles["decode"].metric_sources or {})["num_requests_waiting"].pod
    assert decode_source is not None and decode_source.uri == "/metrics" and decode_source.port == 8000


def _minimal_ms(spec_extra: dict[str, Any] | None = None, role_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    role = {"name": "main", "workerReplicas": 0, "entryTemplate": {"spec": CONTAINERS}, **(role_extra or {})}
    spec = {"template": {"roles": [role]}, **(spec_extra or {})}
    return {"apiVersion": API_VERSION, "kind": "ModelServing", "metadata": {"name": "m"}, "spec": spec}


def test_modelserving_defaults() -> None:
    document = _minimal_ms(
        spec_extra={
            "plugins": [{"name": "p"}],
            "rolloutStrategy": {"rollingUpdateConfiguration": {}, "evictionStrategy": {"minAvailable": 1}},
        },
        role_extra={},
    )
    document["spec"]["template"]["networkTopology"] = {"groupPolicy": {}}
    defaulted = to_dict(ModelServing.model_validate(document))
    assert defaulted["spec"] == {
        "replicas": 1,
        "schedulerName": "volcano",
        "plugins": [{"name": "p", "type": "BuiltIn"}],
        "template": {
            "restartGracePeriodSeconds": 0,
            "networkTopology": {"groupPolicy": {"mode": "hard"}},
            "roles": [
                {
                    "name": "main",
                    "replicas": 1,
                    "entryTemplate": {"spec": CONTAINERS},
                    "workerReplicas": 0,
                    "maxUnavailable": 1,
                }
            ],
        },
        "rolloutStrategy": {
            "type": "ServingGroupRollingUpdate",
            "updateMethod": "Recreate",
            "rollingUpdateConfiguration": {"maxUnavailable": 1},
            "evictionStrategy": {"protectionLevel": "ServingGroup", "minAvailable": 1},
        },
        "recoveryPolicy": "RoleRecreate",
        "revisionHistoryLimit": 10,
    }


def test_autoscaling_defaults() -> None:
    document = {
        "apiVersion": API_VERSION,
        "kind": "AutoscalingPolicy",
        "spec": {
            "metrics": [{"name": "m", "targetValue": "1"}],
            "behavior": {"scaleUp": {"stablePolicy": {}, "panicPolicy": {}}, "scaleDown": {}},
            "homogeneousTarget": {
                "minReplicas": 0,
                "maxReplicas": 1,
                "target": {"targetRef": {"name": "x"}, "metricSources": {"m": {"pod": {}}}},
            },
            "heterogeneousTarget": {"params": [{"minReplicas": 0, "maxReplicas": 1}]},
        },
    }
    spec = to_dict(AutoscalingPolicy.model_validate(document))["spec"]
    stable = {"instances": 1, "percent": 100, "period": "15s", "selectPolicy": "Or"}
    assert spec["tolerancePercent"] == 10
    assert spec["behavior"] == {
        "scaleUp": {
            "stablePolicy": stable,
            "panicPolicy": {"percent": 1000, "panicThresholdPercent": 200, "panicModeHold": "60s"},
        },
        "scaleDown": stable,
    }
    assert spec["homogeneousTarget"]["target"]["metricSources"] == {"m": {"pod": {"uri": "/metrics", "port": 8100}}}
    assert spec["heterogeneousTarget"]["costExpansionRatePercent"] == 200


def test_modelbooster_defaults() -> None:
    document = {
        "apiVersion": API_VERSION,
        "kind": "ModelBooster",
        "metadata": {"name": "b"},
        "spec": {"backend": {"name": "x", "type": "vLLM", "modelURI": "hf://a/b", "replicas": 1, "workers": [{}]}},
    }
    assert to_dict(ModelBooster.model_validate(document))["spec"]["backend"]["workers"] == [{"type": "server"}]


def test_python_construction_uses_snake_case_and_serializes_camel_case() -> None:
    role = Role(
        name="main",
        worker_replicas=0,
        entry_template=PodTemplateSpec(spec=CONTAINERS),
        max_surge=IntOrString("25%"),
    )
    ms = ModelServing(metadata={"name": "m"}, spec=ModelServingSpec(template=ServingGroup(roles=[role])))
    assert to_dict(ms, with_defaults=False) == {
        "metadata": {"name": "m"},
        "spec": {
            "template": {
                "roles": [
                    {"name": "main", "workerReplicas": 0, "entryTemplate": {"spec": CONTAINERS}, "maxSurge": "25%"}
                ]
            }
        },
    }
    assert to_dict(ms)["apiVersion"] == API_VERSION and to_dict(ms)["kind"] == "ModelServing"
    scaled = ms.model_copy(update={"spec": ms.spec.model_copy(update={"replicas": 3})})
    assert to_dict(scaled, with_defaults=False)["spec"]["replicas"] == 3


def test_models_are_frozen() -> None:
    ms = ModelServing.model_validate(_minimal_ms())
    with pytest.raises(ValueError, match="frozen"):
        ms.spec.replicas = 2  # type: ignore[misc]
