"""The ModelCache reconciler on FakeKube: Jobs, status, Events, faults, restarts and the bounded finalizer.

FakeKube has no job controller and no kubelet: the tests write a Job's status and its pod as they would.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kthena_py.controllers.modelcache import Settings
from kthena_py.controllers.modelcache.reconciler import CacheReconciler
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS, narrow_cache
from kthena_py.kube import ApiError, ServerError
from kthena_py.kube.resources import JOBS, NODES, PERSISTENT_VOLUME_CLAIMS, PODGROUPS, PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.testing.fake.faults import refuse
from kthena_py.vocab.labels import MODEL_CACHE, MODEL_CACHE_FINALIZER, MODEL_CACHE_NAME

SHA = "c" * 64
REQUEST = Request("ns", "llama")
WRITES = ("create", "replace", "patch", "apply", "delete")


class FakeProgress:
    """Answers progress scrapes from a table of pod IPs."""

    def __init__(self, bodies: dict[str, Any] | None = None) -> None:
        self.bodies = bodies or {}
        self.asked: list[str] = []

    async def fetch(self, ip: str, port: int) -> Any:
        self.asked.append(f"{ip}:{port}")
        return self.bodies.get(ip)


def _cache(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "llama", "namespace": "ns"},
        "spec": {
            "source": "hf://org/llama",
            "sha256": SHA,
            "storage": {"persistentVolumeClaim": {"claimName": "models"}},
            **spec,
        },
    }


CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "models", "namespace": "ns"},
    "status": {"phase": "Bound"},
}


class World:
    """A FakeKube with a cache, a reconciler and its Events; :meth:`restart` builds a fresh manager on it."""

    def __init__(
        self, *objects: tuple[Any, dict[str, Any]], settings: Settings | None = None, now: float = 1000.0
    ) -> None:
        self.kube = FakeKube()
        for rt, obj in objects:
            self.kube.put(rt, copy.deepcopy(obj))
        self.settings = settings or Settings()
        self.now = now
        self.progress = FakeProgress()
        self.restart()

    def restart(self) -> None:
        cache = SharedCache(self.kube)
        cache.select(JOBS, MODEL_CACHE_NAME)
        narrow_cache(cache)  # as the manager: the cached pods are ModelServing pods
        for rt in (MODELCACHES, JOBS, PERSISTENT_VOLUME_CLAIMS, NODES, MODELSERVINGS, PODS):
            cache.informer(rt)
        self.kube.attach(cache)
        self.events = RecordedEvents()
        self.reconciler = CacheReconciler(
            self.kube, cache, self.events, self.settings.plan_settings(), self.progress, wall_clock=lambda: self.now
        )
        self.kube.calls.clear()

    async def reconcile(self) -> Any:
        return await self.reconciler.reconcile(REQUEST)

    def writes(self) -> list[str]:
        return [
            f"{c.verb} {c.rt.kind}{'/' + c.subresource if c.subresource else ''}"
            for c in self.kube.calls
            if c.verb in WRITES
        ]

    def mc(self) -> dict[str, Any]:
        found = self.kube.peek(MODELCACHES, "llama", "ns")
        assert found is not None
        return found

    def jobs(self) -> list[dict[str, Any]]:
        return self.kube.objects(JOBS, "ns")

    def recorded(self) -> list[tuple[str, str]]:
        return [(e.type, e.reason) for e in self.events.events]

    def messages(self, reason: str) -> list[str]:
        return [e.message for e in self.events.events if e.reason == reason]

    def run_job(self, job: dict[str, Any], state: str, message: str | None = None, ip: str = "10.1.2.3") -> None:
        """Write what the job controller and the kubelet would: the pod and the Job's status."""
        md = job["metadata"]
        pod_phase = {"active": "Running", "succeeded": "Succeeded", "failed": "Failed"}[state]
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{md['name']}-x",
                "namespace": "ns",
                "labels": dict(job["spec"]["template"]["metadata"]["labels"]),
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": md["name"], "uid": md["uid"], "controller": True}
                ],
            },
            "status": {"phase": pod_phase, "podIP": ip},
        }
        if message is not None:
            pod["status"]["containerStatuses"] = [
                {
                    "name": "download",
                    "state": {"terminated": {"exitCode": 0 if state == "succeeded" else 1, "message": message}},
                }
            ]
        self.kube.put(PODS, pod)
        status: dict[str, Any] = {"active": 1, "startTime": "2026-01-01T00:00:00Z"}
        if state == "succeeded":
            status = {
                "succeeded": 1,
                "completionTime": "2026-01-01T00:02:00Z",
                "conditions": [{"type": "Complete", "status": "True"}],
            }
        elif state == "failed":
            status = {
                "failed": 2,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                        "lastTransitionTime": "1970-01-01T00:16:40Z",
                    }
                ],
            }
        current = self.kube.peek(JOBS, md["name"], "ns")
        assert current is not None
        self.kube.put(JOBS, {**current, "status": status})


def _ok() -> str:
    return json.dumps(
        {
            "ok": True,
            "files": [{"name": "m.gguf", "size": 3 * 1024**2, "sha256": SHA}],
            "sizeBytes": 3 * 1024**2,
            "revision": "r1",
        }
    )


async def test_a_cache_goes_pending_downloading_ready_and_then_stays_quiet() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    result = await world.reconcile()
    assert result is not None and result.requeue_after == 5.0
    assert MODEL_CACHE_FINALIZER in world.mc()["metadata"]["finalizers"]
    (job,) = world.jobs()
    assert world.kube.peek(PODGROUPS, job["metadata"]["name"], "ns") is not None
    assert world.mc()["status"]["phase"] == "Pending"
    assert ("Normal", "JobCreated") in world.recorded()
    assert world.messages("JobCreated") == [f"download Job {job['metadata']['name']} created (attempt 0)"]

    world.run_job(job, "active")
    world.progress.bodies["10.1.2.3"] = {"bytesDone": 1024, "bytesTotal": 4096, "filesDone": 0, "filesTotal": 1}
    await world.reconcile()
    status = world.mc()["status"]
    assert status["phase"] == "Downloading" and status["progress"]["percent"] == "25%"
    assert world.progress.asked == ["10.1.2.3:8090"] and ("Normal", "Downloading") in world.recorded()

    world.run_job(job, "succeeded", _ok())
    ready = await world.reconcile()  # the next look is the source's first revalidation (1 h and the jitter)
    assert ready is not None and 3600 <= ready.requeue_after <= 3960
    status = world.mc()["status"]
    assert (status["phase"], status["size"], status["sha256"], status["revision"]) == ("Ready", "3.0 MiB", SHA, "r1")
    assert "progress" not in status and ("Normal", "Cached") in world.recorded()
    labels = {"namespace": "ns", "name": "llama"}
    assert REGISTRY.get_sample_value("kthena_modelcache_phase", {**labels, "phase": "Ready"}) == 1.0
    assert REGISTRY.get_sample_value("kthena_modelcache_phase", {**labels, "phase": "Downloading"}) == 0.0
    assert REGISTRY.get_sample_value("kthena_modelcache_bytes", labels) == 3 * 1024**2

    world.restart()  # a new manager on the converged cluster
    await world.reconcile()
    assert world.writes() == [] and world.recorded() == []


async def test_a_restart_mid_download_starts_no_second_job() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    await world.reconcile()
    (job,) = world.jobs()
    world.run_job(job, "active")
    world.restart()
    await world.reconcile()
    assert [c for c in world.kube.calls if c.verb == "create" and c.rt == JOBS] == []
    assert len(world.jobs()) == 1


async def test_a_manager_whose_cache_lags_creates_the_same_job_and_finds_it_there() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    world.kube.hold()  # the watch delivers nothing: the cache never shows the Job
    await world.reconcile()
    await world.reconcile()
    creates = [c.name for c in world.kube.calls if c.verb == "create" and c.rt == JOBS]
    assert len(creates) == 2 and creates[0] == creates[1]  # the same deterministic name, refused the second time
    assert len(world.jobs()) == 1
    world.kube.release()


async def test_a_refused_create_is_a_warning_and_a_retried_error() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    refusal = refuse(ServerError(500, "InternalError", "quota exceeded"), "create", JOBS)
    remove = world.kube.intercept(refusal)
    with pytest.raises(ApiError):  # not a TerminalError: the engine retries it with per-key backoff
        await world.reconcile()
    assert len(refusal.refused) == 1 and world.jobs() == []
    (warning,) = [e for e in world.events.events if e.type == "Warning"]
    assert warning.reason == "FailedCreate" and "quota exceeded" in warning.message
    conditions = {c["type"]: c for c in world.mc()["status"]["conditions"]}
    refused = conditions["Progressing"]
    assert (refused["status"], refused["reason"]) == ("False", "FailedCreate")
    assert refused["message"] == f"cannot create Job {refusal.refused[0].name}: quota exceeded"
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "Pending")
    assert (conditions["Degraded"]["status"], conditions["Degraded"]["reason"]) == ("False", "NoFailure")

    world.kube.calls.clear()
    world.now += 30.0
    with pytest.raises(ApiError):  # the same refusal on the engine's retry: the status already says it
        await world.reconcile()
    assert world.writes() == ["create PodGroup", "create Job"]  # no status write
    assert world.mc()["status"]["conditions"] == list(conditions.values())

    remove()
    await world.reconcile()
    assert len(world.jobs()) == 1
    progressing = next(c for c in world.mc()["status"]["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "Pending")


async def test_a_refused_create_still_records_the_events_of_the_status_it_writes() -> None:
    world = World((MODELCACHES, _cache(storage=NODE_LOCAL)), (NODES, _node("gpu-a", gpu=True)))
    await world.reconcile()
    world.run_job(_by_node(world)["gpu-a"], "active")
    world.kube.put(NODES, _node("gpu-b", gpu=True))  # a new node: its Job is refused in the pass that sees gpu-a run
    remove = world.kube.intercept(refuse(ServerError(403, "Forbidden", "exceeded quota"), "create", JOBS))
    with pytest.raises(ApiError):
        await world.reconcile()
    status = world.mc()["status"]
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert (status["phase"], progressing["reason"]) == ("Downloading", "FailedCreate")
    assert world.recorded().count(("Normal", "Downloading")) == 1  # written with the status, not lost
    remove()
    await world.reconcile()
    assert sorted(_by_node(world)) == ["gpu-a", "gpu-b"]
    assert world.recorded().count(("Normal", "Downloading")) == 1


async def test_an_integrity_failure_degrades_and_is_retried_after_the_backoff() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM), settings=Settings(backoff_base=30.0))
    await world.reconcile()
    (job,) = world.jobs()
    failure = json.dumps({"ok": False, "reason": "IntegrityCheckFailed", "message": "m.gguf: sha256 differs"})
    world.run_job(job, "failed", failure)  # failed at t=1000
    result = await world.reconcile()
    status = world.mc()["status"]
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (status["phase"], degraded["reason"]) == ("Failed", "IntegrityCheckFailed")
    assert "sha256 differs" in degraded["message"] and ("Warning", "IntegrityCheckFailed") in world.recorded()
    assert result is not None and result.requeue_after == 30.0 and len(world.jobs()) == 1
    world.now = 1030.0
    await world.reconcile()
    assert sorted(j["metadata"]["name"] for j in world.jobs()) == [
        job["metadata"]["name"],
        job["metadata"]["name"] + "-1",
    ]


async def test_prefetch_false_starts_when_a_modelserving_names_the_cache() -> None:
    world = World((MODELCACHES, _cache(prefetch=False)), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    await world.reconcile()
    assert world.jobs() == [] and world.mc()["status"]["phase"] == "Pending"
    world.kube.put(
        MODELSERVINGS,
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "chat", "namespace": "ns", "annotations": {MODEL_CACHE: "llama"}},
            "spec": {},
        },
    )
    await world.reconcile()
    assert len(world.jobs()) == 1


async def test_deleting_a_cache_whose_claim_is_gone_lets_go_with_a_warning() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    await world.reconcile()
    world.kube.store.delete(PERSISTENT_VOLUME_CLAIMS, "models", "ns")  # type: ignore[attr-defined]
    await world.kube.delete(MODELCACHES, "llama", "ns")
    assert world.mc()["metadata"].get("deletionTimestamp")
    await world.reconcile()
    assert world.kube.peek(MODELCACHES, "llama", "ns") is None
    assert ("Warning", "CleanupAbandoned") in world.recorded()
    phase = {"namespace": "ns", "name": "llama", "phase": "Pending"}
    assert REGISTRY.get_sample_value("kthena_modelcache_phase", phase) is None  # a deleted cache's series go


async def test_deletion_waits_while_a_modelserving_names_the_cache_then_cleans_up() -> None:
    serving = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "chat", "namespace": "ns", "annotations": {MODEL_CACHE: "llama"}},
        "spec": {},
    }
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM), (MODELSERVINGS, serving))
    await world.reconcile()
    await world.kube.delete(MODELCACHES, "llama", "ns")
    result = await world.reconcile()
    assert result is not None and ("Warning", "ModelCacheInUse") in world.recorded()
    assert world.kube.peek(MODELCACHES, "llama", "ns") is not None
    await world.kube.delete(MODELSERVINGS, "chat", "ns")
    await world.reconcile()
    cleanups = [j for j in world.jobs() if j["spec"]["template"]["spec"]["containers"][0]["args"][1] == "--remove"]
    assert len(cleanups) == 1 and world.kube.peek(MODELCACHES, "llama", "ns") is not None
    assert world.messages("JobCreated")[-1].startswith(f"cleanup Job {cleanups[0]['metadata']['name']} created")
    world.run_job(cleanups[0], "succeeded")
    await world.reconcile()
    assert world.kube.peek(MODELCACHES, "llama", "ns") is None
    assert ("Normal", "CleanupSucceeded") in world.recorded()


def _node(name: str, *, gpu: bool, ready: bool = True) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, **({"tier": "gpu"} if gpu else {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


NODE_LOCAL = {"nodeLocal": {"path": "/mnt/models", "nodeSelector": {"tier": "gpu"}}}


def _by_node(world: World, kind: str = "download") -> dict[str, dict[str, Any]]:
    """The cache's Jobs of one kind (download or cleanup), by the node each is pinned to."""
    found = {}
    for job in world.jobs():
        pod = job["spec"]["template"]["spec"]
        if ("--remove" in pod["containers"][0]["args"]) == (kind == "cleanup"):
            found[pod["nodeSelector"]["kubernetes.io/hostname"]] = job
    return found


async def test_a_node_local_cache_has_one_job_per_selected_node_and_lists_the_nodes_it_is_ready_on() -> None:
    world = World(
        (MODELCACHES, _cache(storage=NODE_LOCAL)),
        (NODES, _node("gpu-a", gpu=True)),
        (NODES, _node("gpu-b", gpu=True)),
        (NODES, _node("gpu-c", gpu=True)),
        (NODES, _node("cpu-a", gpu=False)),
    )
    await world.reconcile()
    jobs = _by_node(world)
    assert sorted(jobs) == ["gpu-a", "gpu-b", "gpu-c"]  # the node outside the selector gets none
    for node, job in jobs.items():
        volumes = job["spec"]["template"]["spec"]["volumes"]
        assert any((v.get("hostPath") or {}).get("path") == "/mnt/models" for v in volumes), node
    assert world.mc()["status"]["phase"] == "Pending"

    world.run_job(jobs["gpu-a"], "succeeded", _ok(), ip="10.0.0.1")
    world.run_job(jobs["gpu-b"], "active", ip="10.0.0.2")
    failure = json.dumps({"ok": False, "reason": "DownloadFailed", "message": "disk full"})
    world.run_job(jobs["gpu-c"], "failed", failure, ip="10.0.0.3")
    await world.reconcile()
    status = world.mc()["status"]
    assert (status["phase"], status["nodes"]) == ("Ready", ["gpu-a"])  # only the node whose Job succeeded
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True" and "gpu-c" in degraded["message"]

    world.run_job(jobs["gpu-b"], "succeeded", _ok(), ip="10.0.0.2")
    await world.reconcile()
    assert world.mc()["status"]["nodes"] == ["gpu-a", "gpu-b"]

    # gpu-b leaves the selector: out of status.nodes at once (no pod is sent there), no new Job, but its Job stays:
    # the record that its files are there. A node that no longer exists loses its (failed) Job.
    world.kube.put(NODES, _node("gpu-b", gpu=False))
    await world.kube.delete(NODES, "gpu-c")
    await world.reconcile()
    assert world.mc()["status"]["nodes"] == ["gpu-a"]
    assert sorted(_by_node(world)) == ["gpu-a", "gpu-b"]
    assert [c.name for c in world.kube.calls_of("delete", JOBS)] == [jobs["gpu-c"]["metadata"]["name"]]

    # Deleted: every node left that holds the files gets its cleanup Job, the one that left the selector too.
    await world.kube.delete(MODELCACHES, "llama", "ns")
    await world.reconcile()
    cleanups = _by_node(world, "cleanup")
    assert sorted(cleanups) == ["gpu-a", "gpu-b"]
    for job in cleanups.values():
        world.run_job(job, "succeeded")
    await world.reconcile()
    assert world.kube.peek(MODELCACHES, "llama", "ns") is None
    assert ("Normal", "CleanupSucceeded") in world.recorded()
