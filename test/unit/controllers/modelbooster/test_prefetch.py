"""The prefetch opt-in through the reconciler and FakeKube: the child ModelCache, the gate, cleanup, fallback.

FakeKube applies by field manager as the API server does and keeps objects with finalizers until a write empties
them, so the cache's cleanup (the ModelCache controller's finalizer) is played here by hand.
"""

from __future__ import annotations

import copy
from typing import Any

from kthena_py.controllers.modelbooster import Settings
from kthena_py.controllers.modelbooster.observe import MODEL_CACHE_CRD, crd_selector
from kthena_py.controllers.modelbooster.reconciler import BoosterReconciler
from kthena_py.controllers.modelbooster.settings import ImageSource
from kthena_py.controllers.resources import MODELBOOSTERS, MODELCACHES, MODELROUTES, MODELSERVERS, MODELSERVINGS
from kthena_py.kube.resources import CRDS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.vocab.labels import BOOSTER_PREFETCH, MODEL_CACHE, MODEL_CACHE_FINALIZER

NAME = "mb-b"  # the ModelServing's and the ModelCache's name


def booster(cache_uri: str | None = "pvc://models", prefetch: bool = True, **backend: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "b",
        "type": "vLLM",
        "modelURI": "hf://x/y",
        "replicas": 1,
        "workers": [{"type": "server", "image": "img", "replicas": 1}],
        **backend,
    }
    if cache_uri is not None:
        spec["cacheURI"] = cache_uri
    metadata: dict[str, Any] = {"name": "mb", "namespace": "ns", "uid": "u1", "generation": 1}
    if prefetch:
        metadata["annotations"] = {BOOSTER_PREFETCH: "true"}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": metadata,
        "spec": {"backend": spec},
    }


def model_cache_crd() -> dict[str, Any]:
    """The ModelCache CRD as the API server shows it once Established."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": MODEL_CACHE_CRD},
        "spec": {"versions": [{"name": "v1alpha1", "served": True, "storage": True}]},
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }


def setup(obj: dict[str, Any], *, crd_installed: bool = True) -> tuple[BoosterReconciler, FakeKube, RecordedEvents]:
    kube = FakeKube()
    kube.put(MODELBOOSTERS, copy.deepcopy(obj))
    if crd_installed:
        kube.put(CRDS, model_cache_crd())
    cache = SharedCache(kube)
    for rt in (MODELBOOSTERS, MODELSERVINGS, MODELSERVERS, MODELROUTES, MODELCACHES, CRDS):
        cache.informer(rt)
    cache.informer(CRDS, field_selector=crd_selector(MODEL_CACHE_CRD))
    cache.index_label(MODELCACHES, "workload.serving.volcano.sh/model-uid")
    cache.index_label(MODELSERVINGS, "workload.serving.volcano.sh/model-uid")
    kube.attach(cache)
    events = RecordedEvents()
    images = ImageSource(kube, Settings(downloader_image="dl", runtime_image="rt"))
    return BoosterReconciler(kube, cache, events, images, wall_clock=lambda: 0.0), kube, events


def prefetch_condition(kube: FakeKube) -> tuple[str, str, str] | None:
    status = (kube.peek(MODELBOOSTERS, "mb", "ns") or {}).get("status") or {}
    for c in status.get("conditions") or []:
        if c["type"] == "Prefetch":
            return c["status"], c["reason"], c["message"]
    return None


def pod(kube: FakeKube) -> dict[str, Any]:
    ms = kube.peek(MODELSERVINGS, NAME, "ns") or {}
    spec: dict[str, Any] = ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    return spec


def annotations(kube: FakeKube) -> dict[str, str]:
    return dict(((kube.peek(MODELSERVINGS, NAME, "ns") or {}).get("metadata") or {}).get("annotations") or {})


async def set_annotations(kube: FakeKube, value: dict[str, str] | None) -> None:
    await kube.patch(MODELBOOSTERS, "mb", {"metadata": {"annotations": value}}, "ns")


async def test_an_opted_in_booster_gets_its_cache_and_a_gated_modelserving_without_downloader() -> None:
    reconciler, kube, events = setup(booster())
    await reconciler.reconcile(Request("ns", "mb"))
    mc = kube.peek(MODELCACHES, NAME, "ns")
    assert mc is not None
    assert mc["spec"] == {
        "source": "hf://x/y",
        "storage": {"persistentVolumeClaim": {"claimName": "models"}},
        "prefetch": True,
    }
    (owner,) = mc["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("ModelBooster", "u1", True)
    assert annotations(kube)[MODEL_CACHE] == NAME
    assert "initContainers" not in pod(kube)
    assert prefetch_condition(kube) == (
        "True",
        "ModelCacheRendered",
        f"ModelServing {NAME} is gated on ModelCache {NAME}; no pod runs a downloader",
    )
    assert ("Normal", "ModelCacheCreated", f"ModelCache {NAME} created") in [
        (e.type, e.reason, e.message) for e in events.events
    ]
    kube.calls.clear()
    await reconciler.reconcile(Request("ns", "mb"))  # converged: nothing written
    assert [c.verb for c in kube.calls if c.verb not in ("get", "list")] == []


async def test_removing_the_opt_in_deletes_the_cache_then_returns_the_modelserving_to_the_downloader() -> None:
    reconciler, kube, events = setup(booster())
    await reconciler.reconcile(Request("ns", "mb"))
    # The ModelCache controller's finalizer: the cache stays (deleting) until its cleanup is over.
    await kube.patch(MODELCACHES, NAME, {"metadata": {"finalizers": [MODEL_CACHE_FINALIZER]}}, "ns")
    await set_annotations(kube, None)
    await reconciler.reconcile(Request("ns", "mb"))
    mc = kube.peek(MODELCACHES, NAME, "ns")
    assert mc is not None and mc["metadata"].get("deletionTimestamp")
    assert annotations(kube)[MODEL_CACHE] == NAME and "initContainers" not in pod(kube)  # held
    assert prefetch_condition(kube) is None  # the opt-in is gone, and so is its condition
    kube.calls.clear()
    await reconciler.reconcile(Request("ns", "mb"))  # still cleaning up: nothing is written
    assert [c.verb for c in kube.calls if c.verb not in ("get", "list")] == []
    await kube.patch(MODELCACHES, NAME, {"metadata": {"finalizers": None}}, "ns")  # cleanup over
    assert kube.peek(MODELCACHES, NAME, "ns") is None
    await reconciler.reconcile(Request("ns", "mb"))
    assert MODEL_CACHE not in annotations(kube)
    (init,) = pod(kube)["initContainers"]
    assert init["image"] == "dl" and init["args"][:2] == ["--source", "hf://x/y"]
    reasons = [e.reason for e in events.events]
    assert "ModelCacheDeleted" in reasons and reasons.count("ModelServingUpdated") == 1


async def test_an_unmappable_cache_uri_warns_once_sets_the_condition_and_keeps_the_downloader() -> None:
    reconciler, kube, events = setup(booster(cache_uri=None))
    await reconciler.reconcile(Request("ns", "mb"))
    assert kube.objects(MODELCACHES, "ns") == []
    assert MODEL_CACHE not in annotations(kube)
    assert pod(kube)["initContainers"][0]["image"] == "dl"
    message = (
        "cacheURI is empty (an emptyDir per pod): a ModelCache needs a claim or a node-local path; "
        "the pods keep the per-pod downloader"
    )
    assert prefetch_condition(kube) == ("False", "PrefetchUnsupported", message)
    warnings = [(e.type, e.reason, e.message) for e in events.events if e.reason == "PrefetchUnsupported"]
    assert warnings == [("Warning", "PrefetchUnsupported", message)]
    kube.calls.clear()
    assert await reconciler.reconcile(Request("ns", "mb")) is None  # no error, no requeue: no hot loop
    assert [c.verb for c in kube.calls if c.verb not in ("get", "list")] == []
    assert len([e for e in events.events if e.reason == "PrefetchUnsupported"]) == 1


async def test_a_literal_downloader_endpoint_falls_back_and_fixing_it_brings_the_cache() -> None:
    env = [{"name": "HF_ENDPOINT", "value": "http://mirror"}]
    reconciler, kube, _ = setup(booster(env=env))
    await reconciler.reconcile(Request("ns", "mb"))
    condition = prefetch_condition(kube)
    assert condition is not None and condition[:2] == ("False", "PrefetchUnsupported")
    assert "HF_ENDPOINT" in condition[2]
    assert kube.objects(MODELCACHES, "ns") == []
    await kube.patch(
        MODELBOOSTERS,
        "mb",
        {"spec": {"backend": {"env": None, "envFrom": [{"secretRef": {"name": "hub"}}]}}},
        "ns",
    )
    await reconciler.reconcile(Request("ns", "mb"))
    mc = kube.peek(MODELCACHES, NAME, "ns")
    assert mc is not None and mc["spec"]["sourceSecretRef"] == {"name": "hub"}
    assert annotations(kube)[MODEL_CACHE] == NAME
    condition = prefetch_condition(kube)
    assert condition is not None and condition[0] == "True"


async def test_without_the_modelcache_crd_the_booster_falls_back_and_installing_it_brings_the_cache() -> None:
    reconciler, kube, events = setup(booster(), crd_installed=False)
    assert await reconciler.reconcile(Request("ns", "mb")) is None  # not Failed, no retry loop
    assert kube.objects(MODELCACHES, "ns") == []
    assert MODEL_CACHE not in annotations(kube)
    assert pod(kube)["initContainers"][0]["image"] == "dl"
    condition = prefetch_condition(kube)
    assert condition is not None and condition[:2] == ("False", "PrefetchUnsupported")
    assert MODEL_CACHE_CRD in condition[2] and "not installed" in condition[2]
    assert [e.type for e in events.events if e.reason == "PrefetchUnsupported"] == ["Warning"]
    kube.put(CRDS, model_cache_crd())  # the CRD is installed: the controller's CRD watch requeues every booster
    await reconciler.reconcile(Request("ns", "mb"))
    assert kube.peek(MODELCACHES, NAME, "ns") is not None
    assert annotations(kube)[MODEL_CACHE] == NAME
    condition = prefetch_condition(kube)
    assert condition is not None and condition[0] == "True"
