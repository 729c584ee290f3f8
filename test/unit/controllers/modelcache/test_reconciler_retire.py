"""The reconciler retiring a superseded OnChange copy on FakeKube: waits for pods (cached and live) and rollouts,
removes the directory with a cleanup Job, deletes the copy's Jobs only after it succeeded, and stays quiet after."""

from __future__ import annotations

import json
from typing import Any

from kthena_py.api.modelcache import model_dir
from kthena_py.controllers.modelcache import modelserving_changed
from kthena_py.controllers.modelcache.observe import parse_cache
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.kube.resources import JOBS, PERSISTENT_VOLUME_CLAIMS, PODS
from kthena_py.plan.modelcache import fingerprint
from kthena_py.plan.modelcache.refresh import served_directory
from kthena_py.plan.modelcache.render import JobSettings, Restage, download_job
from kthena_py.plan.modelcache.retire import GRACE
from kthena_py.plan.modelserving.core import naming
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.vocab.labels import MODEL_CACHE

from .test_reconciler import CLAIM, World, _cache

TOKEN = "beef0001"
ENTRY = {"spec": {"containers": [{"name": "engine", "image": "nginx:1.27"}]}}
FIRST = model_dir("hf://org/llama")


def _result(sha: str) -> str:
    return json.dumps({"ok": True, "files": [{"name": "m.gguf", "size": 10, "sha256": sha}], "sizeBytes": 10})


def _modelserving(done: bool) -> dict[str, Any]:
    condition = {
        "type": "UpdateInProgress",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "message": "",
    }
    condition |= {"status": "False", "reason": "RolloutComplete"} if done else {"status": "True", "reason": "Groups"}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "srv", "namespace": "ns", "generation": 1, "annotations": {MODEL_CACHE: "llama"}},
        "spec": {
            "replicas": 1,
            "template": {"roles": [{"name": "engine", "replicas": 1, "workerReplicas": 0, "entryTemplate": ENTRY}]},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "updatedReplicas": 1,
            "availableReplicas": 1,
            "currentRevision": "r2",
            "updateRevision": "r2",
            "conditions": [condition],
        },
    }


def _put_modelserving(world: World, done: bool) -> None:
    """Store the ModelServing with its status observed at the generation the store gave it."""
    stored = world.kube.put(MODELSERVINGS, _modelserving(done))
    generation = stored["metadata"]["generation"]
    status = stored["status"]
    status["observedGeneration"] = generation
    status["conditions"][0]["observedGeneration"] = generation
    world.kube.put(MODELSERVINGS, {**stored, "status": status})


def _pod(name: str, sub_path: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {
            "volumes": [{"name": "kthena-model-cache", "persistentVolumeClaim": {"claimName": "models"}}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "kthena-model-cache", "subPath": sub_path}]}],
        },
        "status": {"phase": "Running"},
    }


def _finish(world: World, job: dict[str, Any], at: str) -> None:
    world.run_job(job, "succeeded", _result("d" * 64))
    current = world.kube.peek(JOBS, job["metadata"]["name"], "ns")
    assert current is not None
    world.kube.put(JOBS, {**current, "status": {**current["status"], "completionTime": at}})


def _names(world: World) -> set[str]:
    return {j["metadata"]["name"] for j in world.jobs()}


async def test_a_superseded_copy_is_retired_once_no_pod_mounts_it_and_the_rollout_finished() -> None:
    world = World((MODELCACHES, _cache(refreshPolicy="OnChange")), (PERSISTENT_VOLUME_CLAIMS, CLAIM), now=1000.0)
    await world.reconcile()
    (first,) = world.jobs()
    _finish(world, first, "1970-01-01T00:16:50Z")  # 1010
    await world.reconcile()
    assert world.mc()["status"]["phase"] == "Ready"

    # A re-staging (as the refresh planner renders it) succeeded later: the next pass switches to it.
    mc = parse_cache(world.mc())
    fp = fingerprint(mc.spec)
    restage = Restage(served_directory(mc, TOKEN), TOKEN)
    body = download_job(mc, "llama-restaged", fp, JobSettings(), None, 0, restage)
    world.kube.put(JOBS, body)
    new = world.kube.peek(JOBS, "llama-restaged", "ns")
    assert new is not None
    _finish(world, new, "1970-01-01T00:18:20Z")  # 1100
    world.now = 1101.0
    await world.reconcile()
    assert world.mc()["status"]["servedDirectory"]["directory"] == f"{FIRST}-{TOKEN}"
    assert _names(world) == {first["metadata"]["name"], "llama-restaged"}

    # A gated ModelServing still rolling, and its old pod on the first copy: the old copy waits.
    _put_modelserving(world, done=False)
    world.kube.put(PODS, _pod("srv-old", FIRST, **{naming.LABEL_NAME: "srv"}))
    world.now = 1100.0 + GRACE + 5
    waiting = await world.reconcile()
    assert _names(world) == {first["metadata"]["name"], "llama-restaged"}
    assert waiting is not None and waiting.requeue_after is not None and waiting.requeue_after <= 15.0

    # The rollout finished and the old pod is gone, but a pod the manager does not cache mounts the copy.
    _put_modelserving(world, done=True)
    await world.kube.delete(PODS, "srv-old", "ns")
    world.kube.put(PODS, _pod("debug", FIRST))
    world.kube.calls.clear()
    await world.reconcile()
    assert _names(world) == {first["metadata"]["name"], "llama-restaged"}
    live = [c for c in world.kube.calls_of("list", PODS) if not c.options.get("label_selector")]
    assert len(live) == 1  # the live confirmation saw the pod the cache does not hold

    # Nothing mounts it any more: its cleanup Job is created; its download Job stays the record meanwhile.
    await world.kube.delete(PODS, "debug", "ns")
    world.kube.put(PODS, _pod("srv-new", f"{FIRST}-{TOKEN}", **{naming.LABEL_NAME: "srv"}))
    await world.reconcile()
    cleanups = [j for j in world.jobs() if "--remove" in j["spec"]["template"]["spec"]["containers"][0]["args"]]
    assert len(cleanups) == 1 and first["metadata"]["name"] in _names(world)
    cleanup = cleanups[0]
    assert cleanup["spec"]["template"]["spec"]["containers"][0]["args"][-1].endswith(f"/{FIRST}")
    world.run_job(cleanup, "active")
    await world.reconcile()
    assert first["metadata"]["name"] in _names(world)

    retired = REGISTRY.get_sample_value("kthena_modelcache_retirements_total", {"outcome": "retired"}) or 0.0
    world.run_job(cleanup, "succeeded", "")
    await world.reconcile()
    after = REGISTRY.get_sample_value("kthena_modelcache_retirements_total", {"outcome": "retired"})
    assert after == retired + 1
    assert _names(world) == {"llama-restaged"}
    assert ("Normal", "Retired") in world.recorded()
    assert world.mc()["status"]["servedDirectory"]["directory"] == f"{FIRST}-{TOKEN}"

    world.restart()  # a new manager on the converged cluster writes nothing
    await world.reconcile()
    assert world.writes() == []


def test_the_modelserving_predicate_lets_a_gated_rollout_through_and_ignores_the_rest() -> None:
    done, rolling = _modelserving(True), _modelserving(False)
    assert modelserving_changed(rolling, done) and modelserving_changed(None, done)
    bumped = {**done, "status": {**done["status"], "replicas": 2}}  # not part of a rollout's end
    assert not modelserving_changed(done, bumped)
    plain = {**rolling, "metadata": {**rolling["metadata"], "annotations": {}}}
    plain_done = {**done, "metadata": {**done["metadata"], "annotations": {}}}
    assert not modelserving_changed(plain, plain_done)
