"""The cases ``kthena-py status`` is held to: each a :class:`~.statusview.World` a user asks about."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_py.vocab.conditions import (
    AVAILABLE,
    DISRUPTION_ALLOWED,
    PROGRESSING,
    REASON_ALL_GROUPS_READY,
    REASON_ALL_SCHEDULED,
    REASON_GROUP_PROGRESSING,
    REASON_GROUPS_NOT_READY,
    REASON_GROUPS_UPDATING,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_READY,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_QUEUE_FULL,
    SCHEDULED,
    UPDATE_IN_PROGRESS,
)

from .statusview import World, condition, pd_doc, revision_of, running, unscheduled, waiting

GPU_MESSAGE = "0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."


def pd_mid_rollout() -> World:
    """Three P/D ServingGroups rolling from vllm:0.9 to vllm:0.10 with partition 1.

    llama-0 is protected by the partition, llama-1 waits for its turn, llama-2 is updated and its decode worker
    is still starting.
    """
    old = pd_doc(replicas=3, partition=1)
    new = pd_doc(replicas=3, partition=1, image="vllm:0.10")
    w = World(new)
    old_rev = w.record(old)
    w.group(0, old)
    w.group(1, old)
    w.group(2, new, {"llama-2-decode-0-1": waiting("ContainerCreating", phase="Pending")}, ago=90)
    w.podgroup(0, "Running")
    w.podgroup(1, "Running")
    w.podgroup(2, "Running")
    w.set_status(
        replicas=3,
        availableReplicas=2,
        updatedReplicas=1,
        currentReplicas=2,
        currentRevision=old_rev,
        updateRevision=revision_of(new),
        conditions=[
            condition(AVAILABLE, "False", REASON_GROUPS_NOT_READY, "2 of 3 ServingGroups ready", ago=90),
            condition(PROGRESSING, "True", REASON_GROUP_PROGRESSING, "Some groups is progressing: [2]", ago=90),
            condition(SCHEDULED, "True", REASON_ALL_SCHEDULED, "every gang is scheduled", ago=3600),
            condition(
                UPDATE_IN_PROGRESS, "True", REASON_GROUPS_UPDATING, "1 of 2 ServingGroups outside the partition updated"
            ),
        ],
    )
    return w


def _waiting_world(
    requests: dict[str, str], pod_message: str | None, reason: str, message: str, queue: str | None = None
) -> World:
    doc = pd_doc(requests=requests, queue=queue)
    w = World(doc)
    w.group(0, doc, {name: unscheduled(pod_message) for name in _names()}, ago=300)
    w.set_status(
        replicas=1,
        availableReplicas=0,
        updatedReplicas=1,
        currentRevision=revision_of(doc),
        updateRevision=revision_of(doc),
        conditions=[
            condition(AVAILABLE, "False", REASON_GROUPS_NOT_READY, "0 of 1 ServingGroups ready", ago=300),
            condition(SCHEDULED, "False", reason, message, ago=280),
        ],
    )
    return w


def _names() -> list[str]:
    return ["llama-0-prefill-0-0", "llama-0-decode-0-0", "llama-0-decode-0-1"]


def gpu_wait() -> World:
    """A gang asking for 16 GPUs per pod on 8-GPU nodes, second in its queue."""
    w = _waiting_world(
        {"nvidia.com/gpu": "16"},
        GPU_MESSAGE,
        REASON_INSUFFICIENT_GPU,
        "waiting for nvidia.com/gpu: 16 per pod; largest node offers 8; ServingGroups llama-0; "
        "queue default position 2 of 3, priority 1000",
    )
    w.podgroup(0, "Inqueue", "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable")
    return w


def cpu_wait() -> World:
    """A gang asking for more CPU than any node has."""
    w = _waiting_world(
        {"cpu": "96"},
        "0/3 nodes are unavailable: 3 Insufficient cpu.",
        REASON_INSUFFICIENT_RESOURCES,
        "waiting for cpu: 96 per pod; largest node offers 64; ServingGroups llama-0",
    )
    w.podgroup(0, "Inqueue", "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable")
    return w


def queue_full() -> World:
    """A gang Volcano does not admit: its queue is full; the pods have no scheduler verdict of their own."""
    w = _waiting_world(
        {"nvidia.com/gpu": "1"},
        None,
        REASON_QUEUE_FULL,
        "queue team-a is full (capability nvidia.com/gpu: 8 in use); ServingGroups llama-0; position 1",
        queue="team-a",
    )
    w.podgroup(0, "Pending", "queue resource quota insufficient", queue="team-a")
    return w


def _one_group(statuses: dict[str, dict[str, Any]], message: str) -> World:
    doc = pd_doc()
    w = World(doc)
    w.group(0, doc, statuses, ago=900)
    w.podgroup(0, "Running")
    w.set_status(
        replicas=1,
        availableReplicas=0,
        updatedReplicas=1,
        currentRevision=revision_of(doc),
        updateRevision=revision_of(doc),
        conditions=[
            condition(AVAILABLE, "False", REASON_GROUPS_NOT_READY, message, ago=900),
            condition(SCHEDULED, "True", REASON_ALL_SCHEDULED, "every gang is scheduled", ago=880),
        ],
    )
    return w


def image_pull() -> World:
    """The decode worker's image cannot be pulled."""
    return _one_group(
        {"llama-0-decode-0-1": waiting("ImagePullBackOff", 'Back-off pulling image "registry.example/vllm:0.9-typo"')},
        "0 of 1 ServingGroups ready",
    )


def crash_loop() -> World:
    """The prefill engine keeps exiting."""
    status = waiting(
        "CrashLoopBackOff", "back-off 5m0s restarting failed container=engine", phase="Running", restarts=7
    )
    status["containerStatuses"][0]["lastState"] = {"terminated": {"reason": "Error", "exitCode": 1}}
    return _one_group({"llama-0-prefill-0-0": status}, "0 of 1 ServingGroups ready")


def eviction_exhausted() -> World:
    """Two groups, minAvailable 2: a drain evicted a pod of llama-1, so no further eviction is allowed."""
    doc = pd_doc(replicas=2, min_available=2)
    w = World(doc)
    w.group(0, doc)
    w.group(1, doc, {"llama-1-decode-0-0": running(ready=False)}, terminating=frozenset({"llama-1-decode-0-0"}))
    w.evicted(1, "llama-1-decode-0-0", left=240)
    w.set_status(
        replicas=2,
        availableReplicas=1,
        updatedReplicas=2,
        currentRevision=revision_of(doc),
        updateRevision=revision_of(doc),
        conditions=[
            condition(AVAILABLE, "False", REASON_GROUPS_NOT_READY, "1 of 2 ServingGroups ready", ago=30),
            condition(
                DISRUPTION_ALLOWED,
                "False",
                REASON_INSUFFICIENT_READY,
                "ServingGroup level: 1 of 2 ServingGroups ready (1 disrupted), minAvailable 2: 0 evictions allowed",
                ago=30,
            ),
        ],
    )
    return w


def healthy() -> World:
    """One P/D ServingGroup, every pod Running and Ready."""
    doc = pd_doc()
    w = World(doc)
    w.group(0, doc)
    w.set_status(
        replicas=1,
        availableReplicas=1,
        updatedReplicas=1,
        currentRevision=revision_of(doc),
        updateRevision=revision_of(doc),
        conditions=[condition(AVAILABLE, "True", REASON_ALL_GROUPS_READY, "All Serving groups are ready", ago=3000)],
    )
    return w


CASES: dict[str, Callable[[], World]] = {
    "pd-mid-rollout": pd_mid_rollout,
    "gpu-wait": gpu_wait,
    "cpu-wait": cpu_wait,
    "queue-full": queue_full,
    "image-pull": image_pull,
    "crash-loop": crash_loop,
    "eviction-exhausted": eviction_exhausted,
    "healthy": healthy,
}
