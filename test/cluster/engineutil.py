"""Fake engines for the cluster tier: an aiohttp app served on the IP of every Running pod of a namespace.

kwok runs no containers, so these servers stand in for the engine of each pod, on the pod IPs kwok assigns
(127.100.0.0/16). ``/v1/chat/completions`` echoes (or streams chunk by chunk when ``stream`` is set, one chunk per
``step``); tests add their own routes (engine metrics, LoRA load/unload) through ``routes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

from aiohttp import web

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS

ENGINE_PORT = 18000


class EngineFarm:
    """Serves an echoing/streaming engine on the IP of every Running pod of a namespace (Ready or not)."""

    def __init__(
        self, kube: KubeClient, namespace: str, routes: Callable[[web.Application], None] | None = None
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.routes = routes
        self.pod_of_ip: dict[str, str] = {}
        """The pod name behind each served IP (``request.transport``'s sockname tells a handler which it is)."""
        self.bodies: list[bytes] = []
        self.chunk_times: list[float] = []
        self.step = asyncio.Event()
        self.cancelled = asyncio.Event()
        self._sites: dict[str, web.TCPSite] = {}
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.bodies.append(body)
        if not json.loads(body).get("stream"):
            return web.json_response({"echo": json.loads(body)})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for i in range(100):
                await self.step.wait()
                self.step.clear()
                self.chunk_times.append(time.monotonic())
                await response.write(f"data: {i}\n\n".encode())
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        await response.write_eof()
        return response

    async def sync(self) -> None:
        live: dict[str, str] = {}
        for pod in (await self.kube.list(PODS, self.namespace)).items:
            status = pod.get("status") or {}
            if (
                status.get("podIP")
                and status.get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp")
            ):
                live[status["podIP"]] = pod["metadata"]["name"]
        assert self._runner is not None
        for ip in [ip for ip in self._sites if ip not in live]:
            await self._sites.pop(ip).stop()
        self.pod_of_ip = live
        for ip in set(live) - set(self._sites):
            site = web.TCPSite(self._runner, ip, ENGINE_PORT)
            await site.start()
            self._sites[ip] = site

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.sync()
            await asyncio.sleep(0.1)

    async def __aenter__(self) -> EngineFarm:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        if self.routes is not None:
            self.routes(app)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None and self._runner is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._runner.cleanup()
