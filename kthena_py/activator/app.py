"""The activator process: informers, the proxy server, probes and metrics, started and stopped together.

Guarantees:

* :meth:`Activator.start` starts the informers, then the proxy on ``listen`` (``port`` says the bound port, also
  for port 0), then the probe and metrics servers; ``/readyz`` passes once every informer has synced.
* It records demand for ModelPool members on their pool (:mod:`.demand`) while it holds or serves their requests.
* While it runs it keeps the state annotation (:data:`~kthena_py.vocab.labels.ACTIVATOR_STATE`) of the
  ModelServings it would wake (:mod:`.marker`), so ``kubectl get ms`` says ``scaled to zero (activator)`` only
  while an activator runs.
* :meth:`Activator.stop` stops accepting, ends held and in-flight requests, stops informers and closes clients it
  created (not a client it was given).
* Client disconnects cancel the request's handler (aiohttp's handler cancellation), which closes the upstream
  request.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass, field

import aiohttp
import structlog
from aiohttp import web

from kthena_py.kube import KubeClient, WatchApi
from kthena_py.runtime.httpserver import ProbeServer, parse_address

from .catalog import Catalog
from .demand import DemandWriter
from .marker import StateMarker
from .proxy import Proxy
from .waker import Waker

__all__ = ["Activator", "ActivatorOptions", "run"]

DEFAULT_HOLD_BUDGET = 120.0
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_HELD = 1000
SYNC_TIMEOUT = 60.0
log = structlog.get_logger("kthena_py.activator")


@dataclass(frozen=True)
class ActivatorOptions:
    """What ``kthena-py activator`` is told (its flags)."""

    listen: str = "0.0.0.0:8080"
    metrics_bind_address: str = ":8081"
    health_probe_bind_address: str = ":8082"
    kubeconfig: str | None = None
    namespaces: tuple[str, ...] = field(default=())
    hold_budget: float = DEFAULT_HOLD_BUDGET
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_held: int = DEFAULT_MAX_HELD


class Activator:
    """The activator, usable in-process (tests) or as the ``kthena-py activator`` process."""

    def __init__(self, options: ActivatorOptions, client: WatchApi | None = None) -> None:
        self.options = options
        self._client = client
        self._own_client: KubeClient | None = None
        self._catalog: Catalog | None = None
        self._marker: StateMarker | None = None
        self._demand: DemandWriter | None = None
        self._waker: Waker | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._probes = ProbeServer()
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The proxy's bound port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("the activator has not started")
        return self._port

    @property
    def probes(self) -> ProbeServer:
        """The health and metrics servers (their bound addresses after :meth:`start`)."""
        return self._probes

    @property
    def catalog(self) -> Catalog:
        """What the activator knows of the cluster (after :meth:`start`)."""
        if self._catalog is None:
            raise RuntimeError("the activator has not started")
        return self._catalog

    async def start(self) -> None:
        """Start informers, the proxy and the probe servers (see the module docstring)."""
        listen = parse_address(self.options.listen)
        if listen is None:
            raise ValueError("--listen cannot be disabled")
        client = self._client
        if client is None:
            self._own_client = await KubeClient.from_environment(self.options.kubeconfig)
            client = self._own_client
        self._catalog = Catalog(client, self.options.namespaces, default_budget=self.options.hold_budget)
        self._marker = StateMarker(client, self._catalog)
        await self._catalog.start()
        self._marker.start()
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            connector=aiohttp.TCPConnector(limit=0),
        )
        self._demand = DemandWriter(client, self._catalog)
        self._waker = Waker(client, self._catalog)
        proxy = Proxy(
            self._catalog,
            self._waker,
            self._demand,
            max_body_bytes=self.options.max_body_bytes,
            max_held=self.options.max_held,
            session=self._session,
        )
        # client_max_size: the proxy reads bodies itself and answers an OpenAI-style 413.
        app = web.Application(client_max_size=self.options.max_body_bytes + 1)
        proxy.routes(app)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, listen[0], listen[1])
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self._port = int(sockets[0].getsockname()[1]) if sockets else listen[1]
        catalog = self._catalog
        self._probes.add_readiness_check("informers", lambda: catalog.synced)
        await self._probes.start(
            health_address=self.options.health_probe_bind_address,
            metrics_address=self.options.metrics_bind_address,
        )
        log.info("activator started", listen=f"{listen[0]}:{self._port}", namespaces=list(self.options.namespaces))

    async def wait_for_sync(self, timeout: float = SYNC_TIMEOUT) -> bool:
        """Wait until the informers have listed everything."""
        return await self.catalog.wait_for_sync(timeout)

    async def stop(self) -> None:
        """Stop everything started (see the module docstring)."""
        await self._probes.stop()
        if self._marker is not None:
            await self._marker.stop()
            self._marker = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._waker is not None:
            self._waker.stop()
            self._waker = None
        if self._demand is not None:
            await self._demand.stop()
            self._demand = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._catalog is not None:
            await self._catalog.stop()
        if self._own_client is not None:
            await self._own_client.close()
            self._own_client = None


async def run(options: ActivatorOptions) -> None:
    """Run the activator until SIGTERM or SIGINT."""
    activator = Activator(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await activator.start()
    try:
        if not await activator.wait_for_sync():
            log.warning("informers have not synced yet; /readyz stays failing until they do")
        await stop.wait()
    finally:
        await activator.stop()
