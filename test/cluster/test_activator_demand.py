"""Demand-driven autoscaling through the activator, end to end in the cluster tier.

The activator runs in-process on 127.0.0.1 and exports ``kthena_activator_requests_held`` and
``kthena_activator_requests_in_flight``; Debian's ``prometheus`` binary scrapes it every second; an
AutoscalingPolicy (minReplicas 0) scales the ModelServing on the sum of both through its Prometheus metric source.
The ModelServing controller creates the pods, Volcano schedules them on kwok nodes, kwok makes them Ready with IPs in
127.100.0.0/16, and :class:`Engines` serves ``/v1/completions`` on every Ready entry pod's IP.

What it shows:

* a burst that arrives while the ModelServing is at zero is held, the activator wakes it (0 -> 1), and the held and
  in-flight demand scales it past one replica; the autoscaler does not undo the wake-up while the demand is not yet
  in Prometheus (the wake-up guard of :mod:`kthena_py.plan.autoscaling.wake`): ``spec.replicas`` never returns to 0
  before the burst is answered;
* after a quiet period (one stable window) the policy scales it back to zero;
* a request that arrives as it reaches zero is held, the activator wakes it again, and the request is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kthena_py.activator import Activator, ActivatorOptions
from kthena_py.api.crdgen import build_crds
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import (
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
    ENTRY_VALUE,
    SERVING_ENTRY,
)

from .test_autoscaling import controllers, free_port, ms_manifest, policy_manifest, prometheus_server

pytestmark = pytest.mark.cluster

MODEL = "llm"
BURST = 8
TARGET_PER_REPLICA = 2


def demand_query(namespace: str) -> str:
    """Held plus in-flight requests of the ModelServing, over every activator replica Prometheus scrapes."""
    selector = f'namespace="{namespace}",modelserving="{MODEL}"'
    return f'sum({{__name__=~"kthena_activator_requests_(held|in_flight)",{selector}}}) or vector(0)'


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


class Engines:
    """Serves ``POST /v1/completions`` on the IP of every Running, Ready entry pod of a namespace.

    Each answer waits until ``gate`` is set (so a burst stays in flight as long as the test wants); ``bodies``
    records what every pod received, by IP.
    """

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.port = free_port()
        self.gate = asyncio.Event()
        self.bodies: dict[str, list[dict[str, Any]]] = {}
        self._sites: dict[str, web.TCPSite] = {}
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None

    async def _completions(self, request: web.Request) -> web.Response:
        ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
        body = await request.json()
        self.bodies.setdefault(ip, []).append(body)
        await self.gate.wait()
        return web.json_response({"object": "text_completion", "served_by": ip, "prompt": body.get("prompt")})

    async def sync(self) -> None:
        live: set[str] = set()
        for pod in (await self.kube.list(PODS, self.namespace)).items:
            status, labels = pod.get("status") or {}, pod["metadata"].get("labels") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            ip = status.get("podIP")
            if (
                ip
                and ready
                and labels.get(SERVING_ENTRY) == ENTRY_VALUE
                and not pod["metadata"].get("deletionTimestamp")
            ):
                live.add(ip)
        assert self._runner is not None
        for ip in [ip for ip in self._sites if ip not in live]:
            await self._sites.pop(ip).stop()
        for ip in live - set(self._sites):
            site = web.TCPSite(self._runner, ip, self.port)
            await site.start()
            self._sites[ip] = site

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                await self.sync()
            await asyncio.sleep(0.1)

    async def __aenter__(self) -> Engines:
        app = web.Application()
        app.router.add_post("/v1/completions", self._completions)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.gate.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._runner is not None:
            await self._runner.cleanup()


class ReplicaLog:
    """Samples ``spec.replicas`` of the ModelServing every 100 ms (to see the counts between two checks)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.values: list[int] = []
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            ms = await self.kube.get(MODELSERVINGS, MODEL, self.namespace)
            self.values.append(int(ms["spec"].get("replicas", 1)))
            await asyncio.sleep(0.1)

    def mark(self) -> int:
        return len(self.values)

    async def __aenter__(self) -> ReplicaLog:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@contextlib.asynccontextmanager
async def activator(kubeconfig: Path, namespace: str, metrics_port: int) -> AsyncIterator[Activator]:
    options = ActivatorOptions(
        listen="127.0.0.1:0",
        metrics_bind_address=f"127.0.0.1:{metrics_port}",
        health_probe_bind_address="0",
        kubeconfig=str(kubeconfig),
        namespaces=(namespace,),
    )
    running = Activator(options)
    await running.start()
    try:
        assert await running.wait_for_sync(60)
        yield running
    finally:
        await running.stop()


def served_model(engine_port: int) -> dict[str, Any]:
    ms = ms_manifest(MODEL, {"main": 1}, replicas=0)
    ms["metadata"]["annotations"] = {
        ACTIVATOR_PORT: str(engine_port),
        ACTIVATOR_SCALE_FROM_ZERO: "true",
        ACTIVATOR_HOLD_BUDGET: "120s",
    }
    return ms


def demand_policy(url: str, namespace: str) -> dict[str, Any]:
    return policy_manifest(
        MODEL,
        {
            "tolerancePercent": 0,
            "metrics": [{"name": "demand", "targetValue": str(TARGET_PER_REPLICA)}],
            "behavior": {
                "scaleUp": {"stablePolicy": {"period": "0s"}},
                "scaleDown": {"period": "0s", "stabilizationWindow": "0s"},
            },
            "homogeneousTarget": {
                "minReplicas": 0,
                "maxReplicas": 5,
                "target": {
                    "targetRef": {"name": MODEL},
                    "metricSources": {"demand": {"prometheus": {"serverURL": url, "query": demand_query(namespace)}}},
                },
            },
        },
    )


async def complete(session: aiohttp.ClientSession, port: int, prompt: str) -> tuple[int, dict[str, Any]]:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 4}
    async with session.post(f"http://127.0.0.1:{port}/v1/completions", json=body) as resp:
        return resp.status, json.loads(await resp.read())


async def test_demand_scales_past_one_and_back_to_zero_and_a_late_request_is_served(
    crds: None, kube: KubeClient, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    metrics_port = free_port()
    async with (
        Engines(kube, namespace) as engines,
        prometheus_server(tmp_path, metrics_port) as url,
        controllers(kubeconfig, namespace),
        activator(kubeconfig, namespace, metrics_port) as proxy,
        aiohttp.ClientSession(trust_env=False, timeout=aiohttp.ClientTimeout(total=150)) as session,
    ):
        await kube.create(MODELSERVINGS, served_model(engines.port), namespace)
        await kube.create(AUTOSCALINGPOLICIES, demand_policy(url, namespace), namespace)
        async with ReplicaLog(kube, namespace) as replicas:
            # Zero stays zero while nobody asks (the policy reads 0 demand, minReplicas 0).
            await asyncio.sleep(3)
            assert set(replicas.values) == {0}

            # A burst at zero: held, woken, forwarded; the demand scales the model past one replica.
            burst_start = replicas.mark()
            burst = [asyncio.create_task(complete(session, proxy.port, f"burst {i}")) for i in range(BURST)]

            async def scaled_out() -> bool:
                return max(replicas.values[burst_start:], default=0) >= 2

            await eventually(scaled_out, timeout=90, description="the burst scales past one replica")
            engines.gate.set()
            answers = await asyncio.wait_for(asyncio.gather(*burst), 120)
            assert [status for status, _ in answers] == [200] * BURST
            assert sorted(a["prompt"] for _, a in answers) == sorted(f"burst {i}" for i in range(BURST))
            during_burst = replicas.values[burst_start:]
            woke = next(i for i, v in enumerate(during_burst) if v > 0)
            assert 0 not in during_burst[woke:], "the autoscaler undid the wake-up before the burst was answered"
            assert max(during_burst) <= 5

            # Quiet: one stable window without demand brings it back to zero.
            async def at_zero() -> bool:
                return replicas.values[-1] == 0

            await eventually(at_zero, timeout=150, description="scaled back to zero after the quiet period")

            # A request as it reaches zero (its pods may still be terminating) is held and served.
            late_start = replicas.mark()
            status, answer = await asyncio.wait_for(complete(session, proxy.port, "late"), 150)
            assert status == 200 and answer["prompt"] == "late"
            assert answer["served_by"].startswith("127.100.")
            assert max(replicas.values[late_start:]) >= 1
        assert sum(len(b) for b in engines.bodies.values()) == BURST + 1
