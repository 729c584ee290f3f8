"""A ModelServing with an evictionStrategy, its pods, Services and revisions stored in a FakeKube.

The pods are the ServingGroup planner's (so labels and ownerReferences are the controllers' own), created through
the fake and then marked Running and Ready, as a kubelet would.
"""

from __future__ import annotations

import time
from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES, ResourceType
from kthena_py.plan.modelserving.core.types import MSRef, Observed, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.runtime.webhook import AdmissionRequest
from kthena_py.testing.fake import FakeKube

NOW = time.time()
KINDS: dict[str, ResourceType] = {"Pod": PODS, "Service": SERVICES, "ControllerRevision": CONTROLLER_REVISIONS}


def ms_doc(replicas: int = 3, strategy: dict[str, Any] | None = None, workers: int = 0) -> dict[str, Any]:
    role: dict[str, Any] = {
        "name": "prefill",
        "replicas": 1,
        "workerReplicas": workers,
        "entryTemplate": {"spec": {"containers": [{"name": "main", "image": "img:1"}]}},
    }
    if workers:
        role["workerTemplate"] = {"spec": {"containers": [{"name": "main", "image": "img:1"}]}}
    spec: dict[str, Any] = {"replicas": replicas, "template": {"roles": [role]}}
    if strategy is not None:
        spec["rolloutStrategy"] = {"evictionStrategy": strategy}
    return {"metadata": {"name": "llama", "namespace": "ns"}, "spec": spec}


def ready(now: float = NOW) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": format_time(now)}],
        "containerStatuses": [{"name": "main", "restartCount": 0}],
    }


def observed(kube: FakeKube) -> Observed:
    return Observed(
        pods=tuple(kube.objects(PODS, "ns")),
        services=tuple(kube.objects(SERVICES, "ns")),
        revisions=tuple(kube.objects(CONTROLLER_REVISIONS, "ns")),
    )


async def converge(kube: FakeKube, doc: dict[str, Any]) -> KubeObject:
    """Store the ModelServing and create what the planner asks for until it asks for nothing; pods come up Ready."""
    ms_obj = kube.put(MODELSERVINGS, doc)
    ms = ModelServing.model_validate(ms_obj)
    ref = MSRef(ms.name, ms.namespace, ms.uid, ms.generation)
    for _ in range(8):
        plan = plan_servinggroups(ms, ref, observed(kube), PodGroupSupport(), NOW)
        if not plan.creates:
            return ms_obj
        for created in plan.creates:
            obj = await kube.create(KINDS[created["kind"]], created)
            if created["kind"] == "Pod":
                kube.put(PODS, {**obj, "status": ready()})
    raise AssertionError("did not converge")


def pod_names(kube: FakeKube) -> list[str]:
    return [p["metadata"]["name"] for p in kube.objects(PODS, "ns")]


def eviction(pod: str, *, dry_run: bool = False) -> AdmissionRequest:
    return AdmissionRequest.from_dict(
        {
            "uid": f"review-{pod}",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "operation": "CREATE",
            "name": pod,
            "namespace": "ns",
            "object": {"metadata": {"name": pod, "namespace": "ns"}},
            "dryRun": dry_run,
        }
    )
