"""The HTTP calls of the adapter reconciler: load and unload (sidecar or engine), and the engine's adapter list.

Guarantees:

* :class:`HttpAdapterEngine` satisfies :class:`AdapterEngine` (unit tests put a fake behind it); one shared
  aiohttp session, opened on first use and closed by the manager when it stops.
* A load or unload that is not answered with a 2xx raises :class:`EngineCallFailed` carrying the engine's message
  (the ``message`` or ``detail`` field of a JSON error body, else the body's first 300 characters, else the HTTP
  status); a connection error or timeout raises it too, with what went wrong. Nothing else escapes.
* A load waits up to ``load_timeout`` (the sidecar downloads before it loads); an unload and the list up to
  ``call_timeout``.
* :meth:`HttpAdapterEngine.inventory` reads ``GET /v1/models`` on the engine port and returns the adapters it
  lists (entries with a ``parent``, vLLM's way of listing LoRA adapters) as name -> root; ``None`` when the engine
  could not be read.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import aiohttp
import structlog

from kthena_py.plan.adapters.desired import Adapter
from kthena_py.plan.adapters.endpoint import (
    LOAD_PATH,
    MODELS_PATH,
    UNLOAD_PATH,
    LoadEndpoint,
    load_body,
    unload_body,
)

__all__ = ["AdapterEngine", "EngineCallFailed", "HttpAdapterEngine"]

log = structlog.get_logger("kthena_py.adapters.engine")


class EngineCallFailed(Exception):
    """A load or unload that did not succeed; ``str()`` is the engine's message."""


class AdapterEngine(Protocol):
    """What the reconciler calls on a pod."""

    async def load(self, ip: str, endpoint: LoadEndpoint, adapter: Adapter) -> None:
        """Load ``adapter`` (raises :class:`EngineCallFailed`)."""
        ...

    async def unload(self, ip: str, endpoint: LoadEndpoint, name: str) -> None:
        """Unload the adapter ``name`` (raises :class:`EngineCallFailed`)."""
        ...

    async def inventory(self, ip: str, port: int) -> dict[str, str] | None:
        """The adapters the engine lists (name -> root), ``None`` when it cannot be read."""
        ...


def _url(ip: str, port: int, path: str) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}{path}"


def _message(status: int, text: str) -> str:
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value:
                return value
    text = text.strip()
    return text[:300] if text else f"HTTP {status}"


class HttpAdapterEngine:
    """Calls the pods' load endpoints over HTTP (see the module docstring)."""

    def __init__(self, *, load_timeout: float = 300.0, call_timeout: float = 10.0) -> None:
        self.load_timeout = load_timeout
        """Seconds a load may take (the sidecar downloads first)."""
        self._load_timeout = aiohttp.ClientTimeout(total=load_timeout)
        self._call_timeout = aiohttp.ClientTimeout(total=call_timeout)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def _post(self, url: str, body: dict[str, str], timeout: aiohttp.ClientTimeout) -> None:
        try:
            async with self._http().post(url, json=body, timeout=timeout) as response:
                text = await response.text()
                if response.status // 100 != 2:
                    raise EngineCallFailed(_message(response.status, text))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EngineCallFailed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc

    async def load(self, ip: str, endpoint: LoadEndpoint, adapter: Adapter) -> None:
        """See :meth:`AdapterEngine.load`."""
        await self._post(_url(ip, endpoint.port, LOAD_PATH), load_body(adapter, endpoint), self._load_timeout)

    async def unload(self, ip: str, endpoint: LoadEndpoint, name: str) -> None:
        """See :meth:`AdapterEngine.unload`."""
        await self._post(_url(ip, endpoint.port, UNLOAD_PATH), unload_body(name), self._call_timeout)

    async def inventory(self, ip: str, port: int) -> dict[str, str] | None:
        """See :meth:`AdapterEngine.inventory`."""
        try:
            async with self._http().get(_url(ip, port, MODELS_PATH), timeout=self._call_timeout) as response:
                if response.status != 200:
                    return None
                body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.debug("adapter inventory read failed", ip=ip, port=port, error=str(exc))
            return None
        data = body.get("data") if isinstance(body, dict) else None
        found: dict[str, str] = {}
        for entry in data if isinstance(data, list) else []:
            if isinstance(entry, dict) and entry.get("parent") and isinstance(entry.get("id"), str):
                found[entry["id"]] = str(entry.get("root") or "")
        return found

    async def close(self) -> None:
        """Close the session (a later call opens a new one); the manager calls this when it stops."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
