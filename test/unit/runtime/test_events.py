"""The event recorder's coalescing: same object, type and reason within the window become one Event.

The recorder writes to FakeKube; the tests read the Events it created and the counts it raised, in order.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kthena_py.kube import ApiError
from kthena_py.kube.resources import EVENTS
from kthena_py.runtime.events import MAX_MESSAGE, EventRecorder
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.fake import Call, FakeKube


def created(kube: FakeKube) -> list[dict[str, Any]]:
    """The Event bodies created, in order."""
    return [obj for kind, obj in kube.changes(EVENTS) if kind == "ADDED"]


def patched(kube: FakeKube) -> list[tuple[str, dict[str, Any]]]:
    """The Events changed (their counts raised), in order: (name, the Event then)."""
    return [(obj["metadata"]["name"], obj) for kind, obj in kube.changes(EVENTS) if kind == "MODIFIED"]


def subject(name: str = "ms", uid: str = "u1") -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
    }


def recorder(kube: FakeKube, window: float = 60.0) -> EventRecorder:
    return EventRecorder(kube, "test", coalesce_seconds=window)


async def test_same_reason_is_joined_into_one_event() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    rec.event(subject(), "Normal", "RoleCreating", "Role a/a-0 in ServingGroup ms-0 is now Creating")
    rec.event(subject(), "Normal", "RoleCreating", "Role b/b-0 in ServingGroup ms-0 is now Creating")
    rec.event(subject(), "Normal", "RoleCreating", "Role a/a-0 in ServingGroup ms-0 is now Creating")
    rec.event(subject(), "Normal", "ServingGroupCreating", "ServingGroup ms-0 is now Creating")
    assert created(kube) == []  # waiting for the window
    await rec.flush()
    by_reason = {c["reason"]: c["message"] for c in created(kube)}
    assert by_reason == {
        "RoleCreating": "Role a/a-0 in ServingGroup ms-0 is now Creating; "
        "Role b/b-0 in ServingGroup ms-0 is now Creating",
        "ServingGroupCreating": "ServingGroup ms-0 is now Creating",
    }


async def test_events_recorded_without_join_are_one_event_per_message() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    a0 = "Role a/a-0 in ServingGroup ms-0 is now Creating"
    a1 = "Role a/a-1 in ServingGroup ms-0 is now Creating"
    rec.event(subject(), "Normal", "RoleCreating", a0, join=False)
    rec.event(subject(), "Normal", "RoleCreating", a1, join=False)
    rec.event(subject(), "Normal", "RoleCreating", a0, join=False)  # a repeat within the window is absorbed
    rec.event(subject(), "Normal", "RoleCreating", "joinable one")
    rec.event(subject(), "Normal", "RoleCreating", "joinable two")
    await rec.flush()
    assert sorted(c["message"] for c in created(kube)) == sorted([a0, a1, "joinable one; joinable two"])
    assert all(c["count"] == 1 for c in created(kube)) and patched(kube) == []
    rec.event(subject(), "Normal", "RoleCreating", a0, join=False)  # later: counted on its own Event
    await rec.flush()
    assert len(created(kube)) == 3 and [body["count"] for _, body in patched(kube)] == [2]


async def test_different_objects_and_types_are_not_joined() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    rec.event(subject("a", "u1"), "Normal", "R", "one")
    rec.event(subject("b", "u2"), "Normal", "R", "two")
    rec.event(subject("a", "u1"), "Warning", "R", "three")
    await rec.flush()
    assert sorted((c["involvedObject"]["name"], c["type"], c["message"]) for c in created(kube)) == [
        ("a", "Normal", "one"),
        ("a", "Warning", "three"),
        ("b", "Normal", "two"),
    ]


async def test_window_expiry_writes_without_flush() -> None:
    kube = FakeKube()
    rec = recorder(kube, window=0.0)
    rec.event(subject(), "Normal", "R", "one")
    for _ in range(20):
        if created(kube):
            break
        await asyncio.sleep(0.01)
    assert [c["message"] for c in created(kube)] == ["one"]
    rec.event(subject(), "Normal", "R", "two")  # a new window: a separate Event
    await rec.flush()
    assert [c["message"] for c in created(kube)] == ["one", "two"]


async def test_a_message_that_does_not_fit_starts_a_new_event() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    long = "x" * (MAX_MESSAGE - 10)
    rec.event(subject(), "Normal", "R", long)
    rec.event(subject(), "Normal", "R", "y" * 20)
    await rec.flush()
    assert [c["message"] for c in created(kube)] == [long, "y" * 20]
    assert all(len(c["message"]) <= MAX_MESSAGE for c in created(kube))


async def test_a_repeated_event_is_counted_on_the_same_object() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    rec.event(subject(), "Warning", "Odd", "same")
    await rec.flush()
    rec.event(subject(), "Warning", "Odd", "same")
    await rec.flush()
    assert len(created(kube)) == 1
    assert [body["count"] for _, body in patched(kube)] == [2]


async def test_too_many_waiting_events_are_dropped() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube, "test", max_pending=2, coalesce_seconds=60.0)
    for i in range(5):
        rec.event(subject(f"o{i}", f"u{i}"), "Normal", "R", "m")
    await rec.flush()
    assert [c["involvedObject"]["name"] for c in created(kube)] == ["o0", "o1"]


async def test_discard_drops_waiting_events() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    rec.event(subject(), "Normal", "R", "one")
    await rec.discard()
    await rec.flush()
    await asyncio.sleep(0)
    assert created(kube) == []


class SlowCreates:
    """A FakeKube interceptor: creates are answered after a pause; remembers the most it had in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0

    async def __call__(self, call: Call) -> None:
        if call.verb != "create":
            return
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.01)
        finally:
            self.in_flight -= 1  # the create itself is answered at once after this


async def test_event_writes_in_flight_are_capped_and_all_are_written() -> None:
    kube = FakeKube()
    slow = SlowCreates()
    kube.intercept(slow)
    rec = EventRecorder(kube, "test", coalesce_seconds=0.0, max_in_flight=3)
    for i in range(20):
        rec.event(subject(f"ms-{i}", f"u{i}"), "Normal", "RoleCreating", f"role {i}", join=False)
    await rec.flush()
    assert len(created(kube)) == 20
    assert slow.most == 3


async def test_an_event_names_its_object_by_its_reference_fields() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    big = {**subject(), "spec": {"template": {"roles": [{"name": "r" * 1000}]}}, "status": {"replicas": 1}}
    big["metadata"] = {**big["metadata"], "resourceVersion": "7", "labels": {"a": "b"}}
    rec.event(big, "Normal", "RoleCreating", "m")
    await rec.flush()
    assert created(kube)[0]["involvedObject"] == {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "name": "ms",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "7",
    }


def refusing() -> FakeKube:
    """An API server that refuses every create."""
    kube = FakeKube()

    def refuse(call: Call) -> None:
        if call.verb == "create":
            raise ApiError(422, "Invalid", "refused")

    kube.intercept(refuse)
    return kube


def written(component: str, outcome: str, type_: str = "Normal") -> float:
    value = REGISTRY.get_sample_value(
        "kthena_events_written_total", {"component": component, "type": type_, "outcome": outcome}
    )
    return value or 0.0


async def test_every_write_is_counted_by_outcome() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube, "count-outcomes", coalesce_seconds=60.0)
    rec.event(subject(), "Normal", "R", "one")
    rec.event(subject(), "Normal", "R", "two")  # joined: one write
    rec.event(subject(), "Warning", "W", "bad")
    await rec.flush()
    assert written("count-outcomes", "created") == 1
    assert written("count-outcomes", "created", "Warning") == 1
    rec.event(subject(), "Warning", "W", "bad")  # a repeat: the existing Event's count is raised
    await rec.flush()
    assert written("count-outcomes", "counted", "Warning") == 1
    assert written("count-outcomes", "failed") == written("count-outcomes", "dropped") == 0


async def test_refused_dropped_and_discarded_events_are_counted() -> None:
    refused = EventRecorder(refusing(), "count-refused", coalesce_seconds=0.0)
    refused.event(subject(), "Normal", "R", "m")
    await refused.flush()
    assert written("count-refused", "failed") == 1 and written("count-refused", "created") == 0

    crowded = EventRecorder(FakeKube(), "count-crowded", max_pending=1)
    crowded.event(subject("a", "ua"), "Normal", "R", "m")
    crowded.event(subject("b", "ub"), "Normal", "R", "m")  # over max_pending
    assert written("count-crowded", "dropped") == 1
    await crowded.discard()  # the waiting one is given up too
    assert written("count-crowded", "dropped") == 2 and written("count-crowded", "created") == 0


class StuckCreates:
    """A FakeKube interceptor: creates are never answered; says how many it holds."""

    def __init__(self) -> None:
        self.holding = 0
        self.first = asyncio.Event()

    async def __call__(self, call: Call) -> None:
        if call.verb == "create":
            self.holding += 1
            self.first.set()
            await asyncio.Event().wait()
            raise AssertionError("never answered")


async def test_writes_waiting_for_a_slot_or_in_flight_when_discarded_are_counted_as_dropped() -> None:
    kube = FakeKube()
    stuck = StuckCreates()
    kube.intercept(stuck)
    rec = EventRecorder(kube, "count-discarded", coalesce_seconds=0.0, max_in_flight=1)
    for i in range(3):
        rec.event(subject(f"ms-{i}", f"u{i}"), "Normal", "R", "m")
    await asyncio.wait_for(stuck.first.wait(), 10)  # the first is sent; the other two wait for its slot
    await rec.discard()
    assert stuck.holding == 1
    assert written("count-discarded", "dropped") == 3 and written("count-discarded", "created") == 0


async def test_similar_role_events_become_one_combined_event_from_the_tenth() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube, "combine", coalesce_seconds=0.0)
    for i in range(12):
        rec.event(subject(), "Normal", "RoleCreating", f"Role a/a-{i} in ServingGroup ms-0 is now Creating", join=False)
        await rec.flush()
    plain = [c["message"] for c in created(kube)]
    assert plain == [f"Role a/a-{i} in ServingGroup ms-0 is now Creating" for i in range(9)] + [
        "(combined from similar events): Role a/a-9 in ServingGroup ms-0 is now Creating"
    ]
    combined_name = created(kube)[-1]["metadata"]["name"]
    # the 11th and 12th raise the combined Event's count and show the latest message
    assert [(name, body["count"], body["message"]) for name, body in patched(kube)] == [
        (combined_name, 2, "(combined from similar events): Role a/a-10 in ServingGroup ms-0 is now Creating"),
        (combined_name, 3, "(combined from similar events): Role a/a-11 in ServingGroup ms-0 is now Creating"),
    ]
    assert written("combine", "created") == 10 and written("combine", "counted") == 2


async def test_an_object_s_burst_of_writes_is_25_and_the_rest_are_filtered() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube, "burst", coalesce_seconds=0.0)
    for i in range(30):
        rec.event(subject(), "Normal", f"Reason{i}", "m")
        await rec.flush()
    rec.event(subject(), "Warning", "Odd", "a warning has a bucket of its own")
    rec.event(subject("other", "u2"), "Normal", "Reason0", "so has another object")
    await rec.flush()
    reasons = [c["reason"] for c in created(kube)]
    assert reasons == [f"Reason{i}" for i in range(25)] + ["Odd", "Reason0"]
    assert written("burst", "filtered") == 5 and written("burst", "created") == 26
    assert written("burst", "created", "Warning") == 1


def verbs(kube: FakeKube) -> list[str]:
    """The verbs of the Event requests sent so far, in order."""
    return [c.verb for c in kube.calls if c.rt == EVENTS]


async def test_a_repeat_of_an_event_this_recorder_wrote_is_one_guarded_patch() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    for _ in range(3):
        rec.event(subject(), "Warning", "Odd", "same")
        await rec.flush()
    assert verbs(kube) == ["create", "patch", "patch"]
    guards = [c.body["metadata"]["resourceVersion"] for c in kube.calls_of("patch", EVENTS)]
    versions = [obj["metadata"]["resourceVersion"] for _, obj in kube.changes(EVENTS)]
    assert guards == versions[:2]  # each patch names the version the write before it left
    assert [body["count"] for _, body in patched(kube)] == [2, 3]


async def test_a_restarted_recorder_reads_the_count_before_raising_it() -> None:
    kube = FakeKube()
    first = recorder(kube)
    first.event(subject(), "Warning", "Odd", "same")
    await first.flush()
    second = recorder(kube)  # a new process: nothing remembered
    second.event(subject(), "Warning", "Odd", "same")
    await second.flush()
    assert verbs(kube) == ["create", "create", "get", "patch"]
    assert [body["count"] for _, body in patched(kube)] == [2]


async def test_an_event_raised_by_another_writer_is_read_again_and_one_deleted_is_created_again() -> None:
    kube = FakeKube()
    rec = recorder(kube)
    rec.event(subject(), "Warning", "Odd", "same")
    await rec.flush()
    name = created(kube)[0]["metadata"]["name"]
    await kube.patch(EVENTS, name, {"count": 5}, "ns")  # another replica raised it meanwhile
    del kube.calls[:]
    rec.event(subject(), "Warning", "Odd", "same")
    await rec.flush()
    assert verbs(kube) == ["patch", "get", "patch"]  # the guarded patch is refused; the count is read
    assert (await kube.get(EVENTS, name, "ns"))["count"] == 6

    await kube.delete(EVENTS, name, "ns")  # the Event expired
    del kube.calls[:]
    rec.event(subject(), "Warning", "Odd", "same")
    await rec.flush()
    assert verbs(kube) == ["patch", "create"]
    assert (await kube.get(EVENTS, name, "ns"))["count"] == 1


async def test_writes_of_one_combined_event_take_turns_and_lose_no_count() -> None:
    kube = FakeKube()
    slow = SlowCreates()
    kube.intercept(slow)
    rec = EventRecorder(kube, "turns", coalesce_seconds=0.0, max_in_flight=8)
    for i in range(14):  # the 10th to 14th are all the one combined Event, sent together
        rec.event(subject(), "Normal", "RoleCreating", f"Role a/a-{i} is now Creating", join=False)
    await rec.flush()
    # no read and no refused create: each later write found the count the one before it left
    assert sorted(verbs(kube)) == ["create"] * 10 + ["patch"] * 4
    combined = [c for c in created(kube) if c["message"].startswith("(combined")]
    assert len(combined) == 1
    assert (await kube.get(EVENTS, combined[0]["metadata"]["name"], "ns"))["count"] == 5


async def test_a_count_raised_between_the_read_and_the_patch_is_read_again() -> None:
    kube = FakeKube()
    first = recorder(kube)
    first.event(subject(), "Warning", "Odd", "same")
    await first.flush()
    name = created(kube)[0]["metadata"]["name"]
    raced = False

    def another_writer_first(call: Call) -> None:
        nonlocal raced
        if call.verb == "patch" and call.rt == EVENTS and not raced:
            raced = True
            kube.store.patch(EVENTS, name, {"count": 7}, "ns")

    kube.intercept(another_writer_first)
    del kube.calls[:]
    second = recorder(kube)  # remembers nothing: the create is refused and the count read
    second.event(subject(), "Warning", "Odd", "same")
    await second.flush()
    assert verbs(kube) == ["create", "get", "patch", "get", "patch"]
    assert (await kube.get(EVENTS, name, "ns"))["count"] == 8
