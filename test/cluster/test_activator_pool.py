"""The activator in front of a ModelPool on the cluster tier: held requests for a non-resident member, demand,
the swap budget, and a manager killed with SIGKILL mid-swap.

One kwok node with one GPU, labelled for the pool; members ``model-a`` (default, resident) and ``model-b`` need one
GPU each and select that node. The manager (ModelServing and ModelPool controllers) runs as its own process so it
can be killed; the activator runs in-process on 127.0.0.1; the engines are the pool tests' fake apps on the pod IPs
(test/cluster/poolutil.py: settable running requests per member on ``/metrics``, the pool controller's idle check)
whose ``/v1/completions`` also records which pod answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Iterator
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
from kthena_py.plan.modelpool.demand import DEMAND_LIVE_SECONDS, demand_of
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.cluster import FakeNode
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER, MODELPOOL_DEMAND_PREFIX

from .poolutil import POOL_LABEL, PodTimeline, PoolEngines, pool_manifest, serving_manifest, start_manager_process
from .test_activator import activator

pytestmark = pytest.mark.cluster

A, B = "model-a", "model-b"


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


@pytest.fixture
def slot(cluster: ClusterTier, namespace: str) -> Iterator[str]:
    """A node with one GPU, labelled for this test's pool; removed afterwards with its pods (kwok stops serving a
    deleted node, so a pod left on it would stay Terminating and keep its GPU in Volcano's books for later tests)."""
    node = cluster.add_node(FakeNode(f"slot-{namespace}"[:60], gpus=1, labels={POOL_LABEL: namespace}))
    try:
        yield namespace
    finally:
        cluster.remove_node(node.name)


class Engines(PoolEngines):
    """The pool's engines (settable request gauges on ``/metrics``), whose ``/v1/completions`` records the pod."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        super().__init__(kube, namespace, (A, B))
        self.served: list[str] = []

    def _routes(self, app: web.Application) -> None:
        super()._routes(app)
        app.router.add_post("/v1/completions", self._completion)

    async def _completion(self, request: web.Request) -> web.Response:
        body = await request.json()
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        self.served.append(self.pod_of_ip.get(sock[0] if sock else "", ""))
        return web.json_response({"object": "text_completion", "model": body.get("model"), "choices": []})


class Manager:
    """``kthena-py manager`` (ModelServing and ModelPool controllers) as a process that can be killed with SIGKILL."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig, self.namespace = kubeconfig, namespace
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await start_manager_process(self.kubeconfig, self.namespace)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()


@contextlib.asynccontextmanager
async def scene(
    kube: KubeClient, kubeconfig: Path, namespace: str, slot: str, budget: str
) -> AsyncIterator[tuple[Manager, Engines, str, aiohttp.ClientSession]]:
    """Members A (resident) and B (at 0) in a pool; the manager process, the engines and the activator running."""
    await kube.create(MODELSERVINGS, serving_manifest(A, slot, replicas=1), namespace)
    await kube.create(MODELSERVINGS, serving_manifest(B, slot, replicas=0), namespace)
    pool = pool_manifest("pool", (A, B), slot=slot, default=A)
    pool["spec"]["swapBudget"] = budget
    await kube.create(MODELPOOLS, pool, namespace)
    manager = Manager(kubeconfig, namespace)
    await manager.start()
    try:
        async with Engines(kube, namespace) as engines, activator(kubeconfig, namespace) as act:
            await eventually(
                lambda: _pool_is(kube, namespace, phase=PHASE_READY, resident=A), timeout=90, description="A resident"
            )
            await eventually(lambda: act.catalog.directory().resolve(B) is not None or None, timeout=30)
            assert act.catalog.directory().resolve(B).pool is not None  # type: ignore[union-attr]
            async with aiohttp.ClientSession() as http:
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


async def test_a_held_request_for_b_is_answered_after_the_swap(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str, slot: str
) -> None:
    async with (
        scene(kube, kubeconfig, namespace, slot, budget="120s") as (_manager, engines, url, http),
        PodTimeline(kube, namespace) as pods,
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
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str, slot: str
) -> None:
    async with scene(kube, kubeconfig, namespace, slot, budget="6s") as (_manager, engines, url, http):
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
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str, slot: str
) -> None:
    async with scene(kube, kubeconfig, namespace, slot, budget="300s") as (manager, engines, url, http):
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
