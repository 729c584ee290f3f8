"""The shared status writer against FakeKube: shares by field manager, no write on a no-op, faults as retries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kthena_py.kube import ApiError, Conflict, Invalid, ServerError
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.controller import Controller
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.runtime.statuswrite import StatusWriter, holds
from kthena_py.testing.fake import Call, FakeKube

WIDGETS = ResourceType("example.io", "v1", "Widget", "widgets")
"""A kind the writer knows nothing about."""


def _condition(type_: str, status: str = "True", reason: str = "Because") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": "T0"}


async def _widget(kube: FakeKube, name: str = "w", status: dict[str, Any] | None = None) -> KubeObject:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"size": 1}}
    if status is not None:
        body["status"] = status
    return await kube.create(WIDGETS, body)


def _status_writes(kube: FakeKube) -> list[Call]:
    return [c for c in kube.calls_of("patch", WIDGETS) if c.subresource == "status"]


def test_holds_compares_conditions_by_type_and_ignores_others() -> None:
    current = {"replicas": 2, "conditions": [_condition("A"), _condition("B")]}
    assert holds(current, {"conditions": [_condition("B")]})
    assert holds(current, {"replicas": 2, "conditions": [_condition("A")]})
    assert not holds(current, {"conditions": [_condition("B", "False")]})
    assert not holds(current, {"conditions": [_condition("C")]})
    assert not holds(current, {"replicas": 3})
    assert holds(current, {})


async def test_apply_writes_the_share_then_nothing_once_converged() -> None:
    kube = FakeKube()
    obj = await _widget(kube)
    writer = StatusWriter(kube, WIDGETS, "one")
    share = {"replicas": 1, "conditions": [_condition("Ready")]}
    done = await writer.apply(obj, share)
    assert done.written and done.object is not None
    assert done.object["status"] == share
    write = _status_writes(kube)[0]
    assert write.options == {"patch_type": "apply", "field_manager": "one", "force": True}
    assert write.body["apiVersion"] == "example.io/v1" and write.body["kind"] == "Widget"
    assert write.body["metadata"] == {"name": "w", "namespace": "ns", "uid": obj["metadata"]["uid"]}
    # A restart on a converged cluster: a new writer, the object as stored, the same share: no write at all.
    stored = await kube.get(WIDGETS, "w", "ns")
    again = await StatusWriter(kube, WIDGETS, "one").apply(stored, share)
    assert again.state == "unchanged" and again.object is None
    assert len(_status_writes(kube)) == 1


async def test_two_managers_conditions_both_survive() -> None:
    kube = FakeKube()
    await _widget(kube)
    one, two = StatusWriter(kube, WIDGETS, "one"), StatusWriter(kube, WIDGETS, "two")
    await one.apply(await kube.get(WIDGETS, "w", "ns"), {"conditions": [_condition("A")]})
    await two.apply(await kube.get(WIDGETS, "w", "ns"), {"conditions": [_condition("B")]})
    changed = _condition("A", "False", "Other")
    await one.apply(await kube.get(WIDGETS, "w", "ns"), {"conditions": [changed]})
    conditions = {c["type"]: c for c in (await kube.get(WIDGETS, "w", "ns"))["status"]["conditions"]}
    assert conditions == {"A": changed, "B": _condition("B")}
    # Giving a condition up (an empty share, which a cached status cannot show as held) leaves the other's.
    done = await one.apply(await kube.get(WIDGETS, "w", "ns"), {"conditions": []}, always=True)
    assert done.object is not None and done.object["status"]["conditions"] == [_condition("B")]
    # Without ``always`` the empty share counts as held: nothing is written.
    writes = len(_status_writes(kube))
    assert not (await two.apply(await kube.get(WIDGETS, "w", "ns"), {"conditions": []})).written
    assert len(_status_writes(kube)) == writes


async def test_replace_makes_the_status_exactly_the_one_given() -> None:
    kube = FakeKube()
    obj = await _widget(kube, status={"phase": "Old", "observedGeneration": 1})
    writer = StatusWriter(kube, WIDGETS, "only")
    done = await writer.replace(obj, {"observedGeneration": 2})
    assert done.object is not None and done.object["status"] == {"observedGeneration": 2}
    write = _status_writes(kube)[0]
    assert write.options["patch_type"] == "merge" and write.options["field_manager"] == "only"
    assert write.body == {
        "metadata": {"uid": obj["metadata"]["uid"]},
        "status": {"phase": None, "observedGeneration": 2},
    }
    assert (await writer.replace(await kube.get(WIDGETS, "w", "ns"), {"observedGeneration": 2})).state == "unchanged"
    assert len(_status_writes(kube)) == 1


async def test_a_gone_object_is_an_outcome() -> None:
    kube = FakeKube()
    obj = await _widget(kube)
    writer = StatusWriter(kube, WIDGETS, "one")
    await kube.delete(WIDGETS, "w", "ns")
    assert (await writer.apply(obj, {"conditions": [_condition("A")]})).gone
    assert (await writer.replace(obj, {"observedGeneration": 1})).gone


@pytest.mark.parametrize(
    "fault",
    [
        Conflict(409, "Conflict", "the object has been modified"),
        Invalid(422, "Invalid", "status.conditions: Invalid value"),
        ServerError(500, "InternalError", "etcd timed out"),
    ],
    ids=["conflict", "invalid", "server-error"],
)
async def test_a_fault_is_raised_unchanged_and_the_controller_retries_it_with_backoff(fault: ApiError) -> None:
    kube = FakeKube()
    await _widget(kube)
    failing = True

    def status_fault(call: Call) -> None:
        if failing and call.verb == "patch" and call.subresource == "status":
            raise fault

    kube.intercept(status_fault)
    writer = StatusWriter(kube, WIDGETS, "one")
    with pytest.raises(type(fault)) as raised:
        await writer.apply(await kube.get(WIDGETS, "w", "ns"), {"conditions": [_condition("A")]})
    assert raised.value is fault

    outcomes: list[str] = []

    class Reconciler:
        async def reconcile(self, request: Request) -> Result | None:
            obj = await kube.get(WIDGETS, request.name, request.namespace)
            outcomes.append((await writer.apply(obj, {"conditions": [_condition("A")]})).state)
            return None

    clock = FakeClock()
    controller = Controller("widgets", Reconciler(), SharedCache(kube), workers=1, clock=clock)
    await controller.start()
    key = Request("ns", "w")
    controller.enqueue(key)
    await clock.run_until_idle()
    await asyncio.sleep(0)
    assert outcomes == [] and controller.queue.num_requeues(key) == 1  # refused: back in the queue, with backoff
    failing = False
    await clock.run_for(0.01)
    assert outcomes == ["written"] and controller.queue.num_requeues(key) == 0
    await controller.stop(drain=False)
    conditions = (await kube.get(WIDGETS, "w", "ns"))["status"]["conditions"]
    assert conditions == [_condition("A")]
