"""Property: any schema-valid document round-trips losslessly (and its defaulted form is a fixed point)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from kthena_py.api import AutoscalingPolicy, ModelBooster, ModelServing, to_dict
from kthena_py.api.validation import parse_model

from .helpers import contains

API_VERSION = "workload.serving.volcano.sh/v1alpha1"
PROPERTY = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

names = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
label_values = st.text(alphabet="abcxyz0123-._", max_size=8)
percent = st.integers(0, 100).map(lambda value: f"{value}%")
int_or_percent = st.one_of(st.integers(0, 20), percent)
quantity_text = st.one_of(
    st.sampled_from(["500m", "1", "1.5", "2Gi", "100Ki", "1e3", "0.25", "90Gi", "+1", "01", "1.G", "7500m"]),
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False).map(str),
)
quantity = st.one_of(quantity_text, st.integers(0, 10**9))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))
opaque = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(names, inner, max_size=3)),
    max_leaves=8,
)
opaque_no_null = opaque.filter(lambda value: value is not None)


def optional_dict(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(required, optional=optional)


container = optional_dict(
    {"name": names, "image": st.sampled_from(["nginx", "vllm/vllm-openai:v0.10.1", "busybox:1.36"])},
    {
        "args": st.lists(st.text(max_size=6), max_size=3),
        "resources": optional_dict({}, {"requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity)}),
    },
)
pod_template = optional_dict(
    {},
    {
        "metadata": optional_dict(
            {},
            {
                "labels": st.dictionaries(names, label_values, max_size=2),
                "annotations": st.dictionaries(names, label_values, max_size=2),
            },
        ),
        "spec": optional_dict(
            {"containers": st.lists(container, min_size=1, max_size=2)},
            {"nodeSelector": st.dictionaries(names, names, max_size=1)},
        ),
    },
)
role = optional_dict(
    {"name": names, "workerReplicas": st.integers(0, 3), "entryTemplate": pod_template},
    {
        "replicas": st.integers(0, 5),
        "workerTemplate": pod_template,
        "maxUnavailable": int_or_percent,
        "maxSurge": int_or_percent,
        "partition": int_or_percent,
    },
)
topology_spec = optional_dict({}, {"mode": st.sampled_from(["hard", "soft"]), "highestTierAllowed": st.integers(0, 4)})
rolling = optional_dict({}, {"maxUnavailable": int_or_percent, "maxSurge": int_or_percent, "partition": int_or_percent})
coordination = optional_dict(
    {},
    {
        "roles": st.lists(names, max_size=3),
        "maxSkew": percent,
        "dependencies": st.lists(
            optional_dict({"role": names}, {"dependsOn": st.lists(names, max_size=2)}), max_size=2
        ),
    },
)
eviction = optional_dict(
    {},
    {
        "protectionLevel": st.sampled_from(["ServingGroup", "Role"]),
        "minAvailable": int_or_percent,
        "roleMinAvailable": st.dictionaries(names, int_or_percent, max_size=2),
    },
)
rollout = optional_dict(
    {},
    {
        "type": st.sampled_from(["ServingGroupRollingUpdate", "RoleRollingUpdate"]),
        "updateMethod": st.sampled_from(["Recreate", "InPlace"]),
        "progressDeadlineSeconds": st.integers(60, 3600),
        "rollingUpdateConfiguration": rolling,
        "roleCoordination": coordination,
        "evictionStrategy": eviction,
    },
)
plugin = optional_dict(
    {"name": names},
    {
        "type": st.just("BuiltIn"),
        "config": opaque_no_null,
        "scope": optional_dict(
            {}, {"roles": st.lists(names, max_size=2), "target": st.sampled_from(["All", "Entry", "Worker"])}
        ),
    },
)
model_serving = st.fixed_dictionaries(
    {
        "apiVersion": st.just(API_VERSION),
        "kind": st.just("ModelServing"),
        "metadata": st.fixed_dictionaries(
            {"name": names}, optional={"labels": st.dictionaries(names, label_values, max_size=2)}
        ),
        "spec": optional_dict(
            {
                "template": optional_dict(
                    {"roles": st.lists(role, min_size=1, max_size=4)},
                    {
                        "restartGracePeriodSeconds": st.integers(0, 120),
                        "gangPolicy": optional_dict(
                            {}, {"minRoleReplicas": st.dictionaries(names, st.integers(0, 3), max_size=2)}
                        ),
                        "networkTopology": optional_dict(
                            {}, {"groupPolicy": topology_spec, "rolePolicy": topology_spec}
                        ),
                    },
                )
            },
            {
                "replicas": st.integers(0, 10),
                "schedulerName": st.sampled_from(["volcano", "default-scheduler"]),
                "plugins": st.lists(plugin, max_size=2),
                "rolloutStrategy": rollout,
                "recoveryPolicy": st.sampled_from(["ServingGroupRecreate", "RoleRecreate", "None"]),
                "revisionHistoryLimit": st.integers(0, 20),
            },
        ),
    },
    optional={
        "status": optional_dict({}, {"replicas": st.integers(0, 5), "updateRevision": names, "labelSelector": names})
    },
)

durations = st.sampled_from(["0s", "15s", "1m", "1m30s", "500ms", "2h"])
metric = st.fixed_dictionaries({"name": names, "targetValue": quantity})
metric_source = st.one_of(
    st.fixed_dictionaries(
        {"pod": optional_dict({}, {"name": names, "uri": st.just("/metrics"), "port": st.integers(1, 65535)})}
    ),
    st.fixed_dictionaries(
        {"prometheus": st.fixed_dictionaries({"serverURL": st.just("http://prom:9090"), "query": st.just("up")})}
    ),
)
target = optional_dict(
    {"targetRef": st.fixed_dictionaries({"name": names}, optional={"kind": st.just("ModelServing")})},
    {"metricSources": st.dictionaries(names, metric_source, max_size=2)},
)
stable = optional_dict(
    {},
    {
        "instances": st.integers(0, 10),
        "percent": st.integers(0, 1000),
        "period": durations,
        "selectPolicy": st.sampled_from(["Or", "And"]),
        "stabilizationWindow": durations,
    },
)
panic = optional_dict(
    {},
    {
        "percent": st.integers(0, 1000),
        "period": durations,
        "panicThresholdPercent": st.integers(110, 1000),
        "panicModeHold": durations,
    },
)
bounds = {"minReplicas": st.integers(0, 10), "maxReplicas": st.integers(1, 10)}
autoscaling_policy = st.fixed_dictionaries(
    {
        "apiVersion": st.just(API_VERSION),
        "kind": st.just("AutoscalingPolicy"),
        "spec": optional_dict(
            {},
            {
                "tolerancePercent": st.integers(0, 100),
                "metrics": st.lists(metric, max_size=2),
                "behavior": optional_dict(
                    {},
                    {"scaleUp": optional_dict({}, {"stablePolicy": stable, "panicPolicy": panic}), "scaleDown": stable},
                ),
                "homogeneousTarget": optional_dict(bounds, {"target": target}),
                "heterogeneousTarget": optional_dict(
                    {},
                    {
                        "params": st.lists(
                            optional_dict(bounds, {"target": target, "cost": st.integers(0, 100)}),
                            min_size=1,
                            max_size=2,
                        ),
                        "costExpansionRatePercent": st.integers(0, 300),
                    },
                ),
                "disaggregatedTarget": optional_dict(
                    {
                        "targetRef": st.fixed_dictionaries({"name": names}),
                        "roles": st.dictionaries(
                            names,
                            optional_dict(
                                bounds,
                                {
                                    "metrics": st.lists(metric, min_size=1, max_size=2),
                                    "metricSources": st.dictionaries(names, metric_source, max_size=1),
                                },
                            ),
                            min_size=1,
                            max_size=2,
                        ),
                    },
                    {
                        "ratioConstraint": st.fixed_dictionaries(
                            {
                                "numeratorRole": names,
                                "denominatorRole": names,
                                "minRatio": quantity,
                                "maxRatio": quantity,
                            }
                        )
                    },
                ),
            },
        ),
    }
)
worker = optional_dict(
    {},
    {
        "type": st.sampled_from(["server", "prefill", "decode", "controller", "coordinator"]),
        "image": st.sampled_from(["vllm/vllm-openai:v0.10.1", ""]),
        "replicas": st.integers(0, 5),
        "pods": st.integers(0, 5),
        "resources": optional_dict({}, {"limits": st.dictionaries(st.just("nvidia.com/gpu"), quantity)}),
        "tolerations": st.lists(st.fixed_dictionaries({"key": names, "operator": st.just("Exists")}), max_size=1),
        "config": opaque_no_null,
    },
)
model_booster = st.fixed_dictionaries(
    {
        "apiVersion": st.just(API_VERSION),
        "kind": st.just("ModelBooster"),
        "spec": optional_dict(
            {
                "backend": optional_dict(
                    {
                        "name": names,
                        "type": st.sampled_from(["vLLM", "vLLMDisaggregated"]),
                        "modelURI": st.sampled_from(["hf://Qwen/Qwen2.5-0.5B", "s3://bucket/model", "pvc:///models/x"]),
                        "replicas": st.integers(0, 5),
                        "workers": st.lists(worker, min_size=1, max_size=3),
                    },
                    {
                        "cacheURI": st.sampled_from(["pvc://models", "hostpath://tmp/cache"]),
                        "env": st.lists(st.fixed_dictionaries({"name": names, "value": names}), max_size=2),
                        "schedulerName": names,
                        "runtimeClassName": names,
                    },
                )
            },
            {"name": names, "owner": names, "modelMatch": st.dictionaries(names, opaque_no_null, max_size=1)},
        ),
    }
)


def _check(model: type[BaseModel], document: dict[str, Any]) -> None:
    obj, errors = parse_model(model, document)
    assert obj is not None, [str(error) for error in errors]
    assert to_dict(obj, with_defaults=False) == document
    defaulted = to_dict(obj)
    assert contains(defaulted, document)
    assert to_dict(model.model_validate(defaulted), with_defaults=False) == defaulted


@PROPERTY
@given(model_serving)
def test_modelserving_roundtrip(document: dict[str, Any]) -> None:
    _check(ModelServing, document)


@PROPERTY
@given(autoscaling_policy)
def test_autoscalingpolicy_roundtrip(document: dict[str, Any]) -> None:
    _check(AutoscalingPolicy, document)


@PROPERTY
@given(model_booster)
def test_modelbooster_roundtrip(document: dict[str, Any]) -> None:
    _check(ModelBooster, document)
