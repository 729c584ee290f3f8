"""Reading policies into planner inputs: defaults, exact numbers, target references."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from kthena_py.controllers.autoscaling.convert import (
    PolicyError,
    TargetKey,
    behavior,
    cost_params,
    parse_policy,
    ratio_constraint,
    resolve_target,
    target_refs,
)
from kthena_py.plan.autoscaling import Behavior, PanicPolicy, StablePolicy

from .conftest import policy


def test_behavior_defaults_and_kthena_extra_fields() -> None:
    assert behavior(None) == Behavior()
    p = parse_policy(
        policy(
            "p",
            {
                "behavior": {
                    "scaleUp": {
                        "stablePolicy": {"instances": 4, "period": "1m", "stabilizationWindow": "0s"},
                        "panicPolicy": {"percent": 200, "period": "10s", "panicModeHold": "45s"},
                    },
                    "scaleDown": {"percent": 50, "selectPolicy": "And", "stabilizationWindow": "5m"},
                },
                "homogeneousTarget": {"minReplicas": 1, "maxReplicas": 2, "target": {"targetRef": {"name": "x"}}},
            },
        )
    )
    b = behavior(p.spec.behavior)
    assert b.scale_up.stable_policy == StablePolicy(instances=4, period=60.0, stabilization_window=0.0)
    assert b.scale_up.panic_policy == PanicPolicy(
        percent=200, period=10.0, panic_threshold_percent=200, panic_mode_hold=45.0
    )
    assert b.scale_down == StablePolicy(percent=50, select_policy="And", stabilization_window=300.0)
    long = parse_policy(policy("p", {"behavior": {"scaleDown": {"period": "31m"}}}))
    with pytest.raises(PolicyError, match="30 minutes"):
        behavior(long.spec.behavior)


def test_exact_ratio_bounds() -> None:
    p = parse_policy(
        policy(
            "p",
            {
                "disaggregatedTarget": {
                    "targetRef": {"name": "x"},
                    "roles": {"a": {"minReplicas": 1, "maxReplicas": 2}},
                    "ratioConstraint": {
                        "numeratorRole": "a",
                        "denominatorRole": "b",
                        "minRatio": "250m",
                        "maxRatio": "0.7",
                    },
                }
            },
        )
    )
    assert p.spec.disaggregated_target is not None
    c = ratio_constraint(p.spec.disaggregated_target.ratio_constraint)
    assert c is not None and c.min_ratio == Fraction(1, 4) and c.max_ratio == Fraction(7, 10)
    assert Decimal("0.7") == Decimal(c.max_ratio.numerator) / c.max_ratio.denominator


def test_target_refs() -> None:
    assert resolve_target({"name": "a"}, "ns") == TargetKey("ns", "a")
    assert resolve_target({"name": "a", "namespace": "other", "kind": "ModelServing"}, "ns") == TargetKey("other", "a")
    # a manager caching only its own namespaces (--shard-informers) refuses another namespace, and only that
    assert resolve_target({"name": "a", "namespace": "ns"}, "ns", same_namespace=True) == TargetKey("ns", "a")
    assert resolve_target({"name": "a"}, "ns", same_namespace=True) == TargetKey("ns", "a")
    with pytest.raises(PolicyError, match=r"targetRef\.namespace other is not the policy's namespace ns"):
        resolve_target({"name": "a", "namespace": "other"}, "ns", same_namespace=True)
    with pytest.raises(PolicyError, match="target ref kind Deployment, name: a not supported"):
        resolve_target({"name": "a", "kind": "Deployment"}, "ns")
    with pytest.raises(PolicyError, match="target ref group apps, kind ModelServing, name: a not supported"):
        resolve_target({"name": "a", "apiVersion": "apps/v1"}, "ns")
    assert target_refs(policy("p", {"homogeneousTarget": {"target": {"targetRef": {"name": "a"}}}})) == (
        "homogeneous",
        [TargetKey("ns", "a")],
    )
    assert target_refs(policy("p", {"spec": "garbage"})) == ("", [])


def test_cost_params_are_named_by_namespace_and_name() -> None:
    p = parse_policy(
        policy(
            "p",
            {
                "heterogeneousTarget": {
                    "params": [
                        {
                            "cost": 100,
                            "minReplicas": 1,
                            "maxReplicas": 3,
                            "target": {"targetRef": {"name": "llama", "namespace": "team-a"}},
                        },
                        {"minReplicas": 2, "maxReplicas": 5, "target": {"targetRef": {"name": "llama"}}},
                    ]
                }
            },
            namespace="policy-ns",
        )
    )
    params = [c for c, _, _ in cost_params(p)]
    assert [(c.name, c.cost) for c in params] == [("team-a/llama", 100), ("policy-ns/llama", 0)]
    dup = parse_policy(
        policy(
            "p",
            {
                "heterogeneousTarget": {
                    "params": [
                        {"minReplicas": 1, "maxReplicas": 3, "target": {"targetRef": {"name": "x"}}},
                        {"minReplicas": 1, "maxReplicas": 3, "target": {"targetRef": {"name": "x"}}},
                    ]
                }
            },
        )
    )
    with pytest.raises(PolicyError, match="listed twice"):
        cost_params(dup)
