"""Helpers for the ModelCache end-to-end tests of the cluster tier: the manager as a process, manifests, waits.

The manager runs as its own process (``python -m kthena_py manager``) so that a test can kill it with SIGKILL; its
output goes to a log file of the test's temporary directory. Download Jobs name :data:`DOWNLOADER_IMAGE`, which the
tests' mini-kubelets map to this interpreter's ``kthena-py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from kthena_py.api.modelcache import MODEL_CACHE_API_VERSION
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, JOBS, SECRETS
from kthena_py.testing.artifacts import Artifact, ArtifactServer, HubRepo
from kthena_py.testing.kubelet import MINI_KUBELET_LABEL, MINI_KUBELET_TAINT, CommandMapper
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import MODEL_CACHE, MODEL_CACHE_NAME

from .msutil import modelserving, role

DOWNLOADER_IMAGE = "registry.test/kthena-py-downloader:e2e"
"""The image the manager names for download Jobs (``--modelcache-downloader-image``)."""

RUNNER = CommandMapper(images={DOWNLOADER_IMAGE: ["kthena-py"]})
"""The mini-kubelets' mapper: the Jobs' command ``kthena-py`` (and the downloader image's entrypoint, for a
container that names none) runs this interpreter's ``-m kthena_py``."""

HUB_SECRET = "hub"
"""The Secret carrying ``HF_ENDPOINT`` to the download Jobs (``sourceSecretRef``)."""


class ManagerProcess:
    """The manager as a child process; :meth:`kill` sends SIGKILL, :meth:`start` starts a fresh one."""

    def __init__(
        self, kubeconfig: Path, namespace: str, log: Path, cleanup_timeout: float, extra_args: Sequence[str] = ()
    ) -> None:
        self.kubeconfig, self.namespace, self.log = kubeconfig, namespace, log
        self.cleanup_timeout = cleanup_timeout
        self.extra_args = tuple(extra_args)
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "kthena_py",
                "manager",
                "--kubeconfig",
                str(self.kubeconfig),
                "--namespace",
                self.namespace,
                "--health-probe-bind-address",
                "0",
                "--metrics-bind-address",
                "0",
                "--webhook-port",
                "0",
                "--modelcache-downloader-image",
                DOWNLOADER_IMAGE,
                "--modelcache-cleanup-timeout",
                str(self.cleanup_timeout),
                *self.extra_args,
                stdout=out,
                stderr=out,
            )

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()


@contextlib.asynccontextmanager
async def running_manager(
    kubeconfig: Path, namespace: str, log: Path, cleanup_timeout: float = 300.0, extra_args: Sequence[str] = ()
) -> AsyncIterator[ManagerProcess]:
    """A manager process scoped to ``namespace`` until the block ends (then killed); ``extra_args`` are more flags."""
    manager = ManagerProcess(kubeconfig, namespace, log, cleanup_timeout, extra_args)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.kill()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def three_file_repo(repo_id: str) -> HubRepo:
    """A hub repository of three files, one of them LFS (the weights)."""
    return HubRepo(
        repo_id,
        {
            "config.json": b'{"architectures": ["TinyForCausalLM"], "hidden_size": 64}\n',
            "tokenizer.json": bytes(range(256)) * 64,
            "model.safetensors": hashlib.sha512(repo_id.encode()).digest() * 8192,
        },
        lfs={"model.safetensors"},
    )


def throttle(server: ArtifactServer, repo: HubRepo, name: str, bytes_per_second: int) -> None:
    """Serve ``name`` of ``repo`` (an LFS file) at ``bytes_per_second``, same content and ETag."""
    content = repo.files[name]
    assert isinstance(content, bytes) and name in repo.lfs
    artifact = Artifact(content, etag=f'"{repo.lfs_sha256(name)}"', throttle=bytes_per_second)
    server.add(f"/{repo.repo_id}/resolve/{name}", artifact)


async def hub_secret(kube: KubeClient, namespace: str, server: ArtifactServer) -> None:
    await kube.create(
        SECRETS,
        {"metadata": {"name": HUB_SECRET}, "stringData": {"HF_ENDPOINT": server.url}},
        namespace,
    )


def placement(node_names: list[str] | None = None) -> dict[str, Any]:
    """Download placement on the mini-kubelet nodes (toleration of their taint; optionally a nodeSelector)."""
    toleration = {"key": MINI_KUBELET_TAINT["key"], "operator": "Equal", "value": MINI_KUBELET_TAINT["value"]}
    result: dict[str, Any] = {"tolerations": [{**toleration, "effect": MINI_KUBELET_TAINT["effect"]}]}
    if node_names and len(node_names) == 1:
        result["nodeSelector"] = {MINI_KUBELET_LABEL: node_names[0]}
    return result


def modelcache(name: str, repo: HubRepo, storage: dict[str, Any], **spec: Any) -> KubeObject:
    return {
        "apiVersion": MODEL_CACHE_API_VERSION,
        "kind": "ModelCache",
        "metadata": {"name": name},
        "spec": {"source": f"hf://{repo.repo_id}", "sourceSecretRef": {"name": HUB_SECRET}, "storage": storage, **spec},
    }


def gated_modelserving(name: str, cache: str) -> KubeObject:
    doc = modelserving(name, replicas=1, roles=[role("engine")])
    doc["metadata"]["annotations"] = {MODEL_CACHE: cache}
    return doc


def condition(obj: KubeObject, type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            found: dict[str, Any] = c
            return found
    return {}


async def wait_cache(kube: KubeClient, namespace: str, name: str, phase: str, timeout: float = 150) -> KubeObject:
    """The cache once its status is ``phase`` for its current generation."""

    async def check() -> KubeObject | None:
        mc = await kube.get(MODELCACHES, name, namespace)
        st = mc.get("status") or {}
        current = st.get("phase") == phase and st.get("observedGeneration") == mc["metadata"]["generation"]
        return mc if current else None

    found: KubeObject = await eventually(check, timeout=timeout, interval=0.25, description=f"{name} {phase}")
    return found


async def wait_ms_condition(
    kube: KubeClient, namespace: str, name: str, type_: str, status: str, reason: str, timeout: float = 90
) -> KubeObject:
    async def check() -> KubeObject | None:
        ms = await kube.get(MODELSERVINGS, name, namespace)
        c = condition(ms, type_)
        return ms if (c.get("status"), c.get("reason")) == (status, reason) else None

    found: KubeObject = await eventually(
        check, timeout=timeout, interval=0.25, description=f"{name} {type_}={status} {reason}"
    )
    return found


async def events_of(kube: KubeClient, namespace: str, name: str) -> list[KubeObject]:
    return list((await kube.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")).items)


async def download_jobs(kube: KubeClient, namespace: str, cache: str) -> list[KubeObject]:
    return list((await kube.list(JOBS, namespace, label_selector=f"{MODEL_CACHE_NAME}={cache}")).items)
