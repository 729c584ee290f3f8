"""The webhook's checks across objects, through the validating handlers with a table of neighbours."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from kthena_py.controllers.admission.handlers import validator
from kthena_py.controllers.admission.poolguard import client_lister
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELPOOLS
from kthena_py.kube import ApiError, NotFound, ResourceType
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.webhook import AdmissionRequest, AdmissionResponse


class Neighbours:
    """The namespace's objects by resource type; records every list; can fail."""

    def __init__(self, **items: list[dict[str, Any]]) -> None:
        self.items = items
        self.listed: list[str] = []
        self.failure: ApiError | None = None

    async def __call__(self, rt: ResourceType, namespace: str) -> list[dict[str, Any]]:
        self.listed.append(f"{namespace}/{rt.plural}")
        if self.failure is not None:
            raise self.failure
        return self.items.get(rt.plural, [])


def _pool(name: str, *members: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"members": [{"modelServingRef": {"name": m}} for m in members], **spec},
    }


def _policy(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "metrics": [{"name": "kv", "targetValue": "1"}],
            "homogeneousTarget": {
                "target": {"targetRef": {"kind": "ModelServing", "name": target}},
                "minReplicas": 1,
                "maxReplicas": 2,
            },
        },
    }


def _request(obj: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    return AdmissionRequest.from_dict(
        {
            "uid": "1",
            "operation": "CREATE" if old is None else "UPDATE",
            "name": obj["metadata"]["name"],
            "namespace": "team",
            "object": obj,
            "oldObject": old,
        }
    )


def _causes(response: AdmissionResponse) -> dict[str, str]:
    return {cause.field: cause.message for cause in response.causes}


async def test_a_pool_sharing_a_member_with_another_pool_is_refused() -> None:
    neighbours = Neighbours(modelpools=[_pool("other", "b")])
    response = await validator("ModelPool", neighbours)(_request(_pool("gpu", "a", "b")))
    assert (response.allowed, response.code, response.reason) == (False, 422, "Invalid")
    assert _causes(response) == {
        "spec.members[1].modelServingRef.name": 'Forbidden: ModelServing "b" is already a member of ModelPool '
        '"other": a ModelServing belongs to one pool at most (the pool controller is the only writer of its '
        "members' replicas)"
    }
    assert neighbours.listed == ["team/modelpools", "team/autoscalingpolicies"]


async def test_a_policy_on_a_member_is_refused_and_one_on_another_modelserving_is_admitted() -> None:
    neighbours = Neighbours(modelpools=[_pool("gpu", "a", "b")])
    handler = validator("AutoscalingPolicy", neighbours)
    refused = await handler(_request(_policy("scale-b", "b")))
    assert not refused.allowed
    assert 'is a member of ModelPool "gpu"' in _causes(refused)["spec.homogeneousTarget.target.targetRef.name"]
    assert (await handler(_request(_policy("scale-c", "c")))).allowed


async def test_an_update_is_checked_only_for_what_it_adds() -> None:
    neighbours = Neighbours(modelpools=[_pool("other", "b")], autoscalingpolicies=[_policy("scale-a", "a")])
    handler = validator("ModelPool", neighbours)
    stored = _pool("gpu", "a", "b")
    # A conflict that predates the update (admitted concurrently) does not block an unrelated edit ...
    assert (await handler(_request(_pool("gpu", "a", "b", slots=2), stored))).allowed
    assert neighbours.listed == []
    # ... but a member the update adds is checked.
    neighbours.items["modelpools"].append(_pool("third", "c"))
    response = await handler(_request(_pool("gpu", "a", "b", "c"), stored))
    assert list(_causes(response)) == ["spec.members[2].modelServingRef.name"]


async def test_object_rules_come_first_and_other_kinds_list_nothing() -> None:
    neighbours = Neighbours(modelpools=[_pool("other", "a")])
    response = await validator("ModelPool", neighbours)(_request(_pool("gpu", "a", "a")))
    assert list(_causes(response)) == ["spec.members[1].modelServingRef.name"]
    assert "Duplicate value" in _causes(response)["spec.members[1].modelServingRef.name"]
    assert neighbours.listed == []


async def test_a_failed_list_refuses_the_write_instead_of_admitting_it_unchecked() -> None:
    neighbours = Neighbours()
    neighbours.failure = ApiError(500, "InternalError", "etcd is away")
    response = await validator("AutoscalingPolicy", neighbours)(_request(_policy("scale-a", "a")))
    assert (response.allowed, response.code) == (False, 503)
    assert "cannot list the modelpools of namespace 'team'" in response.message and "etcd is away" in response.message


async def test_without_a_lister_only_the_object_rules_apply() -> None:
    assert (await validator("ModelPool")(_request(_pool("gpu", "a")))).allowed


def test_the_resource_types_are_ours() -> None:
    assert MODELPOOLS.path("team") == "/apis/serving.kthena-py.io/v1alpha1/namespaces/team/modelpools"
    assert AUTOSCALINGPOLICIES.plural == "autoscalingpolicies"


class _Client:
    """Answers list_all from a table; a missing resource type is the API server's 404 (CRD not installed)."""

    def __init__(self, items: dict[str, list[dict[str, Any]]]) -> None:
        self.items = items

    async def list_all(self, rt: ResourceType, namespace: str | None = None) -> Any:
        if rt.plural not in self.items:
            raise NotFound(404, "NotFound", "the server could not find the requested resource")
        return SimpleNamespace(items=self.items[rt.plural])


async def test_the_client_lister_reads_a_missing_crd_as_no_objects() -> None:
    lister = client_lister(cast(Any, _Client({"autoscalingpolicies": [_policy("p", "a")]})))
    assert await lister(MODELPOOLS, "team") == []
    assert [p["metadata"]["name"] for p in await lister(AUTOSCALINGPOLICIES, "team")] == ["p"]


def _count(kind: str, result: str) -> float:
    return REGISTRY.get_sample_value("kthena_admission_pool_guard_total", {"kind": kind, "result": result}) or 0.0


async def test_each_checked_write_is_counted_by_result_and_unchecked_ones_are_not() -> None:
    before = {r: _count("ModelPool", r) for r in ("admitted", "refused", "unavailable")}
    neighbours = Neighbours(modelpools=[_pool("other", "b")])
    handler = validator("ModelPool", neighbours)
    await handler(_request(_pool("gpu", "a")))
    await handler(_request(_pool("gpu", "b")))
    await handler(_request(_pool("gpu", "a", slots=2), _pool("gpu", "a")))  # adds no member: not checked
    neighbours.failure = ApiError(500, "InternalError", "etcd is away")
    await handler(_request(_pool("gpu", "c")))
    after = {r: _count("ModelPool", r) for r in ("admitted", "refused", "unavailable")}
    assert {r: after[r] - before[r] for r in after} == {"admitted": 1, "refused": 1, "unavailable": 1}
