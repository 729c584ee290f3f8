"""The eviction budget plans a gated ModelServing (one that names a ModelCache) as the controllers do.

The gate's mount enters the update revision: a live view without it takes every pod for an outdated one, wants
surge units, and so keeps a group that the controllers' scaling plan is about to remove, counting it as available.
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.controllers.eviction.view import observe_cached, observe_live, planning_state
from kthena_py.controllers.eviction.webhook import EvictionWebhook
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.controllers.servingview import model_cache_gate, ms_ref, watch_model_caches
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.core.types import MSRef, Observed, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.vocab.labels import MODEL_CACHE

from .scene import KINDS, NOW, eviction, ready


def cache_doc() -> dict[str, Any]:
    return {
        "apiVersion": MODELCACHES.api_version,
        "kind": "ModelCache",
        "metadata": {"name": "llama-3", "namespace": "ns", "generation": 1},
        "spec": {"source": "hf://meta/llama-3", "storage": {"persistentVolumeClaim": {"claimName": "models"}}},
        "status": {"phase": "Ready", "observedGeneration": 1},
    }


def gated_doc(replicas: int) -> dict[str, Any]:
    role = {
        "name": "prefill",
        "replicas": 1,
        "workerReplicas": 0,
        "entryTemplate": {"spec": {"containers": [{"name": "main", "image": "img:1"}]}},
    }
    return {
        "metadata": {"name": "llama", "namespace": "ns", "annotations": {MODEL_CACHE: "llama-3"}},
        "spec": {
            "replicas": replicas,
            "template": {"roles": [role]},
            "rolloutStrategy": {
                "evictionStrategy": {"minAvailable": 2},
                "rollingUpdateConfiguration": {"maxSurge": 1},
            },
        },
    }


async def gated_scene() -> tuple[FakeKube, SharedCache]:
    """Three ServingGroups created through the open gate (pods Ready), then ``replicas`` lowered to 2.

    The controllers' plan keeps groups 0 and 1 and scales group 2 away (it is not deleted yet).
    """
    kube = FakeKube()
    kube.put(MODELCACHES, cache_doc())
    ms_obj = kube.put(MODELSERVINGS, gated_doc(3))
    cache = SharedCache(kube, namespace="ns")
    for rt in (MODELSERVINGS, PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    watch_model_caches(cache)
    kube.attach(cache)
    ms = ModelServing.model_validate(ms_obj)
    ref = MSRef(ms.name, ms.namespace, ms.uid, ms.generation)
    gate = model_cache_gate(cache, ms_obj)
    assert gate is not None and gate.open
    for _ in range(8):
        observed = Observed(
            model_cache=gate,
            pods=tuple(kube.objects(PODS, "ns")),
            services=tuple(kube.objects(SERVICES, "ns")),
            revisions=tuple(kube.objects(CONTROLLER_REVISIONS, "ns")),
        )
        plan = plan_servinggroups(ms, ref, observed, PodGroupSupport(), NOW)
        if not plan.creates:
            break
        for created in plan.creates:
            obj = await kube.create(KINDS[created["kind"]], created)
            if created["kind"] == "Pod":
                kube.put(PODS, {**obj, "status": ready()})
    else:
        raise AssertionError("did not converge")
    assert len(kube.objects(PODS, "ns")) == 3
    lowered = kube.peek(MODELSERVINGS, "llama", "ns")
    assert lowered is not None
    lowered["spec"]["replicas"] = 2
    kube.put(MODELSERVINGS, lowered)
    return kube, cache


async def test_the_live_view_carries_the_gate_and_plans_what_the_controllers_plan() -> None:
    kube, cache = await gated_scene()
    obj = cache.get(MODELSERVINGS, "llama", "ns")
    assert obj is not None
    ms, ref = ModelServing.model_validate(obj), ms_ref(obj)
    cached = planning_state(ms, ref, observe_cached(cache, ref))
    live_observed = await observe_live(kube, cache, obj, ref)
    assert live_observed.model_cache == model_cache_gate(cache, obj)
    live = planning_state(ms, ref, live_observed)
    assert live.revision == cached.revision
    assert live.targets.plan.keep == cached.targets.plan.keep == (0, 1)
    pods = {p["metadata"]["name"] for p in kube.objects(PODS, "ns")}
    assert {p.name for g in live.groups.sorted() for p in g.pods()} == pods


async def test_a_group_being_scaled_away_does_not_count_toward_the_budget() -> None:
    """minAvailable 2, groups 0 and 1 kept, group 2 going: evicting a pod of group 0 would leave 1 available."""
    kube, cache = await gated_scene()
    webhook = EvictionWebhook(kube, cache, RecordedEvents(), enabled=True, wall_clock=lambda: NOW)
    first = next(p["metadata"]["name"] for p in kube.objects(PODS, "ns") if "-0-" in p["metadata"]["name"])
    denied = await webhook(eviction(first))
    assert not denied.allowed and denied.code == 429
    assert "minAvailable (2)" in denied.message


async def test_the_live_view_reads_the_gates_model_cache_live_when_the_cache_lacks_it() -> None:
    """A sharded replica's cache may not hold the namespace: the gate must still resolve, or the revision differs."""
    kube, cache = await gated_scene()
    obj = cache.get(MODELSERVINGS, "llama", "ns")
    assert obj is not None
    ms, ref = ModelServing.model_validate(obj), ms_ref(obj)
    empty = SharedCache(kube, namespace="ns")  # no ModelCache informer: nothing cached
    assert model_cache_gate(empty, obj) != model_cache_gate(cache, obj)  # from the cache alone: unresolved
    live_observed = await observe_live(kube, empty, obj, ref)
    assert live_observed.model_cache == model_cache_gate(cache, obj)
    assert (
        planning_state(ms, ref, live_observed).revision == planning_state(ms, ref, observe_cached(cache, ref)).revision
    )
