"""The shared status writer against a real kube-apiserver: shares by field manager on a ModelServing, a whole status
on an AutoscalingPolicy, no write on a no-op, a gone object as an outcome."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.runtime.statuswrite import StatusWriter

pytestmark = pytest.mark.envtest


def _condition(type_: str, status: str = "True", reason: str = "Because") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": f"{type_} is {status}",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1,
    }


def _modelserving(name: str) -> dict[str, Any]:
    role = {
        "name": "prefill",
        "replicas": 1,
        "workerReplicas": 0,
        "entryTemplate": {"spec": {"containers": [{"name": "e", "image": "x"}]}},
    }
    return {"metadata": {"name": name}, "spec": {"replicas": 1, "template": {"roles": [role]}}}


async def test_two_managers_share_a_modelserving_status_and_a_converged_one_is_not_written(
    kube: KubeClient, namespace: str
) -> None:
    ms = await kube.create(MODELSERVINGS, _modelserving("shared"), namespace)
    one, two = StatusWriter(kube, MODELSERVINGS, "test-one"), StatusWriter(kube, MODELSERVINGS, "test-two")
    assert (await one.apply(ms, {"conditions": [_condition("A")]})).written
    assert (
        await two.apply(await kube.get(MODELSERVINGS, "shared", namespace), {"conditions": [_condition("B")]})
    ).written
    changed = _condition("A", "False", "Other")
    assert (await one.apply(await kube.get(MODELSERVINGS, "shared", namespace), {"conditions": [changed]})).written
    stored = await kube.get(MODELSERVINGS, "shared", namespace)
    conditions = {c["type"]: c for c in stored["status"]["conditions"]}
    assert conditions == {"A": changed, "B": _condition("B")}
    # Converged: nothing is written (the resourceVersion does not move).
    assert (await two.apply(stored, {"conditions": [_condition("B")]})).state == "unchanged"
    # One gives its condition up; the other's stays.
    done = await one.apply(stored, {"conditions": []}, always=True)
    assert done.object is not None and done.object["status"]["conditions"] == [_condition("B")]
    assert (await kube.get(MODELSERVINGS, "shared", namespace))["metadata"]["resourceVersion"] == done.object[
        "metadata"
    ]["resourceVersion"]


async def test_a_gone_object_is_an_outcome_and_the_uid_does_not_guard_the_status(
    kube: KubeClient, namespace: str
) -> None:
    """The API server does not check the UID a status-subresource write carries (FakeKube does): a write from a
    stale copy lands on a same-named replacement. The writer's docstring says so; this shows when it changes."""
    ms = await kube.create(MODELSERVINGS, _modelserving("replaced"), namespace)
    writer = StatusWriter(kube, MODELSERVINGS, "test-one")
    await kube.delete(MODELSERVINGS, "replaced", namespace)
    assert (await writer.apply(ms, {"conditions": [_condition("A")]})).gone
    assert (await writer.replace(ms, {"observedGeneration": 1})).gone
    replacement = await kube.create(MODELSERVINGS, _modelserving("replaced"), namespace)
    done = await writer.apply(ms, {"conditions": [_condition("A")]})
    assert done.object is not None and done.object["metadata"]["uid"] == replacement["metadata"]["uid"]


async def test_replace_makes_an_autoscalingpolicy_status_exactly_the_one_given(
    kube: KubeClient, namespace: str
) -> None:
    policy = await kube.create(
        AUTOSCALINGPOLICIES,
        {
            "metadata": {"name": "p"},
            "spec": {
                "metrics": [{"name": "rps", "targetValue": "10"}],
                "homogeneousTarget": {"target": {"targetRef": {"name": "ms"}}, "minReplicas": 1, "maxReplicas": 2},
            },
        },
        namespace,
    )
    writer = StatusWriter(kube, AUTOSCALINGPOLICIES, "test-autoscaler")
    first = {"observedGeneration": 1, "homogeneousStatus": {"name": "ms", "currentReplicas": 1, "desiredReplicas": 1}}
    done = await writer.replace(policy, first)
    assert done.object is not None and done.object["status"] == first
    second = {"observedGeneration": 1, "conditions": [_condition("Ready")]}
    done = await writer.replace(done.object, second)
    assert done.object is not None and done.object["status"] == second
    assert (await writer.replace(await kube.get(AUTOSCALINGPOLICIES, "p", namespace), second)).state == "unchanged"
