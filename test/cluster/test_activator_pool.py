"""The activator in front of a ModelPool on the cluster tier: held requests for a non-resident member, demand,
the swap budget, and a manager killed with SIGKILL mid-swap.

One kwok node with one GPU, labelled for the pool; members ``model-a`` (default, resident) and ``model-b`` need one
GPU each and select that node. The manager (ModelServing and ModelPool controllers) runs as its own process so it
can be killed; the activator runs in-process on 127.0.0.1; the engines are fake apps on the pod IPs
(test/cluster/engineutil.py) whose ``/metrics`` page shows a settable number of running requests per member (the
pool controller's idle check) and whose ``/v1/completions`` records which pod answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kthena_py.activator.resources import MODELPOOLS
from kthena_py.api.crdgen import build_crds
from kthena_py.api.modelpool import CONDITION_SWAP_DEFERRED, PHASE_READY, PHASE_SWAPPING, REASON_PODS_BUSY
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelpool.demand import DEMAND_LIVE_SECONDS, demand_of
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.cluster import FakeNode
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER, ACTIVATOR_PORT, MODELPOOL_DEMAND_PREFIX, SERVING_NAME

from .engineutil import ENGINE_PORT, EngineFarm
from .mcutil import ManagerProcess
from .msutil import container, modelserving
from .test_activator import activator

pytestmark = pytest.mark.cluster

A, B = "model-a", "model-b"
SLOT_LABEL = "kthena-py-test-slot"


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


@pytest.fixture
def slot(cluster: ClusterTier) -> Iterator[str]:
    """A node with one GPU, labelled for this test's pool; removed afterwards."""
    value = uuid.uuid4().hex[:8]
    node = cluster.add_node(FakeNode(f"slot-{value}", gpus=1, labels={SLOT_LABEL: value}))
    yield value
    cluster.client.delete(f"/api/v1/nodes/{node.name}")


def member(name: str, slot: str, replicas: int) -> dict[str, Any]:
    engine = container(gpu=1) | {"ports": [{"containerPort": ENGINE_PORT}]}
    entry = {"spec": {"containers": [engine], "nodeSelector": {SLOT_LABEL: slot}}}
    ms = modelserving(
        name, replicas=replicas, roles=[{"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": entry}]
    )
    ms["metadata"]["annotations"] = {ACTIVATOR_PORT: str(ENGINE_PORT)}
    return ms


def pool(budget: str) -> dict[str, Any]:
    return {
        "apiVersion": MODELPOOLS.api_version,
        "kind": MODELPOOLS.kind,
        "metadata": {"name": "pool"},
        "spec": {
            "members": [{"modelServingRef": {"name": A}}, {"modelServingRef": {"name": B}}],
            "default": A,
            "gpu": 1,
            "swapBudget": budget,
        },
    }


@dataclass
class Engines:
    """Per-member running requests for ``/metrics``; the pods that answered ``/v1/completions``."""

    running: dict[str, float] = field(default_factory=lambda: {A: 0.0, B: 0.0})
    served: list[str] = field(default_factory=list)
    farm: EngineFarm | None = None

    def pod_of(self, request: web.Request) -> str:
        assert self.farm is not None and request.transport is not None
        ip = request.transport.get_extra_info("sockname")[0]
        return self.farm.pod_of_ip.get(ip, ip)

    async def _metrics(self, request: web.Request) -> web.Response:
        pod = self.pod_of(request)
        running = next((n for m, n in self.running.items() if pod.startswith(m + "-")), 0.0)
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="m"}} {running}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{model_name="m"} 0\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def _completion(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.served.append(self.pod_of(request))
        return web.json_response({"object": "text_completion", "model": body.get("model"), "choices": []})

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/v1/completions", self._completion)


@contextlib.asynccontextmanager
async def scene(
    kube: KubeClient, kubeconfig: Path, namespace: str, slot: str, tmp_path: Path, budget: str
) -> AsyncIterator[tuple[ManagerProcess, Engines, str, aiohttp.ClientSession]]:
    """Members A (resident) and B (at 0) in a pool; the manager process, the engines and the activator running."""
    await kube.create(MODELSERVINGS, member(A, slot, 1), namespace)
    await kube.create(MODELSERVINGS, member(B, slot, 0), namespace)
    await kube.create(MODELPOOLS, pool(budget), namespace)
    engines = Engines()
    manager = ManagerProcess(kubeconfig, namespace, tmp_path / "manager.log", cleanup_timeout=300.0)
    await manager.start()
    try:
        async with (
            EngineFarm(kube, namespace, routes=engines.routes) as farm,
            activator(kubeconfig, namespace) as act,
            aiohttp.ClientSession() as http,
        ):
            engines.farm = farm
            await eventually(
                lambda: _pool_is(kube, namespace, phase=PHASE_READY, resident=A), timeout=90, description="A resident"
            )
            await eventually(lambda: act.catalog.directory().resolve(B) is not None or None, timeout=30)
            assert act.catalog.directory().resolve(B).pool is not None  # type: ignore[union-attr]
            yield manager, engines, f"http://127.0.0.1:{act.port}/v1/completions", http
    finally:
        await manager.kill()


async def _pool(kube: KubeClient, namespace: str) -> dict[str, Any]:
    return dict(await kube.get(MODELPOOLS, "pool", namespace))


async def _pool_is(kube: KubeClient, namespace: str, *, phase: str, resident: str) -> dict[str, Any] | None:
    obj = await _pool(kube, namespace)
    status = obj.get("status") or {}
    return obj if status.get("phase") == phase and status.get("residentMember") == resident else None


async def _deferred_busy(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    for c in ((await _pool(kube, namespace)).get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == CONDITION_SWAP_DEFERRED
            and c.get("status") == "True"
            and c.get("reason") == REASON_PODS_BUSY
        ):
            return dict(c)
    return None


async def _demand(kube: KubeClient, namespace: str) -> float | None:
    return demand_of(await _pool(kube, namespace)).get(B)


async def _replicas(kube: KubeClient, namespace: str, name: str) -> int:
    return int((await kube.get(MODELSERVINGS, name, namespace))["spec"]["replicas"])


def _activator_scaled(ms: dict[str, Any]) -> bool:
    return any(
        f.get("manager") == ACTIVATOR_FIELD_MANAGER and f.get("subresource") == "scale"
        for f in ms["metadata"].get("managedFields") or []
    )


class PodMonitor:
    """Watches the namespace's pods from a listed resourceVersion: records whether A's and B's ever coexisted."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.live: dict[str, str] = {}
        self.overlaps: list[tuple[str, ...]] = []
        self._task: asyncio.Task[None] | None = None

    def _check(self) -> None:
        members = set(self.live.values())
        if A in members and B in members:
            self.overlaps.append(tuple(sorted(self.live)))

    async def _run(self, rv: str) -> None:
        while True:
            async for event in self.kube.watch(PODS, self.namespace, resource_version=rv):
                obj = event.object
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                name = str((obj.get("metadata") or {}).get("name") or "")
                owner = ((obj.get("metadata") or {}).get("labels") or {}).get(SERVING_NAME)
                if event.type == "DELETED":
                    self.live.pop(name, None)
                elif event.type in ("ADDED", "MODIFIED") and owner:
                    self.live[name] = owner
                self._check()

    async def __aenter__(self) -> PodMonitor:
        listed = await self.kube.list(PODS, self.namespace)
        for pod in listed.items:
            owner = (pod["metadata"].get("labels") or {}).get(SERVING_NAME)
            if owner:
                self.live[pod["metadata"]["name"]] = owner
        self._check()
        self._task = asyncio.create_task(self._run(listed.resource_version))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def test_a_held_request_for_b_is_answered_after_the_swap(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str, slot: str, tmp_path: Path
) -> None:
    async with (
        scene(kube, kubeconfig, namespace, slot, tmp_path, budget="120s") as (_manager, engines, url, http),
        PodMonitor(kube, namespace) as pods,
    ):
        engines.running[A] = 1  # A is busy: the swap waits, the request is held
        started = time.monotonic()
        call = asyncio.create_task(http.post(url, json={"model": B, "prompt": "hello"}))
        when = await eventually(lambda: _demand(kube, namespace), timeout=10, description="B's demand on the pool")
        assert abs(when - time.time()) < 10
        pool_obj = await _pool(kube, namespace)
        managers = {f.get("manager") for f in pool_obj["metadata"].get("managedFields") or []}
        assert ACTIVATOR_FIELD_MANAGER in managers
        await eventually(lambda: _deferred_busy(kube, namespace), timeout=30, description="SwapDeferred/PodsBusy")
        assert await _replicas(kube, namespace, A) == 1 and await _replicas(kube, namespace, B) == 0
        assert not call.done() and engines.served == []
        engines.running[A] = 0  # A goes idle: A -> 0, A's pods gone, B -> 1, Ready
        answer = await asyncio.wait_for(call, 120)
        held_for = time.monotonic() - started
        assert answer.status == 200, await answer.text()
        assert len(engines.served) == 1 and engines.served[0].startswith(B + "-")
        done = await eventually(
            lambda: _pool_is(kube, namespace, phase=PHASE_READY, resident=B), timeout=30, description="B resident"
        )
        assert await _replicas(kube, namespace, A) == 0
        assert pods.overlaps == []  # never A's and B's pods at once
        for name in (A, B):
            assert not _activator_scaled(dict(await kube.get(MODELSERVINGS, name, namespace)))
        last = done["status"].get("lastSwap") or {}
        assert last.get("from") == A and last.get("to") == B
        print(f"\nheld -> answered {held_for:.2f}s (A idle after the busy check); lastSwap {last}")


async def test_the_swap_budget_spent_while_a_is_busy_is_503_naming_the_pool_state(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str, slot: str, tmp_path: Path
) -> None:
    async with scene(kube, kubeconfig, namespace, slot, tmp_path, budget="6s") as (_manager, engines, url, http):
        engines.running[A] = 3
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with http.post(url, json={"model": B, "prompt": "hello"}) as answer:
            waited = loop.time() - started
            assert answer.status == 503
            assert int(answer.headers["Retry-After"]) > 0
            error = (await answer.json())["error"]
        assert waited >= 6
        message = error["message"]
        assert error["code"] == "model_unavailable"
        assert message.startswith(f"{namespace}/{B} has no Ready backend after 6s: ModelPool {namespace}/pool:"), (
            message
        )
        assert f"phase {PHASE_SWAPPING}" in message and f"resident {A}" in message, message
        assert f"{CONDITION_SWAP_DEFERRED} {REASON_PODS_BUSY}" in message, message
        assert await _replicas(kube, namespace, A) == 1 and await _replicas(kube, namespace, B) == 0
        assert engines.served == []


async def test_a_manager_killed_mid_swap_keeps_the_held_requests_demand(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str, slot: str, tmp_path: Path
) -> None:
    async with scene(kube, kubeconfig, namespace, slot, tmp_path, budget="300s") as (manager, engines, url, http):
        engines.running[A] = 1
        call = asyncio.create_task(http.post(url, json={"model": B, "prompt": "hello"}))
        await eventually(lambda: _deferred_busy(kube, namespace), timeout=30, description="SwapDeferred/PodsBusy")
        first = await _demand(kube, namespace)
        assert first is not None
        await manager.kill()  # SIGKILL while the swap is deferred (Draining)
        # Longer than demand lives without a refresh: only the activator's refreshes keep it live.
        await asyncio.sleep(DEMAND_LIVE_SECONDS + 5)
        latest = await _demand(kube, namespace)
        assert latest is not None and latest - first >= DEMAND_LIVE_SECONDS - 10  # refreshed every 10 s
        assert time.time() - latest <= DEMAND_LIVE_SECONDS  # still live
        assert not call.done()
        engines.running[A] = 0
        await manager.start()
        answer = await asyncio.wait_for(call, 120)
        assert answer.status == 200, await answer.text()
        assert engines.served and engines.served[-1].startswith(B + "-")
        await eventually(
            lambda: _pool_is(kube, namespace, phase=PHASE_READY, resident=B), timeout=30, description="B resident"
        )
        annotations = (await _pool(kube, namespace))["metadata"].get("annotations") or {}
        assert MODELPOOL_DEMAND_PREFIX + B in annotations
