"""ModelCache revalidation end to end in the cluster tier: SourceDrifted under IfNotPresent, re-staging under OnChange.

The manager runs as a process; download Jobs run ``kthena-py download`` on a mini-kubelet node; the source is the
loopback artifact server (a plain file whose ETag the test changes, or the fake hub whose commit it moves). Every
cache revalidates every 2 s. Serving pods of the gated ModelServing are only checked by their spec and, at the
moment each one appears, by the directory it mounts on the claim's volume: it must already hold the downloader's
completion marker (no pod ever mounts a half-written copy). Every wait is bounded; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.modelcache import MODEL_CACHE_API_VERSION, MODEL_CACHE_VOLUME, model_dir
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.download.marker import MARKER_NAME
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.testing.artifacts import Artifact, ArtifactServer, HubRepo
from kthena_py.testing.kubelet import MiniKubelet
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import MODEL_CACHE_CONTENT

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
    three_file_repo,
    wait_cache,
)
from .msutil import NAME_LABEL, live_pods
from .test_modelcache import CLAIM, CLAIM_STORAGE, PV_PATH, bound_claim

pytestmark = pytest.mark.cluster

INTERVAL = "2s"


async def wait_drift(kube: KubeClient, namespace: str, name: str, status: str, reason: str) -> KubeObject:
    async def check() -> KubeObject | None:
        mc = await kube.get(MODELCACHES, name, namespace)
        c = condition(mc, "SourceDrifted")
        return mc if (c.get("status"), c.get("reason")) == (status, reason) else None

    found: KubeObject = await eventually(
        check, timeout=120, interval=0.25, description=f"{name} SourceDrifted={status} {reason}"
    )
    return found


# --- IfNotPresent: a changed ETag is reported; the cache keeps serving, nothing is re-fetched ------------------------


async def test_if_not_present_reports_a_changed_etag_and_keeps_serving(
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
        artifact = server.add("/models/tiny.gguf", Artifact(b"GGUF" + bytes(range(256)) * 40, etag='"v1"'))
        source = f"{server.url}/models/tiny.gguf"
        doc: dict[str, Any] = {
            "apiVersion": MODEL_CACHE_API_VERSION,
            "kind": "ModelCache",
            "metadata": {"name": "tiny"},
            "spec": {
                "source": source,
                "storage": CLAIM_STORAGE,
                "placement": placement([kubelet.node.name]),
                "revalidationInterval": INTERVAL,
            },
        }
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log"):
            await kube.create(MODELCACHES, doc, namespace)
            mc = await wait_cache(kube, namespace, "tiny", "Ready")
            assert mc["status"]["sourceETag"] == '"v1"' and mc["status"]["sourceContentLength"] == artifact.size
            mc = await wait_drift(kube, namespace, "tiny", "False", "SourceUnchanged")
            assert mc["status"]["upstream"] == {"etag": '"v1"', "contentLength": artifact.size}
            assert mc["status"]["lastRevalidated"]
            gets_before = server.total_requests("GET")

            artifact.etag, artifact.content = '"v2"', b"GGUF" + bytes(range(255, -1, -1)) * 41
            mc = await wait_drift(kube, namespace, "tiny", "True", "SourceChanged")
            drift = condition(mc, "SourceDrifted")
            assert '"v1"' in drift["message"] and '"v2"' in drift["message"], drift
            assert mc["status"]["upstream"] == {"etag": '"v2"', "contentLength": len(artifact.content)}
            assert mc["status"]["phase"] == "Ready" and condition(mc, "Ready")["status"] == "True"
            assert mc["status"]["sourceETag"] == '"v1"'  # what is staged and served did not change
            await asyncio.sleep(5)  # two more revalidations: still no Job, no download
            assert len(await download_jobs(kube, namespace, "tiny")) == 1
            assert server.total_requests("GET") == gets_before
            warnings = [e for e in await events_of(kube, namespace, "tiny") if e["reason"] == "SourceChanged"]
            assert len(warnings) == 1 and warnings[0]["type"] == "Warning"  # once per transition
    staged = kubelet.volume_path(PV_PATH) / model_dir(source)
    assert (staged / "tiny.gguf").read_bytes() == b"GGUF" + bytes(range(256)) * 40


# --- OnChange: the new commit is staged beside the served copy; the gated ModelServing rolls onto it ---------------


@contextlib.asynccontextmanager
async def mounts_seen(
    kube: KubeClient, namespace: str, ms: str, volume: Path
) -> AsyncIterator[list[tuple[str, str, bool]]]:
    """``(pod, subPath, marker present)`` for each new pod of ``ms``, checked as soon as the watch shows it."""
    seen: list[tuple[str, str, bool]] = []
    uids: set[str] = set()
    opened = asyncio.Event()

    async def run() -> None:
        async for event in kube.watch(PODS, namespace, on_open=opened.set, label_selector=f"{NAME_LABEL}={ms}"):
            if event.type != "ADDED":
                continue
            pod = event.object
            name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            if uid in uids:  # a replacement pod may have the same name: one entry per pod (uid)
                continue
            uids.add(uid)
            for container in pod["spec"]["containers"]:
                for mount in container.get("volumeMounts") or []:
                    if mount["name"] == MODEL_CACHE_VOLUME:
                        sub = mount["subPath"]
                        seen.append((name, sub, (volume / sub / MARKER_NAME).is_file()))

    task = asyncio.create_task(run())
    await eventually(lambda: opened.is_set() or task.done(), timeout=30, description="pod watch open")
    try:
        yield seen
    finally:
        failed = task.done() and not task.cancelled() and task.exception() is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    assert not failed, f"the pod watch ended early: {task.exception()!r}"  # it saw every pod


def move_commit(repo: HubRepo) -> HubRepo:
    """The same repository one commit later, with new weights."""
    weights = repo.files["model.safetensors"]
    assert isinstance(weights, bytes)
    repo.files = {**repo.files, "model.safetensors": weights[::-1] + b"v2"}
    repo.commit = "fedcba9876543210fedcba9876543210fedcba98"
    return repo


async def test_on_change_stages_the_new_commit_beside_the_old_and_rolls_the_modelserving_onto_it(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    volume = kubelet.volume_path(PV_PATH)
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/moving"))
        first_commit = repo.commit
        await hub_secret(kube, namespace, server)
        doc = modelcache(
            "moving",
            repo,
            CLAIM_STORAGE,
            placement=placement([kubelet.node.name]),
            refreshPolicy="OnChange",
            revalidationInterval=INTERVAL,
        )
        first = model_dir("hf://acme/moving")
        async with (
            running_manager(kubeconfig, namespace, tmp_path / "manager.log"),
            mounts_seen(kube, namespace, "srv", volume) as seen,
        ):
            await kube.create(MODELCACHES, doc, namespace)
            mc = await wait_cache(kube, namespace, "moving", "Ready")
            assert mc["status"]["sourceETag"] == first_commit
            await kube.create(MODELSERVINGS, gated_modelserving("srv", "moving"), namespace)
            await eventually(lambda: live_pods(kube, namespace, "srv"), timeout=90, description="pods of srv")
            await wait_drift(kube, namespace, "moving", "False", "SourceUnchanged")

            move_commit(repo)

            async def switched() -> KubeObject | None:
                mc = await kube.get(MODELCACHES, "moving", namespace)
                return mc if (mc.get("status") or {}).get("sourceETag") == repo.commit else None

            mc = await eventually(switched, timeout=150, interval=0.25, description="the new commit served")
            served = mc["status"]["servedDirectory"]["directory"]
            assert served.startswith(first + "-") and mc["status"]["path"] == f"pvc://{CLAIM}/{served}"
            assert mc["status"]["phase"] == "Ready"
            assert mc["status"]["revision"] == repo.commit

            async def rolled() -> bool:
                pods = await live_pods(kube, namespace, "srv")
                subs = {
                    m["subPath"]
                    for p in pods.values()
                    for c in p["spec"]["containers"]
                    for m in c.get("volumeMounts") or []
                    if m["name"] == MODEL_CACHE_VOLUME
                }
                return bool(pods) and subs == {served}

            await eventually(rolled, timeout=150, interval=0.5, description="srv rolled onto the re-staged copy")
            await wait_drift(kube, namespace, "moving", "False", "SourceUnchanged")
            jobs = await download_jobs(kube, namespace, "moving")
            restaged = [j for j in jobs if j["metadata"]["labels"].get(MODEL_CACHE_CONTENT)]
            assert restaged and all(j["metadata"]["labels"][MODEL_CACHE_CONTENT] == served[-8:] for j in restaged)
            args = restaged[0]["spec"]["template"]["spec"]["containers"][0]["args"]
            assert args[args.index("--revision") + 1] == repo.commit  # the new download pinned the new commit
            reasons = [e["reason"] for e in await events_of(kube, namespace, "moving")]
            assert "Restaging" in reasons

            # Once srv rolled onto the new copy, the first one is retired: its directory removed from the storage,
            # then its Jobs (download and cleanup) deleted; only the served copy's Jobs are left.
            token = served[len(first) + 1 :]

            async def retired() -> bool:
                left = {
                    j["metadata"]["labels"].get(MODEL_CACHE_CONTENT, "")
                    for j in await download_jobs(kube, namespace, "moving")
                }
                return not (volume / first).exists() and left == {token}

            await eventually(retired, timeout=150, interval=0.5, description="the first copy retired")

            async def retired_event() -> bool:
                return "Retired" in [e["reason"] for e in await events_of(kube, namespace, "moving")]

            await eventually(retired_event, timeout=30, interval=0.5, description="the Retired Event")
            mc = await kube.get(MODELCACHES, "moving", namespace)
            assert mc["status"]["servedDirectory"]["directory"] == served and mc["status"]["phase"] == "Ready"

    # No pod ever mounted a directory that did not hold a complete, verified copy at the moment it appeared.
    assert {sub for _, sub, _ in seen} == {first, served}, seen
    assert all(complete for _, _, complete in seen), seen
    assert (volume / served / "model.safetensors").read_bytes() == repo.files["model.safetensors"]
    assert (volume / served / MARKER_NAME).is_file()  # the served copy is untouched by the retirement
    assert not (volume / first).exists()
