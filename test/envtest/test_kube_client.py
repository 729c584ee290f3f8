"""The client layer against a real kube-apiserver: every verb, patch type, precondition and error class."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kthena_py.kube import AlreadyExists, Conflict, Invalid, KubeClient, NotFound, ResourceType
from kthena_py.kube.resources import CONFIGMAPS, CRDS, PODS
from kthena_py.runtime import metrics

pytestmark = pytest.mark.envtest

WIDGETS = ResourceType("test.kthena-py.io", "v1", "Widget", "widgets")

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.kthena-py.io"},
    "spec": {
        "group": "test.kthena-py.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"replicas": {"type": "integer", "minimum": 0}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer"},
                                    "selector": {"type": "string"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
async def widgets(kube: KubeClient) -> ResourceType:
    try:
        await kube.create(CRDS, WIDGET_CRD)
    except AlreadyExists:
        pass
    for _ in range(100):
        if await kube.resource_served(WIDGETS):
            return WIDGETS
        await asyncio.sleep(0.1)
    raise AssertionError("widgets CRD not served")


async def test_create_get_list_and_errors(kube: KubeClient, namespace: str) -> None:
    cm = {"metadata": {"name": "a", "labels": {"app": "x"}}, "data": {"k": "v"}}
    created = await kube.create(CONFIGMAPS, cm, namespace)
    assert created["metadata"]["uid"]
    got = await kube.get(CONFIGMAPS, "a", namespace)
    assert got["data"] == {"k": "v"}
    listed = await kube.list(CONFIGMAPS, namespace, label_selector="app=x")
    assert [o["metadata"]["name"] for o in listed.items] == ["a"]
    assert listed.items[0]["kind"] == "ConfigMap" and listed.resource_version
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIGMAPS, cm, namespace)
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, "missing", namespace)
    with pytest.raises(Invalid) as err:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "Not_Valid"}}, namespace)
    assert any(c.field == "metadata.name" for c in err.value.causes)


async def test_patch_types_and_field_managers(kube: KubeClient, namespace: str) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "p"}, "data": {"a": "1"}}, namespace)
    merged = await kube.patch(CONFIGMAPS, "p", {"data": {"b": "2"}}, namespace)
    assert merged["data"] == {"a": "1", "b": "2"}
    jsonp = await kube.patch(CONFIGMAPS, "p", [{"op": "remove", "path": "/data/a"}], namespace, patch_type="json")
    assert jsonp["data"] == {"b": "2"}
    applied = await kube.apply(
        CONFIGMAPS,
        {"metadata": {"name": "p", "namespace": namespace}, "data": {"c": "3"}},
        field_manager="reconciler-one",
    )
    assert applied["data"]["c"] == "3"
    managers = {m["manager"] for m in applied["metadata"]["managedFields"]}
    assert "reconciler-one" in managers
    # A second manager applying a conflicting value without force is refused.
    with pytest.raises(Conflict):
        await kube.apply(
            CONFIGMAPS,
            {"metadata": {"name": "p", "namespace": namespace}, "data": {"c": "4"}},
            field_manager="reconciler-two",
            force=False,
        )


async def test_delete_preconditions(kube: KubeClient, namespace: str) -> None:
    first = await kube.create(CONFIGMAPS, {"metadata": {"name": "d"}}, namespace)
    await kube.delete(CONFIGMAPS, "d", namespace, uid=first["metadata"]["uid"])
    second = await kube.create(CONFIGMAPS, {"metadata": {"name": "d"}}, namespace)
    # A decision taken on the first object must not delete its replacement.
    with pytest.raises(Conflict):
        await kube.delete(CONFIGMAPS, "d", namespace, uid=first["metadata"]["uid"])
    with pytest.raises(Conflict):
        await kube.delete(CONFIGMAPS, "d", namespace, resource_version="1")
    await kube.delete(CONFIGMAPS, "d", namespace, uid=second["metadata"]["uid"])
    with pytest.raises(NotFound):
        await kube.delete(CONFIGMAPS, "d", namespace)


async def test_replace_is_guarded_by_resource_version(kube: KubeClient, namespace: str) -> None:
    obj = await kube.create(CONFIGMAPS, {"metadata": {"name": "r"}, "data": {"v": "1"}}, namespace)
    obj["data"] = {"v": "2"}
    await kube.replace(CONFIGMAPS, obj, namespace)
    obj["data"] = {"v": "3"}  # still carries the old resourceVersion
    with pytest.raises(Conflict):
        await kube.replace(CONFIGMAPS, obj, namespace)


async def test_custom_resources_status_and_scale(kube: KubeClient, namespace: str, widgets: ResourceType) -> None:
    name = f"w-{uuid.uuid4().hex[:6]}"
    await kube.create(widgets, {"metadata": {"name": name}, "spec": {"replicas": 1}}, namespace)
    with pytest.raises(Invalid) as err:
        await kube.create(widgets, {"metadata": {"name": "bad"}, "spec": {"replicas": -1}}, namespace)
    assert any("spec.replicas" in c.field for c in err.value.causes)
    # Status is only writable through the subresource.
    await kube.patch(widgets, name, {"status": {"replicas": 1, "selector": "a=b"}}, namespace, subresource="status")
    await kube.patch(widgets, name, {"status": {"replicas": 7}}, namespace)
    assert (await kube.get(widgets, name, namespace))["status"]["replicas"] == 1
    scale = await kube.get_scale(widgets, name, namespace)
    assert scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "a=b"
    await kube.set_scale(widgets, name, namespace, 3)
    assert (await kube.get(widgets, name, namespace))["spec"]["replicas"] == 3


def watched(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_watch_streams_events(kube: KubeClient, namespace: str) -> None:
    listed = await kube.list(CONFIGMAPS, namespace)
    seen: list[tuple[str, str]] = []
    sizes: list[int] = []
    bytes_before = watched("kthena_watch_received_bytes_total", {"resource": "configmaps"})
    events_before = {
        t: watched("kthena_watch_events_total", {"resource": "configmaps", "type": t})
        for t in ("ADDED", "MODIFIED", "DELETED")
    }

    async def consume() -> None:
        async for ev in kube.watch(CONFIGMAPS, namespace, resource_version=listed.resource_version):
            sizes.append(len(json.dumps({"type": ev.type, "object": ev.object}, separators=(",", ":"))))
            if ev.type != "BOOKMARK":
                seen.append((ev.type, ev.object["metadata"]["name"]))
            if len(seen) == 3:
                return

    task = asyncio.create_task(consume())
    await kube.create(CONFIGMAPS, {"metadata": {"name": "w"}}, namespace)
    await kube.patch(CONFIGMAPS, "w", {"data": {"x": "y"}}, namespace)
    await kube.delete(CONFIGMAPS, "w", namespace)
    await asyncio.wait_for(task, 30)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    # every line the stream carried is counted: at least the compact JSON of each event, plus its newline
    received = watched("kthena_watch_received_bytes_total", {"resource": "configmaps"}) - bytes_before
    assert received >= sum(sizes) + len(sizes)
    for t in ("ADDED", "MODIFIED", "DELETED"):
        assert watched("kthena_watch_events_total", {"resource": "configmaps", "type": t}) - events_before[t] == 1, t


@pytest.mark.parametrize("kind", ["pod", "widget"])
async def test_watch_without_managed_fields_delivers_the_rest_of_each_object(
    kube: KubeClient, namespace: str, widgets: ResourceType, kind: str
) -> None:
    """Both layouts the API server writes (a built-in kind, a custom resource) are cut exactly."""
    name = f"m-{uuid.uuid4().hex[:6]}"
    if kind == "pod":
        rt, body = (
            PODS,
            {"metadata": {"name": name, "labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        )
    else:
        rt, body = widgets, {"metadata": {"name": name, "labels": {"a": "b"}}, "spec": {"replicas": 1}}
    listed = await kube.list(rt, namespace)
    seen: list[dict[str, object]] = []

    async def consume() -> None:
        async for ev in kube.watch(rt, namespace, resource_version=listed.resource_version, managed_fields=False):
            if ev.type == "MODIFIED":
                seen.append(ev.object)
                return

    task = asyncio.create_task(consume())
    await kube.create(rt, body, namespace)
    await kube.patch(rt, name, {"metadata": {"labels": {"c": "d"}}}, namespace, field_manager="second-writer")
    await asyncio.wait_for(task, 30)
    stored = await kube.get(rt, name, namespace)
    assert len(stored["metadata"]["managedFields"]) == 2
    del stored["metadata"]["managedFields"]
    assert seen == [stored]


async def test_answers_without_managed_fields_keep_the_rest_and_lists_stay_whole(
    kube: KubeClient, namespace: str, widgets: ResourceType
) -> None:
    kube.answers_managed_fields = False
    name = f"a-{uuid.uuid4().hex[:6]}"
    created = await kube.create(
        PODS, {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, namespace
    )
    applied = await kube.apply(
        widgets, {"metadata": {"name": name}, "spec": {"replicas": 2}}, field_manager="first", namespace=namespace
    )
    patched = await kube.patch(widgets, name, {"metadata": {"labels": {"c": "d"}}}, namespace, field_manager="second")
    answers = [
        created,
        applied,
        patched,
        await kube.get(PODS, name, namespace),
        await kube.get(widgets, name, namespace),
    ]
    assert all("managedFields" not in answer["metadata"] for answer in answers)
    assert patched["spec"] == {"replicas": 2} and patched["metadata"]["labels"] == {"c": "d"}
    assert created["spec"]["containers"][0]["image"] == "i"
    # lists are decoded as sent, every item with its managedFields
    listed = await kube.list(widgets, namespace)
    assert [len(item["metadata"]["managedFields"]) for item in listed.items if item["metadata"]["name"] == name] == [2]
    kube.answers_managed_fields = True
    whole = await kube.get(widgets, name, namespace)
    assert len(whole["metadata"]["managedFields"]) == 2
    del whole["metadata"]["managedFields"]
    assert whole == answers[-1]


async def test_discovery(kube: KubeClient, widgets: ResourceType) -> None:
    assert await kube.resource_served(widgets)
    assert not await kube.resource_served(ResourceType("nope.example.com", "v1", "Nope", "nopes"))
    assert (await kube.server_version())["gitVersion"].startswith("v1.")
