"""``kthena-py status`` as a process against a real kube-apiserver (no PodGroup CRD served: Volcano is absent).

The objects of a builder case (``test/unit/plan/modelserving/statuscases.py``) are created for real (statuses
through the ``status`` subresource, owner references to the created ModelServing's UID); the command reads them
with the kubeconfig it is given, prints ``-o json``, and with ``-w`` prints again when a pod becomes Ready and
exits 0 when the ModelServing is deleted, and again when the ModelCache its annotation names changes.
"""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from unit.plan.modelserving.statuscases import CASES
from unit.plan.modelserving.statusview import NAME, NS, World, running

from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONFIGMAPS, CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.types import MSRef
from kthena_py.testing.controlplane import EnvTest
from kthena_py.vocab.labels import MODEL_CACHE

pytestmark = pytest.mark.envtest
MODELCACHE_CRD = Path(__file__).resolve().parents[2] / "manifests" / "crd" / "serving.kthena-py.io_modelcaches.yaml"


def _metadata(obj: dict[str, Any], namespace: str, owner: MSRef | None) -> dict[str, Any]:
    body = copy.deepcopy(obj)
    md = body["metadata"]
    for key in ("uid", "creationTimestamp", "resourceVersion", "deletionTimestamp"):
        md.pop(key, None)
    md["namespace"] = namespace
    if owner is not None:
        md["ownerReferences"] = [naming.owner_reference(owner)]
    return body


async def create_world(kube: KubeClient, world: World, namespace: str) -> None:
    doc = _metadata(world.doc, namespace, None)
    status = doc.pop("status")
    doc["metadata"].pop("generation", None)
    ms = await kube.create(MODELSERVINGS, doc, namespace)
    await kube.patch(MODELSERVINGS, NAME, {"status": status}, namespace, subresource="status")
    owner = MSRef(NAME, namespace, ms["metadata"]["uid"], 1)
    for pod in world.pods:
        body = _metadata(pod, namespace, owner)
        pod_status = body.pop("status")
        await kube.create(PODS, body, namespace)
        await kube.patch(PODS, body["metadata"]["name"], {"status": pod_status}, namespace, subresource="status")
    for service in world.services:
        body = _metadata(service, namespace, owner)
        body["spec"] = {"clusterIP": "None", "selector": {naming.LABEL_NAME: NAME}}
        await kube.create(SERVICES, body, namespace)
    for revision in world.revisions:
        await kube.create(CONTROLLER_REVISIONS, _metadata(revision, namespace, owner), namespace)
    if world.tracker is not None:
        await kube.create(CONFIGMAPS, _metadata(world.tracker, namespace, owner), namespace)


async def _run(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "status",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def test_json_names_why_each_pod_is_not_running(kube: KubeClient, kubeconfig: Path, namespace: str) -> None:
    await create_world(kube, CASES["crash-loop"](), namespace)
    code, out, err = await _run(kubeconfig, NAME, "-n", namespace, "-o", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert (doc["name"], doc["namespace"], doc["ready"], doc["desired"]) == (NAME, namespace, 0, 1)
    pods = {p["name"]: p for g in doc["groups"] for i in g["instances"] for p in i["pods"]}
    assert sorted(pods) == ["llama-0-decode-0-0", "llama-0-decode-0-1", "llama-0-prefill-0-0"]
    crash = pods["llama-0-prefill-0-0"]
    assert (crash["why"]["kind"], crash["restarts"], crash["node"]) == ("crash", 7, "gpu-node-0")
    assert [pods[n]["why"] for n in ("llama-0-decode-0-0", "llama-0-decode-0-1")] == [None, None]
    assert [g["podgroupPhase"] for g in doc["groups"]] == [""]  # no PodGroup CRD: none listed, no error
    roles = {r["name"]: (r["ready"], r["desired"]) for r in doc["groups"][0]["roles"]}
    assert roles == {"prefill": (0, 1), "decode": (1, 1)}  # the decode instance has its Service


async def test_the_eviction_tracker_is_read(kube: KubeClient, kubeconfig: Path, namespace: str) -> None:
    world = CASES["eviction-exhausted"]()
    world.pods = [p for p in world.pods if "deletionTimestamp" not in p["metadata"]]  # a real delete cannot be held
    assert world.tracker is not None
    entries = world.tracker["data"]["entries"]
    world.tracker["data"]["entries"] = entries.replace(f"/{NS}/{NAME}/", f"/{namespace}/{NAME}/")  # unit keys
    await create_world(kube, world, namespace)
    code, out, _ = await _run(kubeconfig, NAME, "-n", namespace)
    assert code == 0
    # the tracker's entry expires relative to the fixtures' clock, far in the future of this cluster
    assert "! eviction of pod llama-1-decode-0-0 granted" in out
    assert "DisruptionAllowed=False InsufficientReady" in out


async def test_a_missing_modelserving_fails_with_one_line(kubeconfig: Path, namespace: str) -> None:
    code, out, err = await _run(kubeconfig, "nope", "-n", namespace)
    assert (code, out) == (1, "")
    assert err == f'kthena-py: error: neither a modelserving nor a modelpool "nope" in namespace {namespace}\n'


async def _read_until(stream: asyncio.StreamReader, text: str, seen: list[str]) -> str:
    async with asyncio.timeout(60):
        while text not in "".join(seen):
            line = await stream.readline()
            if not line:
                raise AssertionError(f"output ended before {text!r}: {''.join(seen)}")
            seen.append(line.decode())
    return "".join(seen)


async def test_watch_prints_again_on_readiness_and_exits_on_deletion(
    kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await create_world(kube, CASES["image-pull"](), namespace)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "status",
        "--kubeconfig",
        str(kubeconfig),
        "-n",
        namespace,
        "-w",
        NAME,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        first = await _read_until(process.stdout, "image pull: ImagePullBackOff", seen)
        assert "decode-0  1/2 pods ready" in first
        seen.clear()
        status = running(ago=0)
        await kube.patch(PODS, "llama-0-decode-0-1", {"status": status}, namespace, subresource="status")
        second = await _read_until(process.stdout, "decode-0  2/2 pods ready", seen)
        assert "ImagePullBackOff" not in second
        seen.clear()
        await kube.delete(MODELSERVINGS, NAME, namespace)
        await _read_until(process.stdout, f'modelserving "{NAME}" was deleted', seen)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _interruptible() -> None:
    """In the child: Ctrl-C as at a terminal, even when the tier runs in the background (where it is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_ctrl_c_ends_the_watch_quietly(kube: KubeClient, kubeconfig: Path, namespace: str) -> None:
    await create_world(kube, CASES["healthy"](), namespace)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "status",
        "--kubeconfig",
        str(kubeconfig),
        "-n",
        namespace,
        "-w",
        NAME,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_interruptible,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        await _read_until(process.stdout, "decode-0  2/2 pods ready", [])
        await asyncio.sleep(0.5)  # the watches are open
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 30) == 130
        assert await process.stderr.read() == b""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_watch_prints_again_when_the_named_model_cache_changes(
    envtest: EnvTest, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    envtest.install_crds([MODELCACHE_CRD])
    world = CASES["healthy"]()
    world.doc["metadata"].setdefault("annotations", {})[MODEL_CACHE] = "llama-3"
    await create_world(kube, world, namespace)
    cache = {
        "apiVersion": MODELCACHES.api_version,
        "kind": "ModelCache",
        "metadata": {"name": "llama-3"},
        "spec": {"source": "hf://org/llama-3", "storage": {"persistentVolumeClaim": {"claimName": "models"}}},
    }
    created = await kube.create(MODELCACHES, cache, namespace)
    generation = created["metadata"]["generation"]
    progress = {"bytesDone": 1024**3, "bytesTotal": 4 * 1024**3, "filesDone": 0, "filesTotal": 2}
    downloading = {"phase": "Downloading", "observedGeneration": generation, "progress": progress}
    await kube.patch(MODELCACHES, "llama-3", {"status": downloading}, namespace, subresource="status")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "status",
        "--kubeconfig",
        str(kubeconfig),
        "-n",
        namespace,
        "-w",
        NAME,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        await _read_until(process.stdout, "ModelCache llama-3: Downloading (25%, 1.0 GiB of 4.0 GiB)", seen)
        seen.clear()
        progress["bytesDone"] = 2 * 1024**3
        await kube.patch(MODELCACHES, "llama-3", {"status": downloading}, namespace, subresource="status")
        await _read_until(process.stdout, "ModelCache llama-3: Downloading (50%, 2.0 GiB of 4.0 GiB)", seen)
        seen.clear()
        ready = {"phase": "Ready", "observedGeneration": generation, "progress": None}
        await kube.patch(MODELCACHES, "llama-3", {"status": ready}, namespace, subresource="status")
        await _read_until(process.stdout, "ModelCache llama-3: Ready,", seen)
        await kube.delete(MODELSERVINGS, NAME, namespace)
        await _read_until(process.stdout, f'modelserving "{NAME}" was deleted', seen)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
