"""Which ModelServings a pod, PodGroup or Queue change wakes for their ``Scheduled`` condition (issue 33's cut).

A pod wakes its owner only when what the decision reads of it changed. A PodGroup change wakes its owner, plus
the owners waiting in the same queue whose condition shows a position; a Queue change wakes every owner waiting
in it, but a change of ``status.allocated`` only matters for a queue with a capability.
"""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.modelserving.scheduling import (
    podgroup_requests,
    queue_changed,
    queue_requests,
    register_scheduling_informers,
    scheduling_changed,
)
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import PODGROUPS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import FakeKube

QUEUE = "scheduling.volcano.sh/queue-name"


def ms(name: str, reason: str | None = None, status: str = "False", queue: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": 1}}
    if queue is not None:
        doc["metadata"]["annotations"] = {QUEUE: queue}
    if reason is not None:
        doc["status"] = {"conditions": [{"type": "Scheduled", "status": status, "reason": reason, "message": "m"}]}
    return doc


def pg(owner: str, *, queue: str = "default", phase: str = "Pending", index: int = 0) -> dict[str, Any]:
    ref = {"apiVersion": MODELSERVINGS.api_version, "kind": "ModelServing", "name": owner, "uid": f"u-{owner}"}
    return {
        "metadata": {"name": f"{owner}-{index}", "namespace": "ns", "ownerReferences": [{**ref, "controller": True}]},
        "spec": {"queue": queue, "minMember": 1},
        "status": {"phase": phase},
    }


def cache_over(kube: FakeKube) -> SharedCache:
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    cache.informer(PODGROUPS)
    register_scheduling_informers(cache)
    kube.attach(cache)
    return cache


def names(requests: Any) -> list[str]:
    return sorted(r.name for r in requests)


def fleet() -> FakeKube:
    """Four ModelServings waiting in ``default`` (two show a position), one in ``other``, one placed."""
    kube = FakeKube()
    for name, reason in [
        ("scheduling", "Scheduling"),
        ("no-condition", None),
        ("gpu", "InsufficientGPU"),
        ("unschedulable", "Unschedulable"),
        ("elsewhere", "InsufficientGPU"),
        ("placed", "AllScheduled"),
    ]:
        status = "True" if reason == "AllScheduled" else "False"
        kube.put(MODELSERVINGS, ms(name, reason, status, queue="other" if name == "elsewhere" else None))
    for owner in ("scheduling", "no-condition", "gpu", "unschedulable"):
        kube.put(PODGROUPS, pg(owner))
    kube.put(PODGROUPS, pg("elsewhere", queue="other"))
    kube.put(PODGROUPS, pg("placed", phase="Running"))
    return kube


def test_a_podgroup_change_wakes_its_owner_and_only_the_positions_shown_in_its_queue() -> None:
    kube = fleet()
    mapper = podgroup_requests(cache_over(kube))
    assert names(mapper(pg("scheduling"))) == ["gpu", "scheduling", "unschedulable"]
    assert names(mapper(pg("placed", phase="Running"))) == ["gpu", "placed", "unschedulable"]
    assert names(mapper(pg("elsewhere", queue="other"))) == ["elsewhere"]
    assert names(mapper(pg("gpu"))) == ["gpu", "unschedulable"]  # the owner once


def test_with_no_position_shown_a_podgroup_change_wakes_its_owner_alone() -> None:
    kube = FakeKube()
    for i in range(5):
        kube.put(MODELSERVINGS, ms(f"m{i}", "Scheduling"))
        kube.put(PODGROUPS, pg(f"m{i}"))
    mapper = podgroup_requests(cache_over(kube))
    assert list(mapper(pg("m3"))) == [Request("ns", "m3")]


async def test_the_indexes_follow_the_objects_they_file() -> None:
    kube = fleet()
    cache = cache_over(kube)
    mapper = podgroup_requests(cache)
    # the Scheduling one starts showing a position: it is woken by the others' changes from then on
    await kube.patch(
        MODELSERVINGS,
        "scheduling",
        {"status": {"conditions": [{"type": "Scheduled", "status": "False", "reason": "QueueFull", "message": "m"}]}},
        "ns",
        subresource="status",
    )
    # the GPU one is placed and says so: others' changes leave it alone from then on
    await kube.patch(
        MODELSERVINGS,
        "gpu",
        {"status": {"conditions": [{"type": "Scheduled", "status": "True", "reason": "AllScheduled", "message": "m"}]}},
        "ns",
        subresource="status",
    )
    assert names(mapper(pg("no-condition"))) == ["no-condition", "scheduling", "unschedulable"]
    # moved to another queue (annotation): woken by that queue's changes only
    await kube.patch(MODELSERVINGS, "unschedulable", {"metadata": {"annotations": {QUEUE: "other"}}}, "ns")
    assert names(mapper(pg("no-condition"))) == ["no-condition", "scheduling"]
    assert names(mapper(pg("elsewhere", queue="other"))) == ["elsewhere", "unschedulable"]


def test_a_queue_change_wakes_every_owner_waiting_in_it() -> None:
    kube = fleet()
    mapper = queue_requests(cache_over(kube))
    assert names(mapper({"metadata": {"name": "default"}})) == ["gpu", "no-condition", "scheduling", "unschedulable"]
    assert names(mapper({"metadata": {"name": "other"}})) == ["elsewhere"]
    assert names(mapper({"metadata": {"name": "empty"}})) == []


def queue(capability: dict[str, str] | None = None, allocated: str = "0", state: str = "Open") -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": 1}
    if capability is not None:
        spec["capability"] = capability
    return {"metadata": {"name": "q"}, "spec": spec, "status": {"state": state, "allocated": {"cpu": allocated}}}


def test_allocated_resources_matter_only_to_a_queue_with_a_capability() -> None:
    assert queue_changed(None, queue())
    assert not queue_changed(queue(allocated="1"), queue(allocated="2"))
    assert queue_changed(queue({"cpu": "4"}, allocated="1"), queue({"cpu": "4"}, allocated="2"))
    assert not queue_changed(queue({"cpu": "4"}, allocated="1"), queue({"cpu": "4"}, allocated="1"))
    assert queue_changed(queue(), queue(state="Closed"))
    assert queue_changed(queue(), queue({"cpu": "4"}))


def pod(**status: Any) -> dict[str, Any]:
    node = status.pop("node", None)
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec, "status": status}


def scheduled(status: str, message: str = "") -> list[dict[str, str]]:
    return [
        {
            "type": "PodScheduled",
            "status": status,
            "reason": "Unschedulable" if status == "False" else "",
            "message": message,
        }
    ]


def test_a_pod_wakes_the_decision_only_for_what_it_reads() -> None:
    pending = pod(phase="Pending")
    bound = pod(phase="Pending", node="n1", conditions=scheduled("True"))
    running = pod(phase="Running", node="n1", conditions=[*scheduled("True"), {"type": "Ready", "status": "True"}])
    assert scheduling_changed(None, pending)
    assert scheduling_changed(pending, bound)  # bound
    assert not scheduling_changed(bound, running)  # Running, Ready: nothing the decision reads
    assert scheduling_changed(pending, pod(phase="Pending", conditions=scheduled("False", "0/2 nodes")))
    assert scheduling_changed(
        pod(phase="Pending", conditions=scheduled("False", "0/2 nodes")),
        pod(phase="Pending", conditions=scheduled("False", "0/3 nodes")),
    )
    assert scheduling_changed(running, pod(phase="Failed", node="n1"))
    deleting = pod(phase="Running", node="n1")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    assert scheduling_changed(running, deleting)
