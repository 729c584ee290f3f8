"""Helpers for the autoscaling glue tests: loopback /metrics and Prometheus servers, objects, the reconcilers' scene."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kthena_py.controllers.autoscaling.base import Deps, Settings
from kthena_py.controllers.autoscaling.collector import NAME_LABEL, PodScraper
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube.resources import PODS, ResourceType
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents
from kthena_py.vocab.labels import (
    ENTRY_VALUE,
    SERVING_ENTRY,
    SERVING_GROUP_NAME,
    SERVING_NAME,
    SERVING_ROLE,
    SERVING_ROLE_ID,
)


class MetricsServers:
    """Real ``/metrics`` HTTP servers on several loopback addresses, one port: per address a body, a status or a hang.

    Not a fake of a seam: the production scraper talks HTTP to them, as it talks to the pods of a cluster.
    """

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}
        self.status: dict[str, int] = {}
        self.hang: set[str] = set()
        self.hits: dict[str, int] = {}
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
        self.hits[ip] = self.hits.get(ip, 0) + 1
        if ip in self.hang:
            await self._release.wait()
        if ip in self.status:
            return web.Response(status=self.status[ip], text="boom")
        return web.Response(text=self.bodies.get(ip, ""), content_type="text/plain")

    async def start(self, ips: list[str]) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._handle)
        app.router.add_get("/custom", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        with socket.socket() as probe:
            probe.bind((ips[0], 0))
            self.port = probe.getsockname()[1]
        for ip in ips:
            await web.TCPSite(self._runner, ip, self.port).start()

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def servers() -> AsyncIterator[MetricsServers]:
    s = MetricsServers()
    yield s
    await s.stop()


class PrometheusServer:
    """A real HTTP server on loopback speaking Prometheus' ``/api/v1/query``, answering from a dict keyed by query.

    Not a fake of a seam: the production query client (:func:`~kthena_py.controllers.autoscaling.prometheus.
    instant_query`, through :class:`~kthena_py.controllers.autoscaling.collector.PodScraper`) talks HTTP to it.
    """

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.queries: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        query = request.query.get("query", "")
        self.queries.append(query)
        answer = self.answers.get(query)
        if answer is None:
            return web.json_response({"status": "error", "errorType": "bad_data", "error": "unknown"}, status=400)
        if isinstance(answer, (int, float)):
            answer = {"status": "success", "data": {"resultType": "scalar", "result": [0, str(answer)]}}
        return web.json_response(answer)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/api/v1/query", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def prometheus() -> AsyncIterator[PrometheusServer]:
    p = PrometheusServer()
    await p.start()
    yield p
    await p.stop()


def gauge(name: str, value: float) -> str:
    return f"# TYPE {name} gauge\n{name} {value}\n"


def counter(name: str, value: float) -> str:
    return f"# TYPE {name} counter\n{name}_total {value}\n"


def pod(
    name: str,
    ip: str,
    *,
    ms: str = "ms",
    namespace: str = "ns",
    group: str | None = None,
    role: str | None = None,
    role_id: str | None = None,
    ready: bool = True,
    entry: bool = True,
    phase: str = "Running",
    extra_labels: dict[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    labels = {SERVING_NAME: ms, SERVING_GROUP_NAME: group or f"{ms}-0"}
    if entry:
        labels[SERVING_ENTRY] = ENTRY_VALUE
    if role is not None:
        labels[SERVING_ROLE] = role
        labels[SERVING_ROLE_ID] = role_id or f"{role}-0"
    labels.update(extra_labels or {})
    md: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def modelserving(
    name: str, replicas: int | None = 1, *, namespace: str = "ns", roles: list[tuple[str, int | None]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"roles": []}}
    if replicas is not None:
        spec["replicas"] = replicas
    for role, count in roles or [("main", None)]:
        entry: dict[str, Any] = {"name": role}
        if count is not None:
            entry["replicas"] = count
        spec["template"]["roles"].append(entry)
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1},
        "spec": spec,
    }


def policy(name: str, spec: dict[str, Any], *, namespace: str = "ns", generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": generation},
        "spec": spec,
    }


UNLIMITED = {
    "scaleUp": {"stablePolicy": {"period": "0s"}},
    "scaleDown": {"period": "0s"},
}
"""A behaviour without rate limits or stabilization (Kthena's controller test vectors use no behaviour)."""


class Scene:
    """The autoscaling reconcilers' world: FakeKube with a cache attached, the real scraper, a virtual wall clock.

    The API server is :class:`FakeKube` (its writes reach the cache at once, as a synced informer's watch would;
    faults come through its interceptors). Pod metrics come from real ``/metrics`` servers on loopback
    (:class:`MetricsServers`, one address per pod: :data:`IPS`), scraped by the production
    :class:`~kthena_py.controllers.autoscaling.collector.PodScraper`, whose sample times follow :attr:`now`.
    """

    def __init__(self, servers: MetricsServers) -> None:
        self.now = 1_000_000.0
        self.servers = servers
        self.kube = FakeKube()
        self.cache = SharedCache(self.kube)
        for rt in (AUTOSCALINGPOLICIES, MODELSERVINGS, PODS):
            self.cache.informer(rt)
        self.cache.index_label(PODS, NAME_LABEL)
        self.kube.attach(self.cache)
        self.events = RecordedEvents()
        self.scraper = PodScraper(wall_clock=lambda: self.now)
        self.deps = Deps(
            self.kube, self.cache, self.events, self.scraper, Settings(sync_period=15.0), wall_clock=lambda: self.now
        )

    @property
    def port(self) -> int:
        """The port of every pod's ``/metrics`` server."""
        return self.servers.port

    def tick(self, seconds: float = 15.0) -> None:
        """Move the wall clock on (one sync period by default)."""
        self.now += seconds

    def put(self, rt: ResourceType, *objs: dict[str, Any]) -> None:
        """Store objects as given (status included), as if someone else had written them."""
        for obj in objs:
            self.kube.put(rt, obj)

    def get(self, rt: ResourceType, name: str) -> dict[str, Any]:
        """The stored object ``ns/name``."""
        obj = self.kube.peek(rt, name, "ns")
        assert obj is not None, f"no {rt.kind} ns/{name}"
        return obj

    def replicas(self, name: str = "ms") -> int:
        """``spec.replicas`` of the stored ModelServing."""
        return int(self.get(MODELSERVINGS, name)["spec"]["replicas"])

    def status(self, name: str = "p") -> dict[str, Any]:
        """The stored policy's status."""
        return self.get(AUTOSCALINGPOLICIES, name).get("status") or {}

    def condition(self, type_: str, name: str = "p") -> tuple[str, str]:
        """(status, reason) of one condition of the stored policy."""
        for c in self.status(name).get("conditions") or []:
            if c["type"] == type_:
                return c["status"], c["reason"]
        raise AssertionError(f"no condition {type_}")

    def message(self, type_: str, name: str = "p") -> str:
        """The message of one condition of the stored policy."""
        return str(next(c for c in self.status(name).get("conditions") or [] if c["type"] == type_)["message"])

    def recorded(self) -> list[tuple[str, str, str]]:
        """The events recorded, as (type, reason, message)."""
        return [(e.type, e.reason, e.message) for e in self.events.events]

    def scales(self) -> list[tuple[str, int]]:
        """The ``scale`` subresource writes asked for, in order: (ModelServing, replicas)."""
        return [
            (c.name, c.body["spec"]["replicas"])
            for c in self.kube.calls_of("patch", MODELSERVINGS)
            if c.subresource == "scale"
        ]

    def writes(self) -> list[Call]:
        """Every write asked for, in order."""
        return [c for c in self.kube.calls if c.verb in ("create", "replace", "patch", "delete")]


IPS = [f"127.0.0.{n}" for n in range(41, 47)]
"""The loopback addresses the pods of :class:`Scene` may have (each serves its own ``/metrics`` body)."""


@pytest.fixture
async def scene(servers: MetricsServers) -> AsyncIterator[Scene]:
    await servers.start(IPS)
    world = Scene(servers)
    try:
        yield world
    finally:
        await world.scraper.close()


def homogeneous_spec(port: int, **overrides: Any) -> dict[str, Any]:
    """A homogeneous policy on ``ns/ms``: ``load`` from the pods' ``/metrics`` at ``port``, target 1, [1, 10]."""
    spec: dict[str, Any] = {
        "tolerancePercent": 0,
        "metrics": [{"name": "load", "targetValue": "1"}],
        "behavior": UNLIMITED,
        "homogeneousTarget": {
            "minReplicas": 1,
            "maxReplicas": 10,
            "target": {"targetRef": {"name": "ms"}, "metricSources": {"load": {"pod": {"port": port}}}},
        },
    }
    spec.update(overrides)
    return spec


def disaggregated_spec(port: int) -> dict[str, Any]:
    """A disaggregated policy on ``ns/pd``: prefill [1, 8] and decode [2, 16], prefill/decode within [1/4, 1]."""

    def role(metric: str, low: int, high: int) -> dict[str, Any]:
        return {
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [{"name": metric, "targetValue": "1"}],
            "metricSources": {metric: {"pod": {"port": port}}},
        }

    return {
        "tolerancePercent": 0,
        "behavior": UNLIMITED,
        "disaggregatedTarget": {
            "targetRef": {"name": "pd"},
            "roles": {"prefill": role("prefill_load", 1, 8), "decode": role("decode_load", 2, 16)},
            "ratioConstraint": {
                "numeratorRole": "prefill",
                "denominatorRole": "decode",
                "minRatio": "250m",
                "maxRatio": "1",
            },
        },
    }


def sample(name: str, labels: dict[str, str]) -> float | None:
    """The value of one series of the process's metrics registry."""
    return REGISTRY.get_sample_value(name, labels)
