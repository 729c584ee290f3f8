"""Helpers of the ModelPool cluster tests: manifests, the engines' request gauges, demand, and a pod-overlap watch.

* :class:`PoolEngines`: an :class:`~test.cluster.engineutil.EngineFarm` whose pods also answer ``GET /metrics``
  with ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` set per member (``running``/``waiting``), or
  HTTP 500 for a member in ``broken``.
* :class:`PodTimeline`: watches the namespace's pods from a list's resourceVersion and records, at every event,
  which members have pods (terminating ones included); :attr:`PodTimeline.overlaps` lists every moment two members
  had pods at once (never allowed with one slot).
* :func:`write_demand` / :class:`HeldDemand`: what an activator holding a request writes (the demand annotation,
  refreshed every ``DEMAND_REFRESH_SECONDS``).
* :func:`manager`: the ModelServing and ModelPool controllers in-process; :func:`start_manager_process`: the same
  as a ``kthena-py manager`` subprocess (for kill -9).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from aiohttp import web

from kthena_py.controllers import modelpool, modelserving
from kthena_py.controllers.resources import MODELPOOLS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelpool.demand import DEMAND_REFRESH_SECONDS, demand_annotation, format_demand_time
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import SERVING_NAME

from .engineutil import ENGINE_PORT, EngineFarm
from .msutil import start_manager_process as spawn_manager

POOL_LABEL = "pool.test.kthena-py.io/slot"


def serving_manifest(name: str, slot: str, replicas: int = 0) -> KubeObject:
    """A one-pod ModelServing asking for one GPU on the pool's node, its engine on :data:`ENGINE_PORT`."""
    container = {
        "name": "engine",
        "image": "registry.invalid/engine:1",
        "ports": [{"containerPort": ENGINE_PORT}],
        "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "schedulerName": "volcano",
            "template": {
                "roles": [
                    {
                        "name": "main",
                        "replicas": 1,
                        "workerReplicas": 0,
                        "entryTemplate": {"spec": {"nodeSelector": {POOL_LABEL: slot}, "containers": [container]}},
                    }
                ]
            },
        },
    }


def pool_manifest(
    name: str,
    members: Iterable[str],
    *,
    slot: str,
    default: str | None = None,
    slots: int = 1,
    swap_budget: str | None = None,
) -> KubeObject:
    spec: dict[str, Any] = {
        "members": [{"modelServingRef": {"name": m}} for m in members],
        "slots": slots,
        "gpu": 1,
        "nodeSelector": {POOL_LABEL: slot},
    }
    if default:
        spec["default"] = default
    if swap_budget:
        spec["swapBudget"] = swap_budget
    return {"apiVersion": MODELPOOLS.api_version, "kind": MODELPOOLS.kind, "metadata": {"name": name}, "spec": spec}


async def write_demand(kube: KubeClient, namespace: str, pool: str, member: str, when: float | None = None) -> None:
    """Record a request for ``member`` as an activator does (a merge patch of its one annotation)."""
    stamp = format_demand_time(time.time() if when is None else when)
    body = {"metadata": {"annotations": {demand_annotation(member): stamp}}}
    await kube.patch(MODELPOOLS, pool, body, namespace)


class HeldDemand:
    """A held request for ``member``: its demand written now and refreshed every DEMAND_REFRESH_SECONDS."""

    def __init__(self, kube: KubeClient, namespace: str, pool: str, member: str) -> None:
        self.args = (kube, namespace, pool, member)
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await write_demand(*self.args)
            await asyncio.sleep(DEMAND_REFRESH_SECONDS)

    async def __aenter__(self) -> HeldDemand:
        await write_demand(*self.args)
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class PoolEngines(EngineFarm):
    """Engines whose ``/metrics`` report settable running/waiting requests per member (see the module docstring)."""

    def __init__(self, kube: KubeClient, namespace: str, members: Iterable[str]) -> None:
        super().__init__(kube, namespace, routes=self._routes)
        self.members = sorted(members, key=len, reverse=True)
        self.running: dict[str, float] = {}
        self.waiting: dict[str, float] = {}
        self.broken: set[str] = set()
        self.scrapes: dict[str, int] = {}

    def _routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._metrics)

    def member_of(self, request: web.Request) -> str:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        pod = self.pod_of_ip.get(sock[0] if sock else "", "")
        return next((m for m in self.members if pod.startswith(f"{m}-")), "")

    async def _metrics(self, request: web.Request) -> web.Response:
        member = self.member_of(request)
        self.scrapes[member] = self.scrapes.get(member, 0) + 1
        if member in self.broken:
            return web.Response(status=500, text="engine metrics unavailable")
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="{member}"}} {self.running.get(member, 0.0)}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{model_name="{member}"}} {self.waiting.get(member, 0.0)}\n'
        )
        return web.Response(text=text, content_type="text/plain")


class PodTimeline:
    """Records which members have pods at every pod event of a namespace (see the module docstring).

    ``overlaps`` gets an entry whenever more than ``slots`` members have pods at once.
    """

    def __init__(self, kube: KubeClient, namespace: str, slots: int = 1) -> None:
        self.kube = kube
        self.namespace = namespace
        self.slots = slots
        self.pods: dict[str, str] = {}
        self.history: list[tuple[float, frozenset[str]]] = []
        self.overlaps: list[tuple[float, dict[str, str]]] = []
        self.events = 0
        self._task: asyncio.Task[None] | None = None

    def members_up(self) -> frozenset[str]:
        return frozenset(self.pods.values())

    def _record(self) -> None:
        up = self.members_up()
        if not self.history or self.history[-1][1] != up:
            self.history.append((time.time(), up))
        if len(up) > self.slots:
            self.overlaps.append((time.time(), dict(self.pods)))

    async def _run(self, resource_version: str) -> None:
        async for event in self.kube.watch(PODS, self.namespace, resource_version=resource_version):
            if event.type not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            md = event.object.get("metadata") or {}
            name, member = md.get("name"), (md.get("labels") or {}).get(SERVING_NAME)
            if not name or not member:
                continue
            self.events += 1
            if event.type == "DELETED":
                self.pods.pop(name, None)
            else:
                self.pods[name] = member
            self._record()

    async def __aenter__(self) -> PodTimeline:
        listed = await self.kube.list(PODS, self.namespace)
        for pod in listed.items:
            member = (pod["metadata"].get("labels") or {}).get(SERVING_NAME)
            if member:
                self.pods[pod["metadata"]["name"]] = member
        self._record()
        self._task = asyncio.create_task(self._run(listed.resource_version))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


@contextlib.asynccontextmanager
async def manager(kubeconfig: Path, namespace: str) -> AsyncIterator[Manager]:
    """The ModelServing and ModelPool controllers in-process, scoped to ``namespace``."""
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    mgr = Manager(client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0"))
    modelserving.register(mgr, workers=2)
    modelpool.register(mgr, workers=2)
    stop = asyncio.Event()
    task = asyncio.create_task(mgr.run(stop))
    try:
        await eventually(lambda: mgr.leading.is_set() or task.done(), timeout=60)
        yield mgr
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()


async def start_manager_process(kubeconfig: Path, namespace: str) -> asyncio.subprocess.Process:
    """``kthena-py manager`` with the ModelServing and ModelPool controllers, as a subprocess."""
    return await spawn_manager(kubeconfig, namespace, "--controllers", "modelserving,modelpool")


async def pool_status(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    pool = await kube.get(MODELPOOLS, name, namespace)
    status: dict[str, Any] = pool.get("status") or {}
    return status


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})
