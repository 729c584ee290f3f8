"""Fake LoRA endpoints for the adapter tests: routes added to the EngineFarm's app on every pod IP.

One app answers both flavours (the ModelServings point ``serving.kthena-py.io/lora-port`` at the farm's port):
the sidecar's ``POST /v1/load_lora_adapter {lora_name, source, output_dir}`` and the engine's
``{lora_name, lora_path}``, ``POST /v1/unload_lora_adapter {lora_name}``, and ``GET /v1/models`` listing the base
model and the loaded adapters (with a ``parent``, as vLLM does). Every call is recorded with its pod; a load
takes ``delay`` seconds and, once received, completes even if the caller goes away (a killed manager); a load of
a name already loaded is refused, as vLLM does. Sources in ``refuse`` are refused with their message.

Other test sessions on this machine may run cluster tiers of their own, whose pod IPs come from the same loopback
range: a load whose source does not contain the fake's ``tag`` (the test's namespace, put in every source) is not
ours and is answered 404 without being recorded, and an unload of a name not loaded is not recorded either.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import EVENTS, PODS

from .engineutil import EngineFarm

__all__ = ["Call", "FakeAdapters", "adapter_farm", "events_of", "labels_of_pods"]


@dataclass(frozen=True)
class Call:
    pod: str
    kind: str  # load | unload
    name: str
    body: dict[str, Any]
    at: float
    ok: bool


@dataclass
class FakeAdapters:
    tag: str
    delay: float = 0.2
    refuse: dict[str, str] = field(default_factory=dict)
    loaded: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    started: list[tuple[str, str]] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    farm: EngineFarm | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def pod_of(self, request: web.Request) -> str:
        assert self.farm is not None and request.transport is not None
        ip = request.transport.get_extra_info("sockname")[0]
        return self.farm.pod_of_ip.get(ip, ip)

    def loads(self, *, ok: bool | None = True) -> list[Call]:
        return [c for c in self.calls if c.kind == "load" and (ok is None or c.ok == ok)]

    def unloads(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "unload"]

    def restart(self, pod: str) -> None:
        """The engine of ``pod`` restarted: it lost its adapters."""
        self.loaded.pop(pod, None)

    async def _load(self, request: web.Request) -> web.Response:
        pod = self.pod_of(request)
        body = await request.json()
        name = str(body.get("lora_name"))
        source = str(body.get("source") or body.get("lora_path"))
        root = str(body.get("output_dir") or body.get("lora_path"))
        if self.tag not in source:
            return web.json_response({"message": "not this test's adapter"}, status=404)
        self.started.append((pod, name))
        task = asyncio.create_task(self._do_load(pod, name, source, root, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        status, message = await asyncio.shield(task)
        if status == 200:
            return web.json_response({"status": "ok"})
        return web.json_response({"object": "error", "message": message}, status=status)

    async def _do_load(self, pod: str, name: str, source: str, root: str, body: dict[str, Any]) -> tuple[int, str]:
        self.in_flight[pod] = self.in_flight.get(pod, 0) + 1
        self.max_in_flight[pod] = max(self.max_in_flight.get(pod, 0), self.in_flight[pod])
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight[pod] -= 1
        if source in self.refuse:
            self.calls.append(Call(pod, "load", name, body, time.time(), False))
            return 400, self.refuse[source]
        if name in self.loaded.get(pod, {}):
            self.calls.append(Call(pod, "load", name, body, time.time(), False))
            return 400, f"The lora adapter '{name}' has already been loaded."
        self.loaded.setdefault(pod, {})[name] = root
        self.calls.append(Call(pod, "load", name, body, time.time(), True))
        return 200, ""

    async def _unload(self, request: web.Request) -> web.Response:
        pod = self.pod_of(request)
        body = await request.json()
        name = str(body.get("lora_name"))
        if self.loaded.get(pod, {}).pop(name, None) is None:
            return web.json_response({"message": f"The lora adapter '{name}' cannot be found."}, status=404)
        self.calls.append(Call(pod, "unload", name, body, time.time(), True))
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        pod = self.pod_of(request)
        data: list[dict[str, Any]] = [{"id": "base", "object": "model", "root": "/models/base", "parent": None}]
        for name, root in sorted(self.loaded.get(pod, {}).items()):
            data.append({"id": name, "object": "model", "root": root, "parent": "base"})
        return web.json_response({"object": "list", "data": data})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/load_lora_adapter", self._load)
        app.router.add_post("/v1/unload_lora_adapter", self._unload)
        app.router.add_get("/v1/models", self._models)


@contextlib.asynccontextmanager
async def adapter_farm(kube: KubeClient, namespace: str, fake: FakeAdapters) -> AsyncIterator[FakeAdapters]:
    async with EngineFarm(kube, namespace, routes=fake.routes) as farm:
        fake.farm = farm
        yield fake


async def labels_of_pods(kube: KubeClient, namespace: str, prefix: str) -> dict[str, dict[str, str]]:
    """Live pods -> their labels starting with ``prefix``."""
    found: dict[str, dict[str, str]] = {}
    for pod in (await kube.list(PODS, namespace)).items:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        labels = pod["metadata"].get("labels") or {}
        found[pod["metadata"]["name"]] = {k: v for k, v in labels.items() if k.startswith(prefix)}
    return found


async def events_of(kube: KubeClient, namespace: str, reason: str) -> list[str]:
    items = (await kube.list(EVENTS, namespace)).items
    return [str(e.get("message")) for e in items if e.get("reason") == reason]
