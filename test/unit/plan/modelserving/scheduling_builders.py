"""Objects as the schedulers leave them, for the Scheduled condition's tests."""

from __future__ import annotations

from typing import Any

NOW = 1_700_000_000.0
GPU = "nvidia.com/gpu"
VOLCANO_GPU = (
    "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable. "
    "Origin reason is llama-0-prefill-0-0: 0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."
)
KUBE_GPU = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
    "3 No preemption victims found for incoming pod."
)


def pod(
    name: str = "llama-0-prefill-0-0",
    group: str = "llama-0",
    *,
    node: str | None = None,
    verdict: str | None = None,
    reason: str = "Unschedulable",
    gpus: int | None = None,
    cpu: str | None = None,
    terminating: bool = False,
    bound_at: str | None = None,
) -> dict[str, Any]:
    """A pod; ``bound_at`` stamps the ``PodScheduled=True`` the API server sets when it binds a pod to ``node``."""
    requests: dict[str, str] = {}
    if gpus is not None:
        requests["nvidia.com/gpu"] = str(gpus)
    if cpu is not None:
        requests["cpu"] = cpu
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if verdict is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": reason, "message": verdict}]
    elif node and bound_at is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": bound_at}]
    md: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"modelserving.volcano.sh/group-name": group}}
    if terminating:
        md["deletionTimestamp"] = "2023-11-14T00:00:00Z"
    return {"metadata": md, "spec": spec, "status": status}


def podgroup(
    name: str = "llama-0",
    *,
    phase: str | None = "Inqueue",
    verdict: str | None = None,
    queue: str | None = None,
    priority_class: str | None = None,
    created: str = "2023-11-14T22:00:00Z",
    namespace: str = "ns",
    min_resources: dict[str, str] | None = None,
    min_member: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_resources:
        spec["minResources"] = min_resources
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if verdict is not None:
        status["conditions"] = [
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": verdict,
                "transitionID": "x",
                "lastTransitionTime": "2023-11-14T22:00:01Z",
            }
        ]
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": spec,
        "status": status,
    }


def queue(
    name: str = "default",
    state: str | None = "Open",
    capability: dict[str, str] | None = None,
    allocated: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if state is not None:
        status["state"] = state
    if allocated is not None:
        status["allocated"] = allocated
    spec: dict[str, Any] = {"weight": 1}
    if capability is not None:
        spec["capability"] = capability
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def node(name: str, gpus: int = 8, cpu: str = "32") -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "256Gi"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def condition(status: str, reason: str, since: str = "2023-11-14T22:13:20Z", message: str = "m") -> dict[str, Any]:
    return {"type": "Scheduled", "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
