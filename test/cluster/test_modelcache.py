"""ModelCache and the serving gate end to end in the cluster tier, with the real parts.

The manager runs as a process (SIGKILL-able); download Jobs are scheduled by Volcano onto mini-kubelet nodes whose
pods really run ``kthena-py download`` (the manager's downloader image is mapped to this interpreter's
``kthena-py``); the weights come from the loopback artifact server's fake Hugging Face hub (``hf://`` with
``HF_ENDPOINT`` from the cache's ``sourceSecretRef``); the storage is a hostPath PV pre-bound to a claim, or a
node-local path. Serving pods of gated ModelServings land on kwok nodes (or nowhere): only their spec is checked.
Every wait is bounded; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.modelcache import MODEL_CACHE_MOUNT_PATH, MODEL_CACHE_VOLUME, model_dir
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.download.marker import MARKER_NAME, decode
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CRDS, JOBS, PERSISTENT_VOLUME_CLAIMS, PODGROUPS, PODS, SERVICES
from kthena_py.testing.artifacts import ArtifactServer, HubRepo
from kthena_py.testing.kubelet import MiniKubelet
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import (
    MODEL_CACHE_ATTEMPT,
    MODEL_CACHE_FINALIZER,
    MODEL_CACHE_FINGERPRINT,
    MODEL_CACHE_JOB_KIND,
    MODEL_CACHE_NAME,
    MODEL_CACHE_NODE,
)

from .mcutil import (
    RUNNER,
    condition,
    download_jobs,
    events_of,
    gated_modelserving,
    hub_secret,
    modelcache,
    placement,
    running_manager,
    sha256,
    three_file_repo,
    throttle,
    wait_cache,
    wait_ms_condition,
)
from .msutil import live_pods

pytestmark = pytest.mark.cluster

CLAIM = "models"
PV_PATH = "/exports/models"


async def bound_claim(
    kube: KubeClient,
    namespace: str,
    make_hostpath_volume: Callable[..., str],
    name: str = CLAIM,
    path: str = PV_PATH,
) -> None:
    """The claim ``name`` (default :data:`CLAIM`), bound to a hostPath PV at ``path``."""
    make_hostpath_volume(namespace, name, path)
    claim = {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    await kube.create(PERSISTENT_VOLUME_CLAIMS, claim, namespace)

    async def bound() -> bool:
        c = await kube.get(PERSISTENT_VOLUME_CLAIMS, name, namespace)
        return (c.get("status") or {}).get("phase") == "Bound"

    await eventually(bound, timeout=120, description=f"claim {name} Bound")


CLAIM_STORAGE = {"persistentVolumeClaim": {"claimName": CLAIM}}


@contextlib.asynccontextmanager
async def recording(kube: KubeClient, rt: Any, namespace: str, **selector: str) -> AsyncIterator[list[KubeObject]]:
    """Every object a watch (from now on) delivers, in order, while the block runs."""
    seen: list[KubeObject] = []
    opened = asyncio.Event()

    async def run() -> None:
        async for event in kube.watch(rt, namespace, on_open=opened.set, **selector):
            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                seen.append(event.object)

    task = asyncio.create_task(run())
    await eventually(lambda: opened.is_set() or task.done(), timeout=30, description="watch open")
    try:
        yield seen
    finally:
        failed = task.done() and not task.cancelled() and task.exception() is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    assert not failed, f"the watch of {rt.plural} ended early: {task.exception()!r}"  # it saw everything


def phases(seen: list[KubeObject]) -> list[str]:
    """The distinct consecutive status phases seen."""
    out: list[str] = []
    for obj in seen:
        phase = (obj.get("status") or {}).get("phase")
        if phase and (not out or out[-1] != phase):
            out.append(phase)
    return out


def served_digests(repo: HubRepo) -> dict[str, str]:
    return {name: sha256(content) for name, content in repo.files.items() if isinstance(content, bytes)}


def assert_gated_pod_spec(pod: KubeObject, cache: str, sub_path: str) -> None:
    spec = pod["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert MODEL_CACHE_VOLUME in volumes, spec["volumes"]
    for c in spec["containers"]:
        mounts = [m for m in c.get("volumeMounts") or [] if m["name"] == MODEL_CACHE_VOLUME]
        assert mounts == [
            {"name": MODEL_CACHE_VOLUME, "mountPath": MODEL_CACHE_MOUNT_PATH, "subPath": sub_path, "readOnly": True}
        ], c.get("volumeMounts")
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        assert env["KTHENA_MODEL_PATH"] == MODEL_CACHE_MOUNT_PATH
        assert env["KTHENA_MODEL_CACHE"] == cache


async def kubectl_table(kubectl: Path, kubeconfig: Path, namespace: str, name: str, *flags: str) -> list[list[str]]:
    """``kubectl get modelcache NAME`` as rows of cells (cells are split at two or more spaces)."""
    proc = await asyncio.create_subprocess_exec(
        str(kubectl),
        "--kubeconfig",
        str(kubeconfig),
        "-n",
        namespace,
        "get",
        "modelcache",
        name,
        *flags,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    return [re.split(r"\s{2,}", line.strip()) for line in out.decode().splitlines()]


# --- 1. Pending -> Downloading -> Ready ---------------------------------------------------------------------------


async def test_a_three_file_cache_goes_pending_downloading_ready_with_its_digests(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
    kubectl_path: Path,
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/tiny"))
        throttle(server, repo, "model.safetensors", 192 * 1024)  # 512 KiB: the download runs a few seconds
        await hub_secret(kube, namespace, server)
        doc = modelcache("tiny", repo, CLAIM_STORAGE, placement=placement([kubelet.node.name]))
        async with (
            recording(kube, MODELCACHES, namespace, field_selector="metadata.name=tiny") as seen,
            running_manager(kubeconfig, namespace, tmp_path / "manager.log"),
        ):
            await kube.create(MODELCACHES, doc, namespace)
            mc = await wait_cache(kube, namespace, "tiny", "Ready")
        assert phases(seen) == ["Pending", "Downloading", "Ready"], [(o.get("status") or {}).get("phase") for o in seen]

    status = mc["status"]
    directory = model_dir("hf://acme/tiny")
    assert status["path"] == f"pvc://{CLAIM}/{directory}"
    digests = served_digests(repo)
    assert {f["name"]: f["sha256"] for f in status["files"]} == digests
    assert {f["name"]: f["size"] for f in status["files"]} == {n: len(c) for n, c in repo.files.items()}  # type: ignore[arg-type]
    assert status["sizeBytes"] == sum(len(c) for c in repo.files.values())  # type: ignore[arg-type]
    assert status["size"]
    assert status["revision"] == repo.commit
    assert status["observedGeneration"] == mc["metadata"]["generation"]
    ready = condition(mc, "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("True", "Cached", 1)
    assert condition(mc, "Degraded")["status"] == "False"
    assert MODEL_CACHE_FINALIZER in mc["metadata"]["finalizers"]

    staged = kubelet.volume_path(PV_PATH) / directory
    assert (staged / MARKER_NAME).is_file()
    for name, content in repo.files.items():
        assert (staged / name).read_bytes() == content
    marker = decode((staged / MARKER_NAME).read_text())
    assert marker is not None and marker.resolved_revision == repo.commit
    assert {f.name: f.sha256 for f in marker.files} == digests

    crd = await kube.get(CRDS, "modelcaches.serving.kthena-py.io")
    columns = [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Phase", "Size", "Progress", "Path", "Revision", "Age"]
    table = await kubectl_table(kubectl_path, kubeconfig, namespace, "tiny")
    assert table[0] == ["NAME", "PHASE", "SIZE", "PROGRESS", "AGE"]
    assert table[1][:3] == ["tiny", "Ready", status["size"]] and len(table[1]) == 4, table  # no progress once Ready
    wide = await kubectl_table(kubectl_path, kubeconfig, namespace, "tiny", "-o", "wide")
    assert wide[0] == ["NAME", "PHASE", "SIZE", "PROGRESS", "PATH", "REVISION", "AGE"]
    assert wide[1][:2] == ["tiny", "Ready"] and wide[1][3:5] == [status["path"], repo.commit], wide


# --- 2. a ModelServing created before its cache waits, then mounts it ---------------------------------------------


async def test_a_modelserving_created_before_its_cache_waits_then_mounts_it(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/gated"))
        throttle(server, repo, "model.safetensors", 192 * 1024)
        await hub_secret(kube, namespace, server)
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log"):
            await kube.create(MODELSERVINGS, gated_modelserving("srv", "weights"), namespace)
            ms = await wait_ms_condition(kube, namespace, "srv", "ModelCached", "False", "WaitingForModelCache")
            assert "weights not found" in condition(ms, "ModelCached")["message"]
            assert await live_pods(kube, namespace, "srv") == {}
            # nothing of the ModelServing is created while it waits: no PodGroup, no Service either
            assert (await kube.list(PODGROUPS, namespace)).items == []
            assert (await kube.list(SERVICES, namespace)).items == []

            doc = modelcache("weights", repo, CLAIM_STORAGE, placement=placement([kubelet.node.name]))
            await kube.create(MODELCACHES, doc, namespace)
            await wait_cache(kube, namespace, "weights", "Downloading")
            ms = await kube.get(MODELSERVINGS, "srv", namespace)
            assert condition(ms, "ModelCached")["reason"] == "WaitingForModelCache"
            assert await live_pods(kube, namespace, "srv") == {}

            await wait_cache(kube, namespace, "weights", "Ready")
            await wait_ms_condition(kube, namespace, "srv", "ModelCached", "True", "ModelCacheReady")
            found = await eventually(lambda: live_pods(kube, namespace, "srv"), timeout=90, description="pods of srv")
    for pod in found.values():
        assert_gated_pod_spec(pod, "weights", model_dir("hf://acme/gated"))
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == MODEL_CACHE_VOLUME)
        assert volume["persistentVolumeClaim"] == {"claimName": CLAIM, "readOnly": True}


# --- 3. a wrong digest fails the cache and keeps the gate shut; fixing it recovers -----------------------------------


async def test_a_wrong_digest_fails_integrity_keeps_the_gate_shut_and_a_fixed_spec_recovers(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/bad"))
        digests = served_digests(repo)
        wrong = {**digests, "model.safetensors": sha256(b"not these weights")}
        await hub_secret(kube, namespace, server)
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log"):
            await kube.create(MODELSERVINGS, gated_modelserving("srv", "bad"), namespace)
            doc = modelcache("bad", repo, CLAIM_STORAGE, placement=placement([kubelet.node.name]), fileSHA256=wrong)
            await kube.create(MODELCACHES, doc, namespace)
            mc = await wait_cache(kube, namespace, "bad", "Failed")
            degraded = condition(mc, "Degraded")
            assert (degraded["status"], degraded["reason"]) == ("True", "IntegrityCheckFailed"), degraded
            assert "model.safetensors" in degraded["message"]
            assert condition(mc, "Ready")["status"] == "False"
            staged = kubelet.volume_path(PV_PATH) / model_dir("hf://acme/bad")
            assert not (staged / "model.safetensors").exists()
            assert not (staged / MARKER_NAME).exists()

            ms = await wait_ms_condition(kube, namespace, "srv", "ModelCached", "False", "ModelCacheFailed")
            assert "IntegrityCheckFailed" in condition(ms, "ModelCached")["message"]
            assert await live_pods(kube, namespace, "srv") == {}

            async def warned() -> list[KubeObject]:
                return [
                    e
                    for e in await events_of(kube, namespace, "srv")
                    if e["type"] == "Warning" and e["reason"] == "ModelCacheFailed"
                ]

            await eventually(warned, timeout=60, description="Warning ModelCacheFailed on srv")
            cache_events = await events_of(kube, namespace, "bad")
            assert any(e["type"] == "Warning" and e["reason"] == "IntegrityCheckFailed" for e in cache_events)
            assert await live_pods(kube, namespace, "srv") == {}

            await kube.patch(MODELCACHES, "bad", {"spec": {"fileSHA256": digests}}, namespace)
            mc = await wait_cache(kube, namespace, "bad", "Ready")
            assert condition(mc, "Degraded")["status"] == "False"
            assert {f["name"]: f["sha256"] for f in mc["status"]["files"]} == digests
            assert (staged / MARKER_NAME).is_file()
            # the failed attempts of the wrong spec are gone; only the fixed spec's Job is left
            await eventually(
                lambda: _only_current(kube, namespace, "bad", mc["status"]["fingerprint"]),
                timeout=60,
                description="only the fixed spec's Jobs left",
            )
            await wait_ms_condition(kube, namespace, "srv", "ModelCached", "True", "ModelCacheReady")
            found = await eventually(lambda: live_pods(kube, namespace, "srv"), timeout=90, description="pods of srv")
    for pod in found.values():
        assert_gated_pod_spec(pod, "bad", model_dir("hf://acme/bad"))


async def _only_current(kube: KubeClient, namespace: str, cache: str, fp: str) -> list[KubeObject]:
    jobs = [j for j in await download_jobs(kube, namespace, cache) if not j["metadata"].get("deletionTimestamp")]
    current = all(j["metadata"]["labels"][MODEL_CACHE_FINGERPRINT] == fp for j in jobs)
    return jobs if jobs and current else []


# --- 4. node-local: affinity to exactly the ready nodes ---------------------------------------------------------


NODE_PATH = "/var/lib/kthena-models"


async def test_a_node_local_cache_lists_only_its_ready_nodes_and_pods_get_affinity_to_them(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
) -> None:
    pool = {"e2e.kthena-py.io/pool": namespace}
    good = make_mini_kubelet(runner=RUNNER, labels=pool)
    broken = make_mini_kubelet(runner=RUNNER, labels=pool)
    make_mini_kubelet(runner=RUNNER)  # a third mini-kubelet node the selector does not name
    directory = model_dir("hf://acme/local")
    # On the broken node the model's directory is taken by a file: its download fails there.
    broken.host_path(NODE_PATH).mkdir(parents=True)
    (broken.host_path(NODE_PATH) / directory).write_bytes(b"not a directory")
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/local"))
        await hub_secret(kube, namespace, server)
        storage = {"nodeLocal": {"path": NODE_PATH, "nodeSelector": pool}}
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log"):
            await kube.create(MODELSERVINGS, gated_modelserving("srv", "local"), namespace)
            await kube.create(MODELCACHES, modelcache("local", repo, storage, placement=placement()), namespace)

            async def settled() -> KubeObject | None:
                mc = await kube.get(MODELCACHES, "local", namespace)
                degraded = condition(mc, "Degraded")
                st = mc.get("status") or {}
                done = st.get("phase") == "Ready" and degraded.get("status") == "True"
                return mc if done and st.get("observedGeneration") == mc["metadata"]["generation"] else None

            mc = await eventually(settled, timeout=180, interval=0.25, description="local Ready and Degraded")
            assert mc["status"]["nodes"] == [good.node.name]
            degraded = condition(mc, "Degraded")
            assert degraded["reason"] == "DownloadFailed" and broken.node.name in degraded["message"], degraded
            assert (good.host_path(NODE_PATH) / directory / MARKER_NAME).is_file()
            jobs = {j["metadata"]["labels"][MODEL_CACHE_NODE] for j in await download_jobs(kube, namespace, "local")}
            assert jobs == {good.node.name, broken.node.name}

            await wait_ms_condition(kube, namespace, "srv", "ModelCached", "True", "ModelCacheReady")
            found = await eventually(lambda: live_pods(kube, namespace, "srv"), timeout=90, description="pods of srv")
    for pod in found.values():
        assert_gated_pod_spec(pod, "local", directory)
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == MODEL_CACHE_VOLUME)
        assert volume["hostPath"] == {"path": NODE_PATH, "type": "Directory"}
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [good.node.name]}]}
        ]


# --- 5. deleting a cache whose storage is gone, or whose cleanup cannot run -----------------------------------------


async def test_deleting_caches_whose_storage_is_gone_or_unreachable_removes_the_finalizer_within_the_bound(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    """Three caches, one manager (cleanup bound 15 s):

    * ``gone-claim``: its claim is deleted before the cache;
    * ``gone-node``: node-local, its one node is removed;
    * ``stranded``: its claim stays, but no node can run the cleanup Job any more (the bound itself).
    """
    pool = {"e2e.kthena-py.io/pool": namespace}
    on_claim = make_mini_kubelet(runner=RUNNER)
    on_node = make_mini_kubelet(runner=RUNNER, labels=pool)
    await bound_claim(kube, namespace, make_hostpath_volume)
    await bound_claim(kube, namespace, make_hostpath_volume, "doomed", "/exports/doomed")
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/gone"))
        await hub_secret(kube, namespace, server)
        directory = model_dir("hf://acme/gone")
        docs = {
            "gone-claim": modelcache(
                "gone-claim",
                repo,
                {"persistentVolumeClaim": {"claimName": "doomed"}},
                placement=placement([on_claim.node.name]),
            ),
            "gone-node": modelcache(
                "gone-node", repo, {"nodeLocal": {"path": NODE_PATH, "nodeSelector": pool}}, placement=placement()
            ),
            "stranded": modelcache("stranded", repo, CLAIM_STORAGE, placement=placement([on_claim.node.name])),
        }
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log", cleanup_timeout=15):
            for doc in docs.values():
                await kube.create(MODELCACHES, doc, namespace)
            for name in docs:
                await wait_cache(kube, namespace, name, "Ready")
            assert (on_node.host_path(NODE_PATH) / directory / MARKER_NAME).is_file()

            # The claim goes (it stays Terminating while the finished download pod still names it: going is gone).
            await kube.delete(PERSISTENT_VOLUME_CLAIMS, "doomed", namespace)
            # Both nodes go: the node-local cache has no node left, the other claim no node to clean it from.
            await asyncio.to_thread(on_node.stop)
            await asyncio.to_thread(on_claim.stop)
            for name in docs:
                await kube.delete(MODELCACHES, name, namespace)

            async def all_gone() -> bool:
                left = {m["metadata"]["name"] for m in (await kube.list(MODELCACHES, namespace)).items}
                return not left

            await eventually(all_gone, timeout=120, interval=0.5, description="every finalizer removed")
            abandoned: dict[str, str] = {}
            for name in docs:

                async def warned(name: str = name) -> list[KubeObject]:
                    events = await events_of(kube, namespace, name)
                    return [e for e in events if e["reason"] == "CleanupAbandoned"]

                events = await eventually(warned, timeout=30, description=f"CleanupAbandoned of {name}")
                assert [e["type"] for e in events] == ["Warning"], events
                abandoned[name] = events[0]["message"]
    assert "persistentVolumeClaim doomed is gone" in abandoned["gone-claim"], abandoned
    assert f"pvc://doomed/{directory}" in abandoned["gone-claim"], abandoned
    assert "no node is left" in abandoned["gone-node"], abandoned
    assert f"{NODE_PATH}/{directory} on node(s) {on_node.node.name}" in abandoned["gone-node"], abandoned
    assert "cleanup did not finish within 0m15s" in abandoned["stranded"], abandoned
    assert f"pvc://{CLAIM}/{directory}" in abandoned["stranded"], abandoned
    # the stranded files are still there: nothing claimed they were removed
    assert (on_claim.volume_path(PV_PATH) / directory / MARKER_NAME).is_file()


# --- 6. kill -9 of the manager mid-download -------------------------------------------------------------------------


async def test_a_manager_killed_mid_download_resumes_with_the_same_single_job(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/killed"))
        throttle(server, repo, "model.safetensors", 64 * 1024)  # 512 KiB: several seconds of download
        await hub_secret(kube, namespace, server)
        doc = modelcache("killed", repo, CLAIM_STORAGE, placement=placement([kubelet.node.name]))
        async with (
            recording(kube, JOBS, namespace, label_selector=f"{MODEL_CACHE_NAME}=killed") as jobs_seen,
            running_manager(kubeconfig, namespace, tmp_path / "manager.log") as manager,
        ):
            await kube.create(MODELCACHES, doc, namespace)
            await wait_cache(kube, namespace, "killed", "Downloading")
            await manager.kill()
            assert not (kubelet.volume_path(PV_PATH) / model_dir("hf://acme/killed") / MARKER_NAME).exists()
            await manager.start()
            mc = await wait_cache(kube, namespace, "killed", "Ready")
    names = {j["metadata"]["name"] for j in jobs_seen}
    assert names == {mc["status"]["jobName"]}, names
    assert [j["metadata"]["name"] for j in await download_jobs(kube, namespace, "killed")] == list(names)
    pods = (await kube.list(PODS, namespace, label_selector=f"{MODEL_CACHE_NAME}=killed")).items
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]  # the one pod ran once, through the restart
    job = jobs_seen[-1]
    assert job["metadata"]["labels"][MODEL_CACHE_ATTEMPT] == "0"
    assert job["metadata"]["labels"][MODEL_CACHE_JOB_KIND] == "download"
    assert {f["name"]: f["sha256"] for f in mc["status"]["files"]} == served_digests(repo)
    # one GET of the weights: the download ran once, in the Job's one pod
    weights = [n for (m, path), n in server.counts.items() if m == "GET" and path.endswith("/model.safetensors")]
    assert weights == [1], server.counts
