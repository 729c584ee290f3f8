"""The Scheduled condition through FakeKube: its own reconciler and field manager, others' conditions kept, no repeats.

The gang reconciler runs first in each step, as it would in the manager: it creates the PodGroups the condition
reads."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from kthena_py.controllers.modelserving.gang import PodGroupReconciler
from kthena_py.controllers.modelserving.metrics import WaitingSeries
from kthena_py.controllers.modelserving.observe import register_informers
from kthena_py.controllers.modelserving.scheduled import ScheduledReconciler
from kthena_py.controllers.modelserving.scheduling import (
    FIELD_MANAGER,
    NODES_TTL,
    WRITE_RETRY,
    register_scheduling_informers,
)
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import Forbidden
from kthena_py.kube.resources import CRDS, NODES, PODGROUPS, PODS, QUEUES
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents
from kthena_py.vocab.times import parse_time

from .test_gang import ms_doc, podgroup_crd

REQUEST = Request("ns", "llama")
KUBE_GPU = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available."
VOLCANO_GPU = (
    "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable. "
    "Origin reason is llama-0-prefill-0-0: 0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."
)


class GangThenScheduled:
    """The PodGroups' reconcile, then the condition's (the step a test takes)."""

    def __init__(self, gang: PodGroupReconciler, scheduled: ScheduledReconciler) -> None:
        self.gang = gang
        self.scheduled = scheduled
        self.scheduling = scheduled.scheduling

    async def reconcile(self, request: Request) -> Result | None:
        await self.gang.reconcile(request)
        return await self.scheduled.reconcile(request)


def reconciler_over(kube: FakeKube) -> tuple[GangThenScheduled, RecordedEvents, Gauge]:
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    register_informers(cache)
    register_scheduling_informers(cache)
    kube.attach(cache)
    events = RecordedEvents()
    reconciler = GangThenScheduled(PodGroupReconciler(kube, cache, events), ScheduledReconciler(kube, cache, events))
    gauge = Gauge("waiting", "test", ("reason", "resource"), registry=CollectorRegistry())
    reconciler.scheduling.series = WaitingSeries(gauge)
    return reconciler, events, gauge


def gauge_value(gauge: Gauge, reason: str, resource: str) -> float:
    for metric in gauge.collect():
        for sample in metric.samples:
            if sample.labels == {"reason": reason, "resource": resource}:
                return float(sample.value)
    return 0.0


def pod_doc(uid: str, *, node: str | None = None, verdict: str | None = None, gpus: int = 16) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "img:1", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]
    }
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if verdict:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": verdict}
        ]
    elif node:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return {
        "metadata": {
            "name": "llama-0-prefill-0-0",
            "namespace": "ns",
            "labels": {"modelserving.volcano.sh/name": "llama", "modelserving.volcano.sh/group-name": "llama-0"},
            "ownerReferences": [
                {
                    "apiVersion": MODELSERVINGS.api_version,
                    "kind": "ModelServing",
                    "name": "llama",
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def node_doc(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": str(gpus)}}}


def conditions(kube: FakeKube) -> dict[str, dict[str, Any]]:
    ms = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    return {c["type"]: c for c in (ms.get("status") or {}).get("conditions") or []}


def writes(kube: FakeKube) -> list[Any]:
    return [c for c in kube.calls if c.verb not in ("get", "list", "watch")]


def histogram_count(reason: str) -> float:
    return REGISTRY.get_sample_value("kthena_modelserving_time_to_schedule_seconds_count", {"reason": reason}) or 0.0


async def test_a_wait_and_its_end_through_kube_scheduler_verdicts() -> None:
    kube = FakeKube()
    uid = kube.put(MODELSERVINGS, ms_doc(replicas=1, scheduler="default-scheduler"))["metadata"]["uid"]
    for name in ("n0", "n1"):
        kube.put(NODES, node_doc(name, 8))
    other = {"type": "Available", "status": "False", "reason": "GroupsNotReady", "message": "0/1"}
    await kube.apply(
        MODELSERVINGS,
        {"metadata": {"name": "llama", "namespace": "ns"}, "status": {"conditions": [other]}},
        field_manager="kthena-py",
        subresource="status",
    )
    kube.put(PODS, pod_doc(uid, verdict=KUBE_GPU))
    reconciler, events, gauge = reconciler_over(kube)
    kube.calls.clear()

    result = await reconciler.reconcile(REQUEST)

    assert result is not None and result.requeue_after == NODES_TTL  # what nodes offer is looked at again
    scheduled = conditions(kube)["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InsufficientGPU")
    assert scheduled["message"].startswith("waiting for nvidia.com/gpu: 16 per pod; largest node offers 8; ")
    assert "ServingGroup llama-0" in scheduled["message"]
    assert "scheduler: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in scheduled["message"]
    assert conditions(kube)["Available"]["reason"] == "GroupsNotReady"  # another manager's, kept
    (write,) = writes(kube)
    assert write.options["field_manager"] == FIELD_MANAGER and write.subresource == "status"
    assert [c["type"] for c in write.body["status"]["conditions"]] == ["Scheduled"]
    assert [(e.type, e.reason) for e in events.events] == [("Warning", "InsufficientGPU")]
    assert gauge_value(gauge, "InsufficientGPU", "nvidia.com/gpu") == 1

    # Converged: nothing is written or recorded again, by this manager or a restarted one.
    kube.calls.clear()
    await reconciler.reconcile(REQUEST)
    restarted, restarted_events, restarted_gauge = reconciler_over(kube)
    await restarted.reconcile(REQUEST)
    assert writes(kube) == [] and len(events.events) == 1 and restarted_events.events == []
    assert gauge_value(restarted_gauge, "InsufficientGPU", "nvidia.com/gpu") == 1

    # A bigger node came; the pod is bound: scheduled, one Normal Event, one time-to-schedule sample.
    before = histogram_count("InsufficientGPU")
    kube.put(PODS, pod_doc(uid, node="n2"))
    assert await restarted.reconcile(REQUEST) is None
    scheduled = conditions(kube)["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "AllScheduled")
    assert [(e.type, e.reason) for e in restarted_events.events] == [("Normal", "Scheduled")]
    assert "after waiting" in restarted_events.events[0].message
    assert histogram_count("InsufficientGPU") == before + 1
    assert gauge_value(restarted_gauge, "InsufficientGPU", "nvidia.com/gpu") == 0
    assert conditions(kube)["Available"]["reason"] == "GroupsNotReady"


async def test_volcano_verdicts_name_the_queue_position_and_a_deleted_modelserving_leaves_the_gauge() -> None:
    kube = FakeKube()
    kube.put(CRDS, podgroup_crd())
    kube.put(QUEUES, {"metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}})
    uid = kube.put(MODELSERVINGS, ms_doc(replicas=1))["metadata"]["uid"]
    reconciler, events, gauge = reconciler_over(kube)
    await reconciler.reconcile(REQUEST)
    assert conditions(kube)["Scheduled"]["reason"] == "Scheduling"
    pg = kube.peek(PODGROUPS, "llama-0", "ns") or {}
    status = {
        "phase": "Inqueue",
        "conditions": [
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": VOLCANO_GPU}
        ],
    }
    assert pg
    await kube.patch(PODGROUPS, "llama-0", {"status": status}, "ns", subresource="status")
    kube.put(PODS, pod_doc(uid))
    await reconciler.reconcile(REQUEST)
    scheduled = conditions(kube)["Scheduled"]
    assert scheduled["reason"] == "InsufficientGPU"
    assert "queue default: position 1 of 1, priority 0" in scheduled["message"]
    assert "scheduler: 1/1 tasks in gang unschedulable: 0/2 nodes are unavailable" in scheduled["message"]
    assert [(e.type, e.reason) for e in events.events] == [("Warning", "InsufficientGPU")]
    assert gauge_value(gauge, "InsufficientGPU", "nvidia.com/gpu") == 1
    await kube.delete(MODELSERVINGS, "llama", "ns")
    await reconciler.reconcile(REQUEST)
    assert gauge_value(gauge, "InsufficientGPU", "nvidia.com/gpu") == 0


async def test_a_refused_condition_write_records_no_event_and_is_retried() -> None:
    kube = FakeKube()
    uid = kube.put(MODELSERVINGS, ms_doc(replicas=1, scheduler="default-scheduler"))["metadata"]["uid"]
    kube.put(PODS, pod_doc(uid, verdict=KUBE_GPU))
    reconciler, events, _ = reconciler_over(kube)

    def refuse(call: Call) -> None:
        if call.verb == "patch" and call.rt == MODELSERVINGS:
            raise Forbidden(403, "Forbidden", "no")

    undo = kube.intercept(refuse)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after == WRITE_RETRY
    assert events.events == [] and "Scheduled" not in conditions(kube)
    undo()
    await reconciler.reconcile(REQUEST)
    assert [e.reason for e in events.events] == ["InsufficientGPU"]


async def test_a_young_modelservings_first_scheduling_waits_for_the_grace_then_is_written() -> None:
    kube = FakeKube()
    doc = ms_doc(replicas=1, scheduler="default-scheduler")
    doc["metadata"]["creationTimestamp"] = "2026-12-03T10:00:00Z"
    uid = kube.put(MODELSERVINGS, doc)["metadata"]["uid"]
    kube.put(PODS, pod_doc(uid))  # created, not placed, no verdict: Scheduling
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    register_informers(cache)
    register_scheduling_informers(cache)
    kube.attach(cache)
    created = parse_time("2026-12-03T10:00:00Z") or 0.0
    now = [created + 5.0]
    reconciler = ScheduledReconciler(kube, cache, RecordedEvents(), wall_clock=lambda: now[0])
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after == 25.0  # held until 30 s after creation
    assert "Scheduled" not in conditions(kube) and writes(kube) == []
    now[0] = created + 30.0
    assert await reconciler.reconcile(REQUEST) is None
    assert conditions(kube)["Scheduled"]["reason"] == "Scheduling"
