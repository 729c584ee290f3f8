"""A ModelServing in a FakeKube with a cache attached, and the ServingGroup reconciler over them."""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.modelserving.observe import register_informers
from kthena_py.controllers.modelserving.servinggroups import ServingGroupReconciler
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents

NOW = 1_700_000_000.0
REQUEST = Request("ns", "llama")


def ms_doc(replicas: int = 2, workers: int = 0, scheduler: str | None = None) -> dict[str, Any]:
    role: dict[str, Any] = {
        "name": "prefill",
        "replicas": 1,
        "workerReplicas": workers,
        "entryTemplate": {"spec": {"containers": [{"name": "main", "image": "img:1"}]}},
    }
    if workers:
        role["workerTemplate"] = {"spec": {"containers": [{"name": "main", "image": "img:1"}]}}
    spec: dict[str, Any] = {"replicas": replicas, "template": {"roles": [role]}}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": "llama", "namespace": "ns"}, "spec": spec}


def scene(doc: dict[str, Any]) -> tuple[FakeKube, ServingGroupReconciler, RecordedEvents]:
    kube = FakeKube()
    kube.put(MODELSERVINGS, doc)
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    register_informers(cache)
    kube.attach(cache)
    events = RecordedEvents()
    return kube, ServingGroupReconciler(kube, cache, events, wall_clock=lambda: NOW, podgroup_wait=0.0), events


def names(kube: FakeKube, rt: Any) -> list[str]:
    return [o["metadata"]["name"] for o in kube.objects(rt, "ns")]


def writes(kube: FakeKube) -> list[Call]:
    return [c for c in kube.calls if c.verb in ("create", "replace", "patch", "delete")]


def make_ready(kube: FakeKube) -> None:
    """Every pod not yet Ready becomes Running and Ready (the kubelet's part)."""
    for pod in kube.objects(PODS, "ns"):
        if pod.get("status", {}).get("phase") != "Running":
            ready = {"type": "Ready", "status": "True", "lastTransitionTime": format_time(NOW)}
            kube.put(PODS, {**pod, "status": {"phase": "Running", "conditions": [ready]}})
