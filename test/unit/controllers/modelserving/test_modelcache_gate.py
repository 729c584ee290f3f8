"""The serving gate through FakeKube: pods wait for the cache, the ModelCached condition has its own field manager."""

from __future__ import annotations

from typing import Any

from kthena_py.api.modelcache import MODEL_CACHE_NAME_ENV, MODEL_CACHE_VOLUME
from kthena_py.controllers.modelserving.modelcache import FIELD_MANAGER, ModelCacheGateReconciler
from kthena_py.controllers.modelserving.observe import register_informers
from kthena_py.controllers.modelserving.servinggroups import ServingGroupReconciler
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.controllers.servingview import watch_model_caches
from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.vocab.labels import MODEL_CACHE

from .scene import NOW, REQUEST, ms_doc, names


def cache_doc(phase: str, degraded: tuple[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if degraded:
        status["conditions"] = [
            {
                "type": "Degraded",
                "status": "True",
                "reason": degraded[0],
                "message": degraded[1],
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    return {
        "apiVersion": MODELCACHES.api_version,
        "kind": "ModelCache",
        "metadata": {"name": "llama-3", "namespace": "ns"},
        "spec": {"source": "hf://meta/llama-3", "storage": {"persistentVolumeClaim": {"claimName": "models"}}},
        "status": status,
    }


def gated_scene() -> tuple[FakeKube, ServingGroupReconciler, ModelCacheGateReconciler, RecordedEvents]:
    doc = ms_doc(replicas=2)
    doc["metadata"]["annotations"] = {MODEL_CACHE: "llama-3"}
    kube = FakeKube()
    kube.put(MODELSERVINGS, doc)
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    register_informers(cache)
    watch_model_caches(cache)
    kube.attach(cache)
    events = RecordedEvents()
    groups = ServingGroupReconciler(kube, cache, events, wall_clock=lambda: NOW, podgroup_wait=0.0)
    gate = ModelCacheGateReconciler(kube, cache, events, wall_clock=lambda: NOW)
    return kube, groups, gate, events


def condition(kube: FakeKube, type_: str = "ModelCached") -> dict[str, Any] | None:
    status = (kube.peek(MODELSERVINGS, "llama", "ns") or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


async def rounds(groups: ServingGroupReconciler, gate: ModelCacheGateReconciler, n: int = 3) -> None:
    for _ in range(n):
        await groups.reconcile(REQUEST)
        await gate.reconcile(REQUEST)


async def test_no_pods_until_the_cache_is_created_ready_then_pods_with_the_mount() -> None:
    kube, groups, gate, events = gated_scene()
    await rounds(groups, gate)
    assert names(kube, PODS) == []
    waiting = condition(kube)
    assert waiting is not None and waiting["status"] == "False" and waiting["reason"] == "WaitingForModelCache"
    assert waiting["message"] == "ModelCache llama-3 not found"
    kube.put(MODELCACHES, cache_doc("Downloading"))
    await rounds(groups, gate)
    assert names(kube, PODS) == []
    kube.put(MODELCACHES, cache_doc("Ready"))
    await rounds(groups, gate)
    assert names(kube, PODS) == ["llama-0-prefill-0-0", "llama-1-prefill-0-0"]
    for pod in kube.objects(PODS, "ns"):
        (mount,) = pod["spec"]["containers"][0]["volumeMounts"]
        assert mount["name"] == MODEL_CACHE_VOLUME and mount["readOnly"] is True
        assert {"name": MODEL_CACHE_NAME_ENV, "value": "llama-3"} in pod["spec"]["containers"][0]["env"]
    ready = condition(kube)
    assert ready is not None and ready["status"] == "True" and ready["reason"] == "ModelCacheReady"
    assert "ModelCacheReady" in events.reasons()


async def test_a_cache_failing_after_pods_exist_deletes_nothing_and_warns_once() -> None:
    kube, groups, gate, events = gated_scene()
    kube.put(MODELCACHES, cache_doc("Ready"))
    await rounds(groups, gate)
    uids = {p["metadata"]["uid"] for p in kube.objects(PODS, "ns")}
    assert len(uids) == 2
    kube.put(MODELCACHES, cache_doc("Failed", ("IntegrityCheckFailed", "model.bin: digest mismatch")))
    await rounds(groups, gate)
    await rounds(groups, gate)
    assert {p["metadata"]["uid"] for p in kube.objects(PODS, "ns")} == uids
    assert kube.calls_of("delete", PODS) == []
    failed = condition(kube)
    assert failed is not None and failed["reason"] == "ModelCacheFailed"
    assert failed["message"] == "ModelCache llama-3 failed (IntegrityCheckFailed): model.bin: digest mismatch"
    assert events.reasons().count("ModelCacheFailed") == 1


async def test_the_condition_has_its_own_field_manager_and_others_conditions_survive() -> None:
    kube, groups, gate, _ = gated_scene()
    kube.put(MODELCACHES, cache_doc("Ready"))
    await rounds(groups, gate, 4)
    status_writes = [c for c in kube.calls_of("patch", MODELSERVINGS) if c.subresource == "status"]
    gate_writes = [c for c in status_writes if c.options.get("field_manager") == FIELD_MANAGER]
    assert gate_writes
    assert all(c.body["status"].keys() == {"conditions"} for c in gate_writes)
    assert condition(kube, "Available") is not None and condition(kube) is not None
    kube.calls.clear()
    await gate.reconcile(REQUEST)
    assert [c for c in kube.calls if c.verb == "patch"] == []  # converged: no write
    # The annotation goes: the condition goes with it, the others stay.
    obj = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    kube.put(MODELSERVINGS, {**obj, "metadata": {**obj["metadata"], "annotations": {}}})
    await gate.reconcile(REQUEST)
    assert condition(kube) is None and condition(kube, "Available") is not None


async def test_without_the_annotation_nothing_is_written_by_the_gate() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, ms_doc(replicas=1))
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    watch_model_caches(cache)
    kube.attach(cache)
    kube.calls.clear()
    await ModelCacheGateReconciler(kube, cache, RecordedEvents()).reconcile(REQUEST)
    assert [c for c in kube.calls if c.verb in ("create", "patch", "replace", "delete")] == []
