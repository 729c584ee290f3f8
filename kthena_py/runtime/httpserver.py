"""The health-probe and metrics endpoints, served with aiohttp.

Guarantees: ``/healthz`` answers 200 while the event loop runs; ``/readyz`` answers 200 only when
every registered readiness check passes (503 with the failing checks listed otherwise);
``/metrics`` exposes :data:`kthena_py.runtime.metrics.REGISTRY` in the Prometheus text format.
An address of ``0`` (or empty) disables a server, as in controller-runtime.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import metrics

Check = Callable[[], bool]


def parse_address(address: str) -> tuple[str, int] | None:
    """Parse ``host:port`` (``:port`` means all interfaces); ``None`` when disabled (``0`` or empty).

    Raises:
        ValueError: Not a valid address.
    """
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"invalid bind address {address!r}: want HOST:PORT or :PORT")
    host = host.strip("[]")
    return (host or "0.0.0.0", int(port))


class ProbeServer:
    """Serves /healthz, /readyz and/or /metrics on one or two addresses."""

    def __init__(self) -> None:
        self._ready_checks: dict[str, Check] = {}
        self._runners: list[web.AppRunner] = []
        self.bound: dict[str, tuple[str, int]] = {}

    def add_readiness_check(self, name: str, check: Check) -> None:
        """Add a named readiness check."""
        self._ready_checks[name] = check

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, _: web.Request) -> web.Response:
        failing = [name for name, check in self._ready_checks.items() if not check()]
        if failing:
            return web.Response(status=503, text="not ready: " + ", ".join(failing))
        return web.Response(text="ok")

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self, *, health_address: str, metrics_address: str) -> None:
        """Start the servers (both on one port when the addresses are equal)."""
        health = parse_address(health_address)
        metric = parse_address(metrics_address)
        if health is not None and health == metric and health[1] != 0:
            await self._serve("health+metrics", health, metrics=True, health=True)
            return
        if health is not None:
            await self._serve("health", health, metrics=False, health=True)
        if metric is not None:
            await self._serve("metrics", metric, metrics=True, health=False)

    async def _serve(self, name: str, addr: tuple[str, int], *, metrics: bool, health: bool) -> None:
        app = web.Application()
        if health:
            app.router.add_get("/healthz", self._healthz)
            app.router.add_get("/readyz", self._readyz)
        if metrics:
            app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, addr[0], addr[1])
        await site.start()
        self._runners.append(runner)
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else addr[1]
        self.bound[name] = (addr[0], int(port))

    async def stop(self) -> None:
        """Stop every server."""
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
