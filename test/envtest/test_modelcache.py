"""ModelCache on a real kube-apiserver: the CRD, the API server's and the webhook's refusals, and the controller.

envtest runs no job controller and no kubelet, so the tests write what they would: a Job's status, and its pod
with the termination message of ``kthena-py download``. The controller runs in-process (a Manager with only the
ModelCache controller, a short cleanup bound, progress read from a table instead of pods).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.controllers import modelcache
from kthena_py.controllers.admission import add_handlers
from kthena_py.controllers.resources import MODELCACHES
from kthena_py.kube import Invalid, KubeClient, NotFound
from kthena_py.kube.resources import EVENTS, JOBS, NAMESPACES, PERSISTENT_VOLUME_CLAIMS, PODS, VALIDATING_WEBHOOKS
from kthena_py.runtime.certs import generate
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.webhook import WebhookServer
from kthena_py.testing.controlplane import EnvTest, find_kubectl
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import MODEL_CACHE_FINALIZER, MODEL_CACHE_FINGERPRINT

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "manifests" / "crd" / "serving.kthena-py.io_modelcaches.yaml"
SHA = "d" * 64
TEST_LABEL = "kthena-py.io/modelcache-test"


@pytest.fixture(scope="module")
def crd(envtest: EnvTest) -> list[dict[str, Any]]:
    return envtest.install_crds([CRD])


def _cache(name: str = "llama", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": name},
        "spec": {
            "source": "hf://org/llama",
            "sha256": SHA,
            "storage": {"persistentVolumeClaim": {"claimName": "models"}},
            **spec,
        },
    }


def _causes(error: Invalid) -> dict[str, str]:
    return {cause.field: cause.message for cause in error.causes}


async def test_the_crd_is_served_with_its_short_name_category_and_columns(
    envtest: EnvTest, crd: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    status, body = envtest.client.raw("GET", "/apis/serving.kthena-py.io/v1alpha1")
    assert status == 200
    resources = {r["name"]: r for r in body["resources"]}
    assert resources["modelcaches"]["shortNames"] == ["mcache"] and resources["modelcaches"]["categories"] == ["kthena"]
    assert "modelcaches/status" in resources
    await kube.create(MODELCACHES, _cache(), namespace)
    status_body = {
        "phase": "Downloading",
        "size": "2.0 GiB",
        "progress": {"bytesDone": 1, "filesDone": 0, "percent": "42%"},
        "path": "pvc://models/x",
        "revision": "r1",
    }
    await kube.patch(MODELCACHES, "llama", {"status": status_body}, namespace, subresource="status")
    argv = ["--kubeconfig", str(envtest.kubeconfig_path), "get", "mcache", "-n", namespace, "-o", "wide"]
    process = await asyncio.create_subprocess_exec(
        str(find_kubectl()), *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err
    header, row = out.decode().splitlines()[:2]
    assert header.split() == ["NAME", "PHASE", "SIZE", "PROGRESS", "PATH", "REVISION", "AGE"]
    assert row.split()[:7] == ["llama", "Downloading", "2.0", "GiB", "42%", "pvc://models/x", "r1"]


async def test_the_api_server_refuses_two_storages_both_digests_and_a_changed_storage(
    crd: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    two = _cache(
        "two",
        storage={"persistentVolumeClaim": {"claimName": "a"}, "nodeLocal": {"path": "/m", "nodeSelector": {"a": "b"}}},
    )
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELCACHES, two, namespace)
    assert (
        "exactly one of persistentVolumeClaim, volumeClaimTemplate, nodeLocal must be set"
        in _causes(caught.value)["spec.storage"]
    )
    both = _cache("both", fileSHA256={"m": SHA})
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELCACHES, both, namespace)
    assert "mutually exclusive" in _causes(caught.value)["spec.fileSHA256"]
    stored = await kube.create(MODELCACHES, _cache("fixed"), namespace)
    moved = copy.deepcopy(stored)
    moved["spec"]["storage"] = {"persistentVolumeClaim": {"claimName": "elsewhere"}}
    with pytest.raises(Invalid) as caught:
        await kube.replace(MODELCACHES, moved, namespace)
    assert "storage is immutable" in _causes(caught.value)["spec.storage"]


@pytest.fixture
async def webhook(envtest: EnvTest, crd: list[dict[str, Any]], kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """The ModelCache webhook of manifests/webhook, served in-process and selecting only this test's namespace."""
    label = uuid.uuid4().hex[:8]
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": {TEST_LABEL: label}}})
    certs = generate(["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
    pair = (certs.serving.cert, certs.serving.key)
    server = WebhookServer(lambda: pair, host="127.0.0.1", port=0)
    add_handlers(server)
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 30)
    config = yaml.safe_load((ROOT / "manifests" / "webhook" / "validating_webhook_configuration.yaml").read_text())
    (hook,) = [h for h in config["webhooks"] if h["rules"][0]["resources"] == ["modelcaches"]]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{server.port}{hook['clientConfig']['service']['path']}",
        "caBundle": base64.b64encode(certs.ca_bundle).decode(),
    }
    hook["namespaceSelector"] = {"matchLabels": {TEST_LABEL: label}}
    name = f"modelcache-test-{label}"
    await kube.create(VALIDATING_WEBHOOKS, {**config, "metadata": {"name": name}, "webhooks": [hook]})

    async def denies() -> bool:
        try:
            await kube.create(MODELCACHES, _cache("probe", source="gs://b/m"), namespace, dry_run=True)
        except Invalid as exc:
            return "admission webhook" in exc.message
        return False

    try:
        await eventually(denies, timeout=30, description="the webhook takes effect")
        yield namespace
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(VALIDATING_WEBHOOKS, name)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_webhook_refuses_unsupported_sources_and_digests_of_unlisted_files(
    webhook: str, kube: KubeClient
) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELCACHES, _cache("gcs", source="gs://bucket/model"), webhook)
    assert "unsupported source scheme gs://" in _causes(caught.value)["spec.source"]
    unlisted = _cache("unlisted", files=["a"], fileSHA256={"b": SHA})
    unlisted["spec"].pop("sha256")
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELCACHES, unlisted, webhook)
    assert "must be one of spec.files" in _causes(caught.value)["spec.fileSHA256[b]"]
    await kube.create(MODELCACHES, _cache("fine", source="s3://bucket/llama"), webhook)


class TableProgress:
    def __init__(self) -> None:
        self.bodies: dict[str, Any] = {}

    async def fetch(self, ip: str, port: int) -> Any:
        return self.bodies.get(ip)


@contextlib.asynccontextmanager
async def running(kube: KubeClient, namespace: str, progress: TableProgress) -> AsyncIterator[Manager]:
    manager = Manager(
        kube, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    settings = modelcache.Settings(cleanup_timeout=4.0, backoff_base=1.0, progress_interval=0.5)
    modelcache.register(manager, workers=2, settings=settings, progress=progress)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: manager.leading.is_set() or task.done(), timeout=60)
        yield manager
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)


async def _status(kube: KubeClient, namespace: str, name: str = "llama") -> dict[str, Any]:
    return dict((await kube.get(MODELCACHES, name, namespace)).get("status") or {})


async def _run_job(
    kube: KubeClient, namespace: str, job: dict[str, Any], state: str, message: str | None = None
) -> None:
    """Write the pod and the Job status as the kubelet and the job controller would."""
    md = job["metadata"]
    name = f"{md['name']}-pod"
    phase = {"active": "Running", "succeeded": "Succeeded", "failed": "Failed"}[state]
    try:
        await kube.get(PODS, name, namespace)
    except NotFound:
        pod = {
            "metadata": {
                "name": name,
                "labels": job["spec"]["template"]["metadata"]["labels"],
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": md["name"], "uid": md["uid"], "controller": True}
                ],
            },
            "spec": {"containers": [{"name": "download", "image": "kthena-py:latest"}], "nodeName": "nowhere"},
        }
        await kube.create(PODS, pod, namespace)
    pod_status: dict[str, Any] = {"phase": phase, "podIP": "10.9.8.7"}
    if message is not None:
        terminated = {
            "exitCode": 0 if state == "succeeded" else 1,
            "message": message,
            "reason": "Completed" if state == "succeeded" else "Error",
        }
        pod_status["containerStatuses"] = [
            {
                "name": "download",
                "image": "kthena-py:latest",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ]
    await kube.patch(PODS, name, {"status": pod_status}, namespace, subresource="status")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # The API server refuses to change an unsuspended Job's startTime: a second write keeps the first one's.
    started = ((await kube.get(JOBS, md["name"], namespace)).get("status") or {}).get("startTime") or now
    status: dict[str, Any] = {"active": 1, "startTime": started}
    if state == "succeeded":
        status = {"active": 0, "succeeded": 1, "startTime": started, "completionTime": now, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now},
        ]}  # fmt: skip
    elif state == "failed":
        why = {"reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
        status = {"active": 0, "failed": 2, "startTime": started, "conditions": [
            {"type": "FailureTarget", "status": "True", "lastTransitionTime": now, **why},
            {"type": "Failed", "status": "True", "lastTransitionTime": now, **why},
        ]}  # fmt: skip
    await kube.patch(JOBS, md["name"], {"status": status}, namespace, subresource="status")


async def _events(kube: KubeClient, namespace: str) -> list[tuple[str, str, str]]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelCache")).items
    return [(e["type"], e["reason"], e.get("message", "")) for e in items]


async def _jobs(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return [j for j in (await kube.list(JOBS, namespace)).items if not j["metadata"].get("deletionTimestamp")]


async def test_a_cache_is_staged_by_a_job_and_reports_each_phase(
    crd: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    await kube.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "metadata": {"name": "models"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        namespace,
    )
    progress = TableProgress()
    async with running(kube, namespace, progress):
        await kube.create(MODELCACHES, _cache(), namespace)

        async def one_job() -> dict[str, Any]:
            jobs = await _jobs(kube, namespace)
            assert len(jobs) == 1
            return jobs[0]

        job = await eventually(one_job, timeout=30, description="the download Job")

        async def pending() -> bool:
            cache = await kube.get(MODELCACHES, "llama", namespace)
            assert MODEL_CACHE_FINALIZER in cache["metadata"]["finalizers"]
            status = cache.get("status") or {}
            return status.get("phase") == "Pending" and status.get("jobName") == job["metadata"]["name"]

        await eventually(pending, timeout=30, description="Pending, with the finalizer")
        pod = job["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "volcano" and pod["containers"][0]["args"][:3] == [
            "download",
            "-s",
            "hf://org/llama",
        ]

        progress.bodies["10.9.8.7"] = {"bytesDone": 3, "bytesTotal": 4, "filesDone": 0, "filesTotal": 1}
        await _run_job(kube, namespace, job, "active")

        async def downloading() -> bool:
            status = await _status(kube, namespace)
            return status.get("phase") == "Downloading" and status.get("progress", {}).get("percent") == "75%"

        await eventually(downloading, timeout=30, description="Downloading with progress")
        result = {
            "ok": True,
            "files": [{"name": "m.gguf", "size": 2048, "sha256": SHA}],
            "sizeBytes": 2048,
            "revision": "r9",
        }
        await _run_job(kube, namespace, job, "succeeded", json.dumps(result))

        async def ready() -> dict[str, Any]:
            status = await _status(kube, namespace)
            assert status.get("phase") == "Ready"
            return status

        status = await eventually(ready, timeout=30, description="Ready")
        assert (status["size"], status["sizeBytes"], status["sha256"], status["revision"]) == (
            "2.0 KiB",
            2048,
            SHA,
            "r9",
        )
        conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert conditions == {
            "Ready": ("True", "Cached"),
            "Progressing": ("False", "Cached"),
            "Degraded": ("False", "NoFailure"),
        }
        assert status["observedGeneration"] == 1 and "progress" not in status

        async def said() -> bool:
            reasons = {(t, r) for t, r, _ in await _events(kube, namespace)}
            return {("Normal", "JobCreated"), ("Normal", "Downloading"), ("Normal", "Cached")} <= reasons

        await eventually(said, timeout=30, description="the Events")


async def test_a_wrong_digest_degrades_and_a_fixed_spec_recovers(
    crd: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    await kube.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "metadata": {"name": "models"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        namespace,
    )
    async with running(kube, namespace, TableProgress()):
        await kube.create(MODELCACHES, _cache(), namespace)
        first = (await eventually(lambda: _jobs(kube, namespace), timeout=30))[0]
        failure = {"ok": False, "reason": "IntegrityCheckFailed", "message": "m.gguf: sha256 is 0000, expected dddd"}
        await _run_job(kube, namespace, first, "failed", json.dumps(failure))

        async def degraded() -> dict[str, Any]:
            status = await _status(kube, namespace)
            condition = next(c for c in status.get("conditions", []) if c["type"] == "Degraded")
            assert condition["status"] == "True" and condition["reason"] == "IntegrityCheckFailed"
            return condition

        condition = await eventually(degraded, timeout=30, description="Degraded")
        assert "sha256 is 0000" in condition["message"]

        async def warned() -> bool:
            return ("Warning", "IntegrityCheckFailed") in {(t, r) for t, r, _ in await _events(kube, namespace)}

        await eventually(warned, timeout=30, description="the Warning Event")
        fixed = await kube.get(MODELCACHES, "llama", namespace)
        fixed["spec"]["sha256"] = "e" * 64
        await kube.replace(MODELCACHES, fixed, namespace)

        old_fp = first["metadata"]["labels"][MODEL_CACHE_FINGERPRINT]

        async def replaced() -> dict[str, Any]:
            jobs = await _jobs(kube, namespace)  # the old spec's Jobs (a retry included) are deleted
            assert len(jobs) == 1 and jobs[0]["metadata"]["labels"][MODEL_CACHE_FINGERPRINT] != old_fp
            return jobs[0]

        second = await eventually(replaced, timeout=30, description="a Job for the fixed spec")
        assert "e" * 64 in second["spec"]["template"]["spec"]["containers"][0]["args"]
        await _run_job(kube, namespace, second, "succeeded", json.dumps({"ok": True, "files": []}))
        await eventually(lambda: _phase_is(kube, namespace, "Ready"), timeout=30, description="Ready again")


async def _phase_is(kube: KubeClient, namespace: str, phase: str) -> bool:
    return (await _status(kube, namespace)).get("phase") == phase


async def test_deleting_a_cache_never_sticks(crd: list[dict[str, Any]], kube: KubeClient, namespace: str) -> None:
    async with running(kube, namespace, TableProgress()):
        # The claim never existed: the finalizer goes at once, with a Warning naming what is left.
        await kube.create(MODELCACHES, _cache("orphan"), namespace)
        await eventually(lambda: _has_finalizer(kube, namespace, "orphan"), timeout=30)
        await kube.delete(MODELCACHES, "orphan", namespace)
        await eventually(lambda: _gone(kube, namespace, "orphan"), timeout=30, description="the orphan cache is gone")

        async def abandoned() -> bool:
            return any(r == "CleanupAbandoned" for _, r, _ in await _events(kube, namespace))

        await eventually(abandoned, timeout=30, description="the CleanupAbandoned Event")
        # The claim exists but no job controller runs the cleanup Job: the finalizer goes after the bound (4 s).
        await kube.create(
            PERSISTENT_VOLUME_CLAIMS,
            {
                "metadata": {"name": "models"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            },
            namespace,
        )
        await kube.create(MODELCACHES, _cache("stuck"), namespace)
        await eventually(lambda: _has_finalizer(kube, namespace, "stuck"), timeout=30)
        await kube.delete(MODELCACHES, "stuck", namespace)

        async def cleanup_job() -> bool:
            return any(
                j["spec"]["template"]["spec"]["containers"][0]["args"][1] == "--remove"
                for j in await _jobs(kube, namespace)
            )

        await eventually(cleanup_job, timeout=30, description="the cleanup Job")
        await eventually(lambda: _gone(kube, namespace, "stuck"), timeout=30, description="the bound lets the cache go")


async def _has_finalizer(kube: KubeClient, namespace: str, name: str) -> bool:
    return MODEL_CACHE_FINALIZER in ((await kube.get(MODELCACHES, name, namespace))["metadata"].get("finalizers") or [])


async def _gone(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        await kube.get(MODELCACHES, name, namespace)
    except NotFound:
        return True
    return False
