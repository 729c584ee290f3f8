"""Helpers for the autoscaling glue tests: loopback /metrics servers, pods, policies, a cluster on FakeKube."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import Call as FakeCall
from kthena_py.testing.fake import FakeKube

GROUP = "modelserving.volcano.sh"


class MetricsServers:
    """aiohttp apps on several loopback addresses, one port: per address a body, a status or a hang."""

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


class FakePrometheus:
    """A loopback stand-in for Prometheus' /api/v1/query: answers from a dict keyed by query."""

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
async def prometheus() -> AsyncIterator[FakePrometheus]:
    p = FakePrometheus()
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
    labels = {f"{GROUP}/name": ms, f"{GROUP}/group-name": group or f"{ms}-0"}
    if entry:
        labels[f"{GROUP}/entry"] = "true"
    if role is not None:
        labels[f"{GROUP}/role"] = role
        labels[f"{GROUP}/role-id"] = role_id or f"{role}-0"
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


@dataclass
class Written:
    """A write of the autoscaler: ``scale`` (body: the replicas) or ``patch``, with the plural of its type."""

    verb: str
    rt: str
    name: str
    namespace: str
    body: Any
    kwargs: dict[str, Any] = field(default_factory=dict)


class Cluster:
    """FakeKube with a cache attached (its writes reach the next pass, as through a synced informer).

    ``fail`` maps ``scale`` or ``patch`` to the error those writes get while it is set.
    """

    def __init__(self) -> None:
        self.kube = FakeKube()
        self.cache = SharedCache(self.kube)
        for rt in (AUTOSCALINGPOLICIES, MODELSERVINGS, PODS):
            self.cache.informer(rt)
        self.kube.attach(self.cache)
        self.fail: dict[str, Exception] = {}
        self.kube.intercept(self._fail)

    def _fail(self, call: FakeCall) -> None:
        if call.verb == "patch":
            error = self.fail.get("scale" if call.subresource == "scale" else "patch")
            if error is not None:
                raise error

    @property
    def calls(self) -> list[Written]:
        """The writes, in order."""
        out: list[Written] = []
        for c in self.kube.calls_of("patch"):
            if c.subresource == "scale":
                out.append(Written("scale", c.rt.plural, c.name, c.namespace or "", c.body["spec"]["replicas"]))
            else:
                kwargs = {"patch_type": c.options.get("patch_type"), "subresource": c.subresource}
                out.append(Written("patch", c.rt.plural, c.name, c.namespace or "", c.body, kwargs))
        return out

    def writes(self, verb: str | None = None) -> list[Written]:
        return [c for c in self.calls if verb is None or c.verb == verb]


def put(cluster: Cluster, rt: Any, *objs: dict[str, Any]) -> None:
    """Store objects as given (status included), as if someone else had written them."""
    for obj in objs:
        cluster.kube.put(rt, obj)


Clock = Callable[[], float]
