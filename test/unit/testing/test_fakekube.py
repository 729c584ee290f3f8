"""FakeKube answers as the API server does: the semantics unit tests of the controllers rely on."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import AlreadyExists, ApiError, Conflict, Invalid, NotFound
from kthena_py.kube.resources import CONFIGMAPS, PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import Call, FakeKube


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": dict(data)}


def _ms(name: str, replicas: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": replicas}}


async def test_create_assigns_uid_and_resource_version_and_refuses_a_taken_name() -> None:
    kube = FakeKube()
    first = await kube.create(CONFIGMAPS, _cm("a"))
    assert first["metadata"]["uid"] and first["metadata"]["resourceVersion"] == "1"
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIGMAPS, _cm("a"))
    other = await kube.create(CONFIGMAPS, {"metadata": {"generateName": "a-", "namespace": "ns"}})
    assert other["metadata"]["name"].startswith("a-") and other["metadata"]["uid"] != first["metadata"]["uid"]


async def test_stale_resource_version_is_a_conflict() -> None:
    kube = FakeKube()
    created = await kube.create(CONFIGMAPS, _cm("a", k="1"))
    await kube.patch(CONFIGMAPS, "a", {"data": {"k": "2"}}, "ns")
    stale = {**created, "data": {"k": "3"}}
    with pytest.raises(Conflict):
        await kube.replace(CONFIGMAPS, stale, "ns")
    with pytest.raises(Conflict):
        await kube.patch(CONFIGMAPS, "a", {"metadata": {"resourceVersion": "1"}, "data": {"k": "3"}}, "ns")
    assert (kube.peek(CONFIGMAPS, "a", "ns") or {})["data"] == {"k": "2"}


async def test_json_patch_test_failure_is_422_and_changes_nothing() -> None:
    kube = FakeKube()
    await kube.create(CONFIGMAPS, _cm("a", k="1"))
    ops = [{"op": "test", "path": "/data/k", "value": "0"}, {"op": "replace", "path": "/data/k", "value": "2"}]
    with pytest.raises(Invalid) as failed:
        await kube.patch(CONFIGMAPS, "a", ops, "ns", patch_type="json")
    assert failed.value.status == 422
    assert (kube.peek(CONFIGMAPS, "a", "ns") or {})["data"] == {"k": "1"}
    ops[0]["value"] = "1"
    patched = await kube.patch(CONFIGMAPS, "a", ops, "ns", patch_type="json")
    assert patched["data"] == {"k": "2"}


async def test_merge_patch_null_removes_a_key() -> None:
    kube = FakeKube()
    await kube.create(CONFIGMAPS, _cm("a", k="1", j="2"))
    patched = await kube.patch(CONFIGMAPS, "a", {"data": {"k": None}}, "ns")
    assert patched["data"] == {"j": "2"}


async def test_apply_by_two_managers_keeps_each_others_conditions() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, _ms("m"))

    def condition(type_: str, status: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "m", "namespace": "ns"},
            "status": {"conditions": [{"type": type_, "status": status}]},
        }

    await kube.apply(MODELSERVINGS, condition("Available", "True"), field_manager="one", subresource="status")
    await kube.apply(MODELSERVINGS, condition("Evictable", "False"), field_manager="two", subresource="status")
    await kube.apply(MODELSERVINGS, condition("Available", "False"), field_manager="one", subresource="status")
    conditions = (kube.peek(MODELSERVINGS, "m", "ns") or {})["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions} == {"Available": "False", "Evictable": "False"}
    # A manager that stops applying a condition removes its own, never another's.
    await kube.apply(
        MODELSERVINGS,
        {"metadata": {"name": "m", "namespace": "ns"}, "status": {"conditions": []}},
        field_manager="one",
        subresource="status",
    )
    conditions = (kube.peek(MODELSERVINGS, "m", "ns") or {})["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Evictable"]


async def test_apply_conflicts_with_another_managers_field_unless_forced() -> None:
    kube = FakeKube()
    await kube.apply(CONFIGMAPS, _cm("a", k="1"), field_manager="one")
    with pytest.raises(Conflict):
        await kube.patch(CONFIGMAPS, "a", _cm("a", k="2"), "ns", patch_type="apply", field_manager="two")
    forced = await kube.apply(CONFIGMAPS, _cm("a", k="2"), field_manager="two", force=True)
    assert forced["data"] == {"k": "2"}


async def test_status_and_main_resource_write_their_own_parts() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, {**_ms("m"), "status": {"replicas": 0}})
    patched = await kube.patch(MODELSERVINGS, "m", {"spec": {"replicas": 2}, "status": {"replicas": 9}}, "ns")
    assert patched["spec"]["replicas"] == 2 and patched["status"]["replicas"] == 0
    assert patched["metadata"]["generation"] == 2
    patched = await kube.patch(MODELSERVINGS, "m", {"status": {"replicas": 2}}, "ns", subresource="status")
    assert patched["status"]["replicas"] == 2 and patched["metadata"]["generation"] == 2


async def test_scale_subresource() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, {**_ms("m", 1), "status": {"replicas": 1}})
    scale = await kube.set_scale(MODELSERVINGS, "m", "ns", 3)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 3 and scale["status"]["replicas"] == 1
    assert (await kube.get_scale(MODELSERVINGS, "m", "ns"))["spec"]["replicas"] == 3
    assert (kube.peek(MODELSERVINGS, "m", "ns") or {})["spec"]["replicas"] == 3
    with pytest.raises(NotFound):
        await kube.set_scale(MODELSERVINGS, "other", "ns", 3)


async def test_scale_patch_honours_a_resource_version_precondition() -> None:
    kube = FakeKube()
    stored = kube.put(MODELSERVINGS, _ms("m", 0))
    rv = stored["metadata"]["resourceVersion"]
    body = {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 1}}
    await kube.patch(MODELSERVINGS, "m", body, "ns", subresource="scale")
    with pytest.raises(Conflict):
        await kube.patch(MODELSERVINGS, "m", {**body, "spec": {"replicas": 2}}, "ns", subresource="scale")
    assert (kube.peek(MODELSERVINGS, "m", "ns") or {})["spec"]["replicas"] == 1


async def test_delete_with_uid_precondition() -> None:
    kube = FakeKube()
    old = await kube.create(CONFIGMAPS, _cm("a"))
    await kube.delete(CONFIGMAPS, "a", "ns")
    await kube.create(CONFIGMAPS, _cm("a"))
    with pytest.raises(Conflict):
        await kube.delete(CONFIGMAPS, "a", "ns", uid=old["metadata"]["uid"])
    assert kube.peek(CONFIGMAPS, "a", "ns") is not None
    with pytest.raises(NotFound):
        await kube.delete(CONFIGMAPS, "b", "ns")


async def test_finalizers_hold_a_deleted_object_until_emptied() -> None:
    kube = FakeKube()
    await kube.create(CONFIGMAPS, {**_cm("a"), "metadata": {"name": "a", "namespace": "ns", "finalizers": ["x"]}})
    await kube.delete(CONFIGMAPS, "a", "ns")
    assert (kube.peek(CONFIGMAPS, "a", "ns") or {})["metadata"]["deletionTimestamp"]
    await kube.patch(CONFIGMAPS, "a", {"metadata": {"finalizers": None}}, "ns")
    assert kube.peek(CONFIGMAPS, "a", "ns") is None


async def test_lists_select_by_label_and_page() -> None:
    kube = FakeKube()
    for n in range(5):
        kube.put(PODS, {"metadata": {"name": f"p{n}", "namespace": "ns", "labels": {"app": "x" if n % 2 else "y"}}})
    kube.put(PODS, {"metadata": {"name": "q", "namespace": "other", "labels": {"app": "x"}}})
    listed = await kube.list_all(PODS, "ns", label_selector="app=x", page_size=1)
    assert [p["metadata"]["name"] for p in listed.items] == ["p1", "p3"]
    listed = await kube.list_all(PODS, label_selector="app in (x),app!=y")
    assert [p["metadata"]["name"] for p in listed.items] == ["p1", "p3", "q"]
    page = await kube.list(PODS, "ns", limit=2)
    assert len(page.items) == 2 and page.continue_token


async def test_changes_reach_an_attached_cache_as_a_watch_would_deliver_them() -> None:
    kube = FakeKube()
    cache = SharedCache(kube, namespace="ns")
    cache.select(PODS, "app=x")
    kube.put(PODS, {"metadata": {"name": "before", "namespace": "ns", "labels": {"app": "x"}}})
    added: list[str] = []

    class Handler:
        def on_add(self, obj: dict[str, Any]) -> None:
            added.append(obj["metadata"]["name"])

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            added.append("~" + new["metadata"]["name"])

        def on_delete(self, obj: dict[str, Any]) -> None:
            added.append("-" + obj["metadata"]["name"])

    cache.informer(PODS).add_handler(Handler())
    kube.attach(cache)
    assert cache.synced and cache.get(PODS, "before", "ns") is not None
    await kube.create(PODS, {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}}})
    await kube.create(PODS, {"metadata": {"name": "unselected", "namespace": "ns", "labels": {"app": "y"}}})
    await kube.create(PODS, {"metadata": {"name": "elsewhere", "namespace": "other", "labels": {"app": "x"}}})
    await kube.patch(PODS, "p", {"metadata": {"annotations": {"a": "b"}}}, "ns")
    await kube.patch(PODS, "p", {"metadata": {"labels": {"app": "y"}}}, "ns")  # leaves the selection
    await kube.delete(PODS, "before", "ns")
    assert added == ["before", "p", "~p", "-p", "-before"]
    assert cache.list(PODS) == []


async def test_interceptor_fails_alters_or_answers_a_call() -> None:
    kube = FakeKube()
    failures = [Conflict(409, "Conflict", "injected")]

    def once(call: Call) -> Any:
        if call.verb == "create" and failures:
            raise failures.pop()
        if call.verb == "patch":
            call.body = {"data": {"altered": "yes"}}
        if call.verb == "get" and call.name == "ghost":
            return {"metadata": {"name": "ghost"}}
        return None

    remove = kube.intercept(once)
    with pytest.raises(ApiError):
        await kube.create(CONFIGMAPS, _cm("a"))
    await kube.create(CONFIGMAPS, _cm("a"))
    assert (await kube.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, "ns"))["data"] == {"altered": "yes"}
    assert (await kube.get(CONFIGMAPS, "ghost", "ns"))["metadata"]["name"] == "ghost"
    remove()
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, "ghost", "ns")
    assert [c.verb for c in kube.calls] == ["create", "create", "patch", "get", "get"]


async def test_watch_replays_then_streams_until_its_timeout() -> None:
    kube = FakeKube()
    await kube.create(CONFIGMAPS, _cm("a"))
    since = kube.resource_version
    await kube.create(CONFIGMAPS, _cm("b"))
    seen = []
    async for event in kube.watch(CONFIGMAPS, "ns", resource_version="0", timeout_seconds=0):
        seen.append((event.type, event.object["metadata"]["name"]))
    assert seen == [("ADDED", "a"), ("ADDED", "b")]
    seen.clear()
    async for event in kube.watch(CONFIGMAPS, "ns", resource_version=since, timeout_seconds=0):
        seen.append((event.type, event.object["metadata"]["name"]))
    assert seen == [("ADDED", "b")]


async def test_held_changes_reach_the_cache_only_when_delivered_and_in_order() -> None:
    kube = FakeKube()
    cache = SharedCache(kube, namespace="ns")
    cache.informer(CONFIGMAPS)
    kube.attach(cache)
    kube.hold()
    await kube.create(CONFIGMAPS, _cm("a", k="1"))
    await kube.patch(CONFIGMAPS, "a", {"data": {"k": "2"}}, "ns")
    assert cache.get(CONFIGMAPS, "a", "ns") is None
    assert kube.deliver_held(1) == 1
    assert (cache.get(CONFIGMAPS, "a", "ns") or {})["data"] == {"k": "1"}
    kube.release()
    assert (cache.get(CONFIGMAPS, "a", "ns") or {})["data"] == {"k": "2"}
    await kube.delete(CONFIGMAPS, "a", "ns")
    assert cache.get(CONFIGMAPS, "a", "ns") is None


async def test_apply_of_an_absent_object_creates_it_in_one_call_owned_by_its_manager() -> None:
    kube = FakeKube()
    created = await kube.apply(CONFIGMAPS, _cm("a", k="1"), field_manager="one")
    assert created["metadata"]["uid"] and [c.verb for c in kube.calls] == ["patch"]
    with pytest.raises(Conflict):
        await kube.patch(CONFIGMAPS, "a", _cm("a", k="2"), "ns", patch_type="apply", field_manager="two")
