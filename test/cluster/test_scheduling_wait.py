"""Why is my model not running? The Scheduled condition against Volcano's real scheduler (issue 25).

The GPUs are fake node capacity (kwok nodes with 8 ``nvidia.com/gpu`` each, 32 cpu); Volcano decides. Each case
prints the condition it saw (run with ``-s`` to read them), and compares what ``kthena-py status`` prints once the
condition is there with a golden file (``golden/status/<case>.txt``, see :mod:`.statusgolden`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, PODGROUPS, PRIORITY_CLASSES, QUEUES
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.cluster import FakeNode
from kthena_py.testing.wait import eventually

from .msutil import modelserving, role, running_manager, wait_available
from .statusgolden import assert_status_golden

pytestmark = pytest.mark.cluster

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def one_pod(name: str, *, gpu: int = 0, cpu: str = "1", queue: str | None = None) -> KubeObject:
    """A ModelServing of one ServingGroup with one pod asking for ``gpu`` GPUs and ``cpu`` cpu."""
    requests: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpu)
    r = role("engine", gpu=0)
    r["entryTemplate"]["spec"]["containers"][0]["resources"] = {"requests": requests, "limits": limits}
    doc = modelserving(name, replicas=1, roles=[r])
    if queue:
        doc["metadata"]["annotations"] = {QUEUE_ANNOTATION: queue}
    return doc


async def scheduled(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    for c in (ms.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Scheduled":
            return dict(c)
    return {}


async def wait_reason(kube: KubeClient, namespace: str, name: str, reason: str, timeout: float = 90) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        c = await scheduled(kube, namespace, name)
        return c if c.get("reason") == reason else None

    found: dict[str, Any] = await eventually(probe, timeout=timeout, description=f"{name} Scheduled={reason}")
    print(f"\n{name}: Scheduled={found['status']} reason={found['reason']}\n  message: {found['message']}")
    return found


async def ms_events(kube: KubeClient, namespace: str, name: str) -> list[KubeObject]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelServing")).items
    return [e for e in items if e["involvedObject"]["name"] == name]


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_sixteen_gpus_per_pod_on_eight_gpu_nodes_waits_then_runs_on_a_bigger_node(
    cluster: ClusterTier, kubeconfig: Path, namespace: str, kube: KubeClient
) -> None:
    waiting = {"reason": "InsufficientGPU", "resource": "nvidia.com/gpu"}
    scheduled_before = sample("kthena_modelserving_time_to_schedule_seconds_count", {"reason": "InsufficientGPU"})
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, one_pod("big", gpu=16), namespace)

        async def verdict() -> bool | None:
            pgs = (await kube.list(PODGROUPS, namespace)).items
            conds = [c for pg in pgs for c in (pg.get("status") or {}).get("conditions") or []]
            return True if any(c.get("type") == "Unschedulable" for c in conds) else None

        await eventually(verdict, timeout=90, description="Volcano's Unschedulable verdict", interval=0.05)
        # The verdict wakes the gang reconciler (PodGroup status watch): the condition follows it.
        condition = await wait_reason(kube, namespace, "big", "InsufficientGPU", timeout=30)
        assert condition["status"] == "False"
        message = condition["message"]
        assert message.startswith("waiting for nvidia.com/gpu: 16 per pod; largest node offers 8; ServingGroup big-0")
        assert "queue default: position 1 of 1, priority 0" in message
        assert "Insufficient nvidia.com/gpu" in message
        await eventually(
            lambda: sample("kthena_modelserving_waiting", waiting) == 1, timeout=10, description="gauge reads 1"
        )

        async def warnings() -> list[KubeObject]:
            return [e for e in await ms_events(kube, namespace, "big") if e["type"] == "Warning"]

        events = await eventually(warnings, timeout=15, description="the Warning Event")
        assert [(e["reason"], e.get("count")) for e in events] == [("InsufficientGPU", 1)]
        print(f"  event: {events[0]['type']} {events[0]['reason']}: {events[0]['message']}")
        await assert_status_golden(kube, namespace, "big", "insufficient-gpu")

        cluster.add_node(FakeNode("gpu16-node", gpus=16))
        condition = await wait_reason(kube, namespace, "big", "AllScheduled", timeout=90)
        assert condition["status"] == "True"
        await wait_available(kube, namespace, "big", 1)

        async def normal() -> list[KubeObject]:
            return [e for e in await ms_events(kube, namespace, "big") if e["reason"] == "Scheduled"]

        (event,) = await eventually(normal, timeout=15, description="the Normal Scheduled Event")
        print(f"  event: {event['type']} {event['reason']}: {event['message']}")
        assert event["type"] == "Normal" and "after waiting" in event["message"]
        after = sample("kthena_modelserving_time_to_schedule_seconds_count", {"reason": "InsufficientGPU"})
        assert after == scheduled_before + 1
        assert sample("kthena_modelserving_waiting", waiting) == 0
        assert [(e["reason"], e.get("count")) for e in await warnings()] == [("InsufficientGPU", 1)]
        await assert_status_golden(kube, namespace, "big", "insufficient-gpu-then-scheduled")


async def test_more_cpu_than_any_node_is_insufficient_resources(
    kubeconfig: Path, namespace: str, kube: KubeClient
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, one_pod("cpu-hungry", cpu="64"), namespace)
        condition = await wait_reason(kube, namespace, "cpu-hungry", "InsufficientResources")
        assert condition["message"].startswith("waiting for cpu: 64 per pod; largest node offers 32")
        await assert_status_golden(kube, namespace, "cpu-hungry", "insufficient-resources")


async def test_two_waiting_in_one_queue_are_served_in_volcanos_order(
    cluster: ClusterTier, kubeconfig: Path, namespace: str, kube: KubeClient
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, one_pod("first", gpu=24), namespace)
        await wait_reason(kube, namespace, "first", "InsufficientGPU")
        await kube.create(MODELSERVINGS, one_pod("second", gpu=24), namespace)
        await wait_reason(kube, namespace, "second", "InsufficientGPU")

        async def positions() -> tuple[str, str] | None:
            a = (await scheduled(kube, namespace, "first")).get("message", "")
            b = (await scheduled(kube, namespace, "second")).get("message", "")
            ok = "queue default: position 1 of 2" in a and "queue default: position 2 of 2" in b
            return (a, b) if ok else None

        a, b = await eventually(positions, timeout=30, description="positions 1 and 2")
        print(f"\nfirst:  {a}\nsecond: {b}")
        await assert_status_golden(kube, namespace, "first", "queue-position-1-of-2")
        await assert_status_golden(kube, namespace, "second", "queue-position-2-of-2")

        cluster.add_node(FakeNode("gpu24-node", gpus=24))
        await wait_reason(kube, namespace, "first", "AllScheduled", timeout=90)

        async def moved_up() -> str | None:
            message = str((await scheduled(kube, namespace, "second")).get("message", ""))
            return message if "queue default: position 1 of 1" in message else None

        message = await eventually(moved_up, timeout=30, description="second moves to position 1")
        print(f"second after first is scheduled: {message}")
        await assert_status_golden(kube, namespace, "second", "queue-position-moved-up")


async def test_a_higher_priority_goes_first_in_volcanos_order_and_in_the_positions(
    cluster: ClusterTier, kubeconfig: Path, namespace: str, kube: KubeClient
) -> None:
    high = f"high-{namespace[-6:]}"
    await kube.create(PRIORITY_CLASSES, {"metadata": {"name": high}, "value": 1000})
    try:
        async with running_manager(str(kubeconfig), namespace):
            await kube.create(MODELSERVINGS, one_pod("older", gpu=32), namespace)
            await wait_reason(kube, namespace, "older", "InsufficientGPU")
            urgent = one_pod("urgent", gpu=32)
            urgent["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["priorityClassName"] = high
            await kube.create(MODELSERVINGS, urgent, namespace)
            await wait_reason(kube, namespace, "urgent", "InsufficientGPU")

            async def positions() -> tuple[str, str] | None:
                a = (await scheduled(kube, namespace, "urgent")).get("message", "")
                b = (await scheduled(kube, namespace, "older")).get("message", "")
                ok = "position 1 of 2, priority 1000" in a and "position 2 of 2, priority 0" in b
                return (a, b) if ok else None

            a, b = await eventually(positions, timeout=30, description="urgent 1st, older 2nd")
            print(f"\nurgent: {a}\nolder:  {b}")
            await assert_status_golden(kube, namespace, "urgent", "priority-urgent-first")
            await assert_status_golden(kube, namespace, "older", "priority-older-second")
            cluster.add_node(FakeNode("gpu32-node", gpus=32))
            await wait_reason(kube, namespace, "urgent", "AllScheduled", timeout=90)
            older = await scheduled(kube, namespace, "older")
            assert older["reason"] == "InsufficientGPU", "Volcano served the higher priority first"

            async def moved_up() -> str | None:
                message = str((await scheduled(kube, namespace, "older")).get("message", ""))
                return message if "queue default: position 1 of 1, priority 0" in message else None

            print(f"older after urgent is scheduled: {await eventually(moved_up, timeout=30)}")
    finally:
        await kube.delete(PRIORITY_CLASSES, high)


async def make_queue(cluster: ClusterTier, kube: KubeClient, name: str, state: str, **spec: Any) -> None:
    await kube.create(QUEUES, {"metadata": {"name": name}, "spec": {"weight": 1, "reclaimable": True, **spec}})
    path = f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}/status"
    cluster.client.merge_patch(path, {"status": {"state": state}})


async def test_a_closed_or_full_queue_is_the_reason_not_the_resources(
    cluster: ClusterTier, kubeconfig: Path, namespace: str, kube: KubeClient
) -> None:
    closed, small = f"closed-{namespace[-6:]}", f"small-{namespace[-6:]}"
    await make_queue(cluster, kube, closed, "Closed")
    await make_queue(cluster, kube, small, "Open", capability={"nvidia.com/gpu": "1", "cpu": "100", "memory": "1Ti"})
    try:
        async with running_manager(str(kubeconfig), namespace):
            await kube.create(MODELSERVINGS, one_pod("in-closed", gpu=1, queue=closed), namespace)
            await kube.create(MODELSERVINGS, one_pod("in-small", gpu=2, queue=small), namespace)
            condition = await wait_reason(kube, namespace, "in-closed", "NotEnqueued")
            assert f"Volcano queue {closed} is Closed" in condition["message"]
            condition = await wait_reason(kube, namespace, "in-small", "QueueFull")
            assert f"Volcano queue {small} has no room: nvidia.com/gpu capability 1" in condition["message"]
            assert "the gang needs 2" in condition["message"]
            await assert_status_golden(kube, namespace, "in-closed", "queue-closed")
            await assert_status_golden(kube, namespace, "in-small", "queue-full")
    finally:
        for name in (closed, small):
            await kube.delete(QUEUES, name)


async def test_a_restart_while_waiting_writes_nothing_and_records_no_second_event(
    kubeconfig: Path, namespace: str, kube: KubeClient
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, one_pod("patient", gpu=64), namespace)
        await wait_reason(kube, namespace, "patient", "InsufficientGPU")
        await eventually(
            lambda: ms_events(kube, namespace, "patient"), timeout=15, description="the Warning Event is written"
        )
    before = await kube.get(MODELSERVINGS, "patient", namespace)
    events_before = [(e["metadata"]["name"], e.get("count")) for e in await ms_events(kube, namespace, "patient")]

    def reconciles() -> float:  # a waiting ModelServing short of GPUs is requeued: its reconciles end requeue_after
        return sum(
            sample("controller_runtime_reconcile_total", {"controller": "modelserving-scheduling", "result": result})
            for result in ("success", "requeue_after")
        )

    start = reconciles()
    async with running_manager(str(kubeconfig), namespace):
        await eventually(
            lambda: reconciles() > start,
            timeout=30,
            description="the restarted scheduling reconciler looked at it",
        )
        after = await kube.get(MODELSERVINGS, "patient", namespace)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        await assert_status_golden(kube, namespace, "patient", "restart-while-waiting")
    events_after = [(e["metadata"]["name"], e.get("count")) for e in await ms_events(kube, namespace, "patient")]
    assert events_after == events_before
    # One Warning for the wait: InsufficientGPU, or NotEnqueued when Volcano's overcommit plugin held the gang back
    # first while the pods of the tests before were still going (the wait's reason changed, it did not restart).
    warnings = [e for e in await ms_events(kube, namespace, "patient") if e["type"] == "Warning"]
    assert [e.get("count") for e in warnings] == [1]
    assert warnings[0]["reason"] in ("InsufficientGPU", "NotEnqueued")
