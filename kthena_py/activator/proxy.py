"""The OpenAI-compatible reverse proxy: route, hold, forward, stream.

Guarantees:

* Routing: ``GET /v1/models`` lists every name the catalog routes: models (ModelPool members included) and LoRA
  adapter names (their own and ``<model>_<adapter>``, with ``parent`` the base model). Any other request must
  carry a JSON object body with a ``model`` (``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``,
  and any other path, which is passed through to the same path of the model's backend); a request without one is
  answered 400 (413 above the body limit, 404 for an unknown model or a path without a body) with an OpenAI-style
  error.
* Backends: the Ready entry pods of the model's ModelServing, least requests in flight first.
* Hold: with no Ready backend, an opted-in target is held: a 0 -> 1 scale write is started (one per wake-up,
  :mod:`.waker`) and the request waits for informer events, up to the target's hold budget; a target being
  scaled down (pods terminating or not Ready) is held alike. Budget spent: 503, ``Retry-After`` and the reason
  from the ModelServing and its pods. A target that has not opted in: 503 at once. More than ``max_held``
  requests held for one target: 503 at once.
* Forwarding streams: each upstream chunk is written to the client as it arrives (no buffering), bodies are
  passed byte for byte (no decompression). A client that goes away cancels the upstream request.
* Retries (:func:`~kthena_py.plan.activator.retry.retry_delay`): only before the first byte reached the client,
  after a refused connection or a 502/503, within the hold budget.
* Demand: from arrival to answer a request counts in ``kthena_activator_requests_held`` (held, or waiting to
  retry) or ``kthena_activator_requests_in_flight`` (forwarded), never in neither, so an autoscaler reading their
  sum never sees no demand while a request is in the activator.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping

import aiohttp
import structlog
from aiohttp import web
from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge

from kthena_py.plan.activator.adapters import adapter_reason, rewrite_model
from kthena_py.plan.activator.backends import Backend, choose_backend
from kthena_py.plan.activator.directory import AdapterRoute
from kthena_py.plan.activator.errors import NOT_FOUND, UNAVAILABLE, RequestError, error_body, read_model
from kthena_py.plan.activator.pools import pool_reason
from kthena_py.plan.activator.reasons import unavailable_reason
from kthena_py.plan.activator.retry import Failure, retry_delay
from kthena_py.plan.activator.targets import Target

from . import metrics
from .catalog import Catalog
from .demand import DemandWriter
from .waker import Waker

__all__ = ["RETRY_AFTER_SECONDS", "Proxy"]

RETRY_AFTER_SECONDS = 10
"""``Retry-After`` of a 503 (a cold start usually needs more than a few seconds more)."""
CLIENT_CLOSED = 499
_SENT = web.RequestKey("kthena_py.activator.sent", bool)
"""Request key: set once the answer's status line went to the client."""
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
log = structlog.get_logger("kthena_py.activator.proxy")


def _json_error(err: RequestError, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(err.body(), status=err.status, headers=headers)


def _forward_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}


class _Unavailable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Proxy:
    """Request handling over a :class:`Catalog` (see the module docstring)."""

    def __init__(
        self,
        catalog: Catalog,
        waker: Waker,
        demand: DemandWriter,
        *,
        max_body_bytes: int,
        max_held: int,
        session: aiohttp.ClientSession,
    ) -> None:
        self._catalog = catalog
        self._waker = waker
        self._demand = demand
        self._max_body = max_body_bytes
        self._max_held = max_held
        self._session = session
        self._in_flight: Counter[str] = Counter()
        self._held: Counter[str] = Counter()
        self._in_flight_gauges: dict[tuple[str, str], Gauge] = {}
        self._totals: dict[tuple[str, str, int], PromCounter] = {}

    def _in_flight_gauge(self, target: Target) -> Gauge:
        """The in-flight child of ``target`` (a label lookup takes a lock: done once per target)."""
        labels = (target.namespace, target.name)
        gauge = self._in_flight_gauges.get(labels)
        if gauge is None:
            gauge = self._in_flight_gauges[labels] = metrics.REQUESTS_IN_FLIGHT.labels(*labels)
        return gauge

    def _total(self, target: Target, code: int) -> PromCounter:
        """The requests_total child of ``target`` and ``code``, looked up once."""
        key = (target.namespace, target.name, code)
        counter = self._totals.get(key)
        if counter is None:
            counter = self._totals[key] = metrics.REQUESTS_TOTAL.labels(target.namespace, target.name, str(code))
        return counter

    def routes(self, app: web.Application) -> None:
        """Register the handlers on ``app``."""
        app.router.add_get("/v1/models", self.models)
        app.router.add_route("*", "/{tail:.*}", self.handle)

    async def models(self, _: web.Request) -> web.Response:
        """``GET /v1/models``: every model and adapter name the activator routes (adapters with their ``parent``)."""
        return web.json_response({"object": "list", "data": self._catalog.directory().model_cards()})

    async def _read_body(self, request: web.Request) -> bytes | RequestError:
        if request.content_length is not None and request.content_length > self._max_body:
            return RequestError(
                413, f"request body is {request.content_length} bytes; the limit is {self._max_body}", "body_too_large"
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = await request.content.readany()
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self._max_body:
                return RequestError(413, f"request body exceeds the limit of {self._max_body} bytes", "body_too_large")
            chunks.append(chunk)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Route one request by the ``model`` of its JSON body."""
        body = await self._read_body(request)
        if isinstance(body, RequestError):
            return _json_error(body)
        if not body:
            missing = RequestError(404, f"no route for {request.method} {request.path}", "not_found", type=NOT_FOUND)
            return _json_error(missing)
        model = read_model(body, self._max_body)
        if isinstance(model, RequestError):
            return _json_error(model)
        directory = self._catalog.directory()
        target = directory.resolve(model)
        adapter: AdapterRoute | None = None
        if target is None:
            adapter = directory.resolve_adapter(model)
            if adapter is None:
                return _json_error(
                    RequestError(404, f"the model {model!r} does not exist", "model_not_found", "model", NOT_FOUND)
                )
            target = adapter.target
            if adapter.rewrite:
                body = rewrite_model(body, adapter.adapter)
        code = CLIENT_CLOSED
        try:
            response = await self._serve(request, model, target, body, adapter)
            code = response.status
            return response
        except _Unavailable as exc:
            code = 503
            body_json = error_body(exc.message, UNAVAILABLE, "model_unavailable")
            return web.json_response(body_json, status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            raise  # the client went away mid-answer: nothing to answer (counted as 499)
        except Exception as exc:  # never a crash: a bug or an unexpected failure is a 500 with an OpenAI error
            log.exception("request failed", target=target.key)
            if request.get(_SENT) or request.transport is None or request.transport.is_closing():
                raise  # part of an answer went out: aiohttp closes the connection
            code = 500
            return web.json_response(error_body(f"internal error: {exc}", "server_error", "internal_error"), status=500)
        finally:
            self._total(target, code).inc()

    async def _serve(
        self, request: web.Request, model: str, target: Target, body: bytes, adapter: AdapterRoute | None
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + target.hold_budget
        attempt = 0
        refused: set[str] = set()
        while True:
            if adapter is None:
                current = self._catalog.directory().resolve(model) or target
                backends = self._catalog.backends(current)
            else:
                adapter = self._catalog.directory().resolve_adapter(model) or adapter
                current = adapter.target
                backends = self._catalog.adapter_backends(adapter)
            backend = choose_backend(backends, self._in_flight, refused)
            if backend is None:
                if refused and backends:
                    refused.clear()
                    continue
                await self._hold(current, deadline, adapter)
                continue
            if current.pool is not None:
                self._demand.served(current)
            attempt += 1
            outcome = await self._forward(request, current, backend, body)
            if isinstance(outcome, web.StreamResponse):
                return outcome
            failure, status = outcome
            delay = retry_delay(
                attempt=attempt, failure=failure, status=status, first_byte_sent=False, remaining=deadline - loop.time()
            )
            if delay is None:
                what = {"status": f"answered {status}", "refused": "refused the connection"}.get(failure, "failed")
                raise _Unavailable(f"{target.key}: backend {backend.pod} {what}; no time left to retry")
            log.info("retrying", target=target.key, pod=backend.pod, failure=failure, status=status, delay=delay)
            if failure == "refused":
                refused.add(backend.pod)
            waiting = metrics.REQUESTS_HELD.labels(current.namespace, current.name)
            waiting.inc()  # waiting for a working backend is demand too: the autoscaler must not read it as none
            try:
                await asyncio.sleep(delay)
            finally:
                waiting.dec()

    async def _hold(self, target: Target, deadline: float, adapter: AdapterRoute | None) -> None:
        """Wait for a Ready backend of ``target`` (with ``adapter`` loaded) until ``deadline``.

        Raises:
            _Unavailable: No backend came in time, or the target may not be held.
        """
        loop = asyncio.get_running_loop()
        if not target.holds and adapter is None:
            raise _Unavailable(self._reason(target, None) + " (not opted in to scale from zero)")
        if self._held[target.key] >= self._max_held:
            raise _Unavailable(f"{target.key}: {self._held[target.key]} requests already held (the limit)")
        labels = (target.namespace, target.name)
        self._held[target.key] += 1
        metrics.REQUESTS_HELD.labels(*labels).inc()
        self._demand.hold_started(target)
        started = loop.time()

        def backend_ready() -> bool:
            if adapter is not None and self._catalog.adapter_backends(adapter):
                return True
            if adapter is None and self._catalog.backends(target):
                return True
            self._waker.wake(target)  # at zero again (scaled down meanwhile): wake it again; never a pool member
            self._demand.hold_continues(target)  # a pool member released meanwhile asks again at once
            return False

        try:
            ready = await self._catalog.wait_until(target.key, backend_ready, max(0.0, deadline - loop.time()))
        finally:
            self._held[target.key] -= 1
            self._demand.hold_ended(target)
            metrics.REQUESTS_HELD.labels(*labels).dec()
            metrics.HOLD_SECONDS.labels(*labels).observe(loop.time() - started)
        if not ready:
            what = f" with adapter {adapter.adapter!r}" if adapter is not None else ""
            reason = self._reason(target, adapter)
            raise _Unavailable(f"{target.key} has no Ready backend{what} after {target.hold_budget:g}s: {reason}")

    def _reason(self, target: Target, adapter: AdapterRoute | None) -> str:
        pods = self._catalog.pods(target)
        if adapter is not None and self._catalog.backends(target):
            return adapter_reason(pods, target.port, adapter.adapter, adapter.digest)
        if target.pool is not None:
            text = pool_reason(self._catalog.pool(target.pool), target.name)
        else:
            text = unavailable_reason(
                self._catalog.modelserving(target), pods, now=time.time(), scale_from_zero=target.scale_from_zero
            )
        if adapter is not None:
            text += f"; adapter {adapter.adapter!r} is loaded once an entry pod is Ready"
        return text

    async def _forward(
        self, request: web.Request, target: Target, backend: Backend, body: bytes
    ) -> web.StreamResponse | tuple[Failure, int | None]:
        in_flight = self._in_flight_gauge(target)
        self._in_flight[backend.pod] += 1
        in_flight.inc()
        headers = _forward_headers(request.headers)
        if request.remote:
            headers["X-Forwarded-For"] = request.remote
        response: web.StreamResponse | None = None
        try:
            async with self._session.request(
                request.method, backend.url + request.path_qs, data=body, headers=headers
            ) as upstream:
                if upstream.status in (502, 503):
                    return ("status", upstream.status)
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                response.headers.update(_forward_headers(upstream.headers))
                if upstream.content_length is not None and "chunked" not in upstream.headers.get(
                    "Transfer-Encoding", ""
                ):
                    response.content_length = upstream.content_length
                request[_SENT] = True  # before prepare: from here on no other answer may be written
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientConnectorError:
            return ("refused", None)
        except aiohttp.ClientError as exc:
            if response is None:
                return ("other", None)
            # The client has part of the answer: cut its connection so it sees the answer is incomplete.
            log.warning("backend failed mid-answer", target=target.key, pod=backend.pod, error=str(exc))
            if request.transport is not None:
                request.transport.close()
            return response
        finally:
            self._in_flight[backend.pod] -= 1
            if self._in_flight[backend.pod] <= 0:
                del self._in_flight[backend.pod]
            in_flight.dec()
