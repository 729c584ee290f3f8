"""The rules across objects: one pool per ModelServing, no AutoscalingPolicy on a pool member."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.validation import ErrorType, autoscalingpolicy_conflicts, modelpool_conflicts
from kthena_py.api.validation.poolmembers import ONE_WRITER, policy_targets, pool_members


def pool(name: str, *members: str) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {"name": name},
        "spec": {"members": [{"modelServingRef": {"name": member}} for member in members]},
    }


def _ref(name: str, kind: str | None = "ModelServing") -> dict[str, Any]:
    return {"name": name} if kind is None else {"kind": kind, "name": name}


def homogeneous(name: str, target: str, kind: str | None = "ModelServing") -> dict[str, Any]:
    target_spec = {"targetRef": _ref(target, kind)}
    spec = {"homogeneousTarget": {"target": target_spec, "minReplicas": 1, "maxReplicas": 2}}
    return {"kind": "AutoscalingPolicy", "metadata": {"name": name}, "spec": spec}


def heterogeneous(name: str, *targets: str) -> dict[str, Any]:
    params = [{"target": {"targetRef": _ref(t)}, "minReplicas": 0, "maxReplicas": 1} for t in targets]
    return {
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": {"heterogeneousTarget": {"params": params}},
    }


def disaggregated(name: str, target: str) -> dict[str, Any]:
    spec = {"disaggregatedTarget": {"targetRef": _ref(target), "roles": {}}}
    return {"kind": "AutoscalingPolicy", "metadata": {"name": name}, "spec": spec}


def test_every_kind_of_target_is_read_with_its_path() -> None:
    assert policy_targets(homogeneous("p", "a")) == [("spec.homogeneousTarget.target.targetRef.name", "a")]
    assert policy_targets(homogeneous("p", "a", kind=None)) == [("spec.homogeneousTarget.target.targetRef.name", "a")]
    assert policy_targets(homogeneous("p", "a", kind="Deployment")) == []
    assert policy_targets(heterogeneous("p", "a", "b")) == [
        ("spec.heterogeneousTarget.params[0].target.targetRef.name", "a"),
        ("spec.heterogeneousTarget.params[1].target.targetRef.name", "b"),
    ]
    assert policy_targets(disaggregated("p", "a")) == [("spec.disaggregatedTarget.targetRef.name", "a")]


@pytest.mark.parametrize(
    "malformed",
    [{}, {"spec": None}, {"spec": {"members": "a"}}, {"spec": {"members": [None, {"modelServingRef": 3}]}}],
)
def test_malformed_neighbours_name_nothing(malformed: dict[str, Any]) -> None:
    assert pool_members(malformed) == []
    assert policy_targets(malformed) == []
    assert autoscalingpolicy_conflicts(homogeneous("p", "a"), [malformed]) == []


def test_a_member_of_another_pool_is_refused_naming_that_pool() -> None:
    (error,) = modelpool_conflicts(pool("new", "a", "b"), [pool("old", "b"), pool("new", "a")], [])
    assert error.path == "spec.members[1].modelServingRef.name"
    assert error.type is ErrorType.FORBIDDEN
    assert error.message.startswith('ModelServing "b" is already a member of ModelPool "old"')


def test_a_pool_listing_an_autoscaled_modelserving_is_refused_naming_the_policy() -> None:
    (error,) = modelpool_conflicts(pool("gpu", "a", "b"), [], [homogeneous("scale-a", "a")])
    assert error.path == "spec.members[0].modelServingRef.name"
    assert 'AutoscalingPolicy "scale-a"' in error.message and ONE_WRITER in error.message


@pytest.mark.parametrize("policy", [homogeneous("p", "b"), heterogeneous("p", "x", "b"), disaggregated("p", "b")])
def test_a_policy_targeting_a_member_is_refused_naming_the_pool_and_why(policy: dict[str, Any]) -> None:
    (error,) = autoscalingpolicy_conflicts(policy, [pool("gpu", "a", "b")])
    assert error.path == policy_targets(policy)[-1][0]
    assert error.message == (
        'ModelServing "b" is a member of ModelPool "gpu": the pool controller is the only writer of its members\' '
        "replicas, so no AutoscalingPolicy may target it"
    )
    assert str(error).startswith(f"{error.path}: Forbidden: ")


def test_ignored_names_are_not_checked() -> None:
    assert modelpool_conflicts(pool("new", "a"), [pool("old", "a")], [homogeneous("p", "a")], ignore={"a"}) == []
    assert autoscalingpolicy_conflicts(homogeneous("p", "a"), [pool("gpu", "a")], ignore=["a"]) == []


_MEMBERS = st.sampled_from("abcdef")


@given(
    mine=st.lists(_MEMBERS, min_size=1, max_size=4, unique=True),
    others=st.dictionaries(st.sampled_from(["p1", "p2", "p3"]), st.lists(_MEMBERS, max_size=3), max_size=3),
    scaled=st.dictionaries(st.sampled_from(["s1", "s2"]), _MEMBERS, max_size=2),
)
def test_exactly_the_shared_and_the_scaled_members_are_refused(
    mine: list[str], others: dict[str, list[str]], scaled: dict[str, str]
) -> None:
    neighbours = [pool(name, *members) for name, members in others.items()]
    policies = [homogeneous(name, target) for name, target in scaled.items()]
    errors = modelpool_conflicts(pool("mine", *mine), neighbours, policies)
    shared = {m for members in others.values() for m in members}
    expected = [
        (f"spec.members[{i}].modelServingRef.name", kind)
        for i, member in enumerate(mine)
        for kind, hit in (("pool", member in shared), ("policy", member in scaled.values()))
        if hit
    ]
    found = [(e.path, "pool" if "already a member" in e.message else "policy") for e in errors]
    assert found == expected
