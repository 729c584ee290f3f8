"""Helpers for ModelServing tests in the cluster tier: manifests, an in-process manager, waits."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kthena_py.controllers import register_all
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, PODGROUPS, PODS, SERVICES
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.wait import eventually

NAME_LABEL = "modelserving.volcano.sh/name"


def container(name: str = "engine", image: str = "nginx:1.27", gpu: int = 1) -> dict[str, Any]:
    if gpu == 0:
        return {"name": name, "image": image, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {
        "name": name,
        "image": image,
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpu)},
            "limits": {"nvidia.com/gpu": str(gpu)},
        },
    }


def role(name: str, replicas: int = 1, workers: int = 0, gpu: int = 1) -> dict[str, Any]:
    r: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "workerReplicas": workers,
        "entryTemplate": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container(gpu=gpu)]}},
    }
    if workers:
        r["workerTemplate"] = {"spec": {"containers": [container("worker", gpu=gpu)]}}
    return r


def modelserving(name: str, replicas: int = 1, roles: list[dict[str, Any]] | None = None, **spec: Any) -> KubeObject:
    template: dict[str, Any] = {"roles": roles or [role("prefill"), role("decode", replicas=2, workers=1)]}
    for key in ("restartGracePeriodSeconds", "gangPolicy"):
        if key in spec:
            template[key] = spec.pop(key)
    return {
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "schedulerName": "volcano", "template": template, **spec},
    }


@contextlib.asynccontextmanager
async def running_manager(
    kubeconfig: str, namespace: str, workers: int = 4, client: KubeClient | None = None
) -> AsyncIterator[Manager]:
    """A manager scoped to ``namespace``, running in this event loop until the block ends.

    ``client`` (closed at the end) replaces the one built from ``kubeconfig``.
    """
    client = client or await KubeClient.from_kubeconfig(kubeconfig)
    manager = Manager(
        client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    register_all(manager, workers=workers)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: manager.leading.is_set() or task.done(), timeout=60)
        yield manager
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()


async def start_manager_process(kubeconfig: Path, namespace: str, *flags: str) -> asyncio.subprocess.Process:
    """``kthena-py manager`` as a subprocess (output discarded) watching ``namespace``, with no probe, metrics or
    webhook port (so several may run), and any further ``flags`` (e.g. ``--controllers``); tests kill -9 it."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "manager",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        namespace,
        "--health-probe-bind-address",
        "0",
        "--metrics-bind-address",
        "0",
        "--webhook-port",
        "0",
        *flags,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def pods(kube: KubeClient, namespace: str, ms: str) -> list[KubeObject]:
    return (await kube.list(PODS, namespace, label_selector=f"{NAME_LABEL}={ms}")).items


async def live_pods(kube: KubeClient, namespace: str, ms: str) -> dict[str, KubeObject]:
    return {
        p["metadata"]["name"]: p for p in await pods(kube, namespace, ms) if not p["metadata"].get("deletionTimestamp")
    }


def is_ready(pod: KubeObject) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return (pod.get("status") or {}).get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conds
    )


async def wait_available(
    kube: KubeClient, namespace: str, name: str, replicas: int, timeout: float = 120
) -> KubeObject:
    async def check() -> KubeObject | None:
        ms = await kube.get(MODELSERVINGS, name, namespace)
        st = ms.get("status") or {}
        conds = {c["type"]: c for c in st.get("conditions") or []}
        ok = (
            st.get("availableReplicas") == replicas
            and st.get("replicas") == replicas
            and conds.get("Available", {}).get("status") == "True"
            and st.get("observedGeneration") == ms["metadata"]["generation"]
        )
        return ms if ok else None

    result: KubeObject = await eventually(check, timeout=timeout, description=f"{name} available with {replicas}")
    return result


async def services(kube: KubeClient, namespace: str, ms: str) -> list[str]:
    items = (await kube.list(SERVICES, namespace, label_selector=f"{NAME_LABEL}={ms}")).items
    return sorted(s["metadata"]["name"] for s in items if not s["metadata"].get("deletionTimestamp"))


async def podgroups(kube: KubeClient, namespace: str) -> dict[str, KubeObject]:
    return {p["metadata"]["name"]: p for p in (await kube.list(PODGROUPS, namespace)).items}


async def event_reasons(kube: KubeClient, namespace: str) -> list[str]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelServing")).items
    return [e["reason"] for e in items]
