"""The idle check: scrape a resident's Ready entry pods and add up its engine's request gauges.

Guarantees:

* Each Ready entry pod is scraped at ``http://<podIP>:<port><path>`` (port: the pool's ``idleCheck.port``, else the
  member's activator port, :func:`kthena_py.plan.activator.targets.port_of`), bounded by ``timeout`` seconds, the
  pods of one pass concurrently. The body is parsed with the autoscaler's exposition parser
  (:func:`kthena_py.plan.autoscaling.parse_exposition`), so the idle check reads exactly what the autoscaler reads.
* A pod's load is the sum of the configured gauges (``vllm:num_requests_running`` + ``..._waiting`` by
  default). A gauge missing from the page, a non-2xx answer, a timeout or an unparsable body is a failed probe:
  :func:`~kthena_py.plan.modelpool.idle.member_verdict` never takes it as idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import ip_address
from typing import Any

import aiohttp

from kthena_py.kube.objects import KubeObject, name_of
from kthena_py.plan.activator.targets import port_of
from kthena_py.plan.autoscaling import ExpositionError, Scalar, find_family, parse_exposition
from kthena_py.plan.modelpool.idle import IdleResult, member_verdict
from kthena_py.plan.modelpool.view import PoolSpec

from .observe import ready_entry_pods

__all__ = ["HttpIdleProber", "IdleProber", "load_of"]

MAX_BODY = 4 << 20


def load_of(text: str, metrics: Sequence[str]) -> float | str:
    """The sum of ``metrics`` on a scraped page, or why it cannot be read."""
    try:
        families = parse_exposition(text, metrics)
    except ExpositionError as exc:
        return f"unparsable metrics: {exc}"
    total = 0.0
    for name in metrics:
        family = find_family(families, name)
        if not isinstance(family, Scalar):
            return f"metric {name} not exposed"
        total += family.value
    return total


def _url(ip: str, port: int, path: str) -> str:
    host = f"[{ip}]" if ip_address(ip).version == 6 else ip
    return f"http://{host}:{port}{path}"


class IdleProber:
    """What the reconciler asks: the idle verdict of one member (tests pass a fake)."""

    async def verdict(self, spec: PoolSpec, serving: KubeObject, pods: Iterable[KubeObject]) -> IdleResult:
        """The idle verdict of the member served by ``serving`` with ``pods``."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections."""


class HttpIdleProber(IdleProber):
    """Scrapes over one shared connection pool, each scrape bounded by ``timeout`` seconds."""

    def __init__(self, *, timeout: float = 3.0) -> None:
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None),
                headers={"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1", "User-Agent": "kthena-py-modelpool"},
            )
        return self._session

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _scrape(self, url: str, metrics: Sequence[str]) -> float | str:
        try:
            async with asyncio.timeout(self.timeout), self._client().get(url) as resp:
                if not 200 <= resp.status <= 299:
                    return f"{url}: HTTP {resp.status}"
                body = await resp.content.read(MAX_BODY + 1)
                if len(body) > MAX_BODY:
                    return f"{url}: body larger than {MAX_BODY} bytes"
                text = body.decode(resp.charset or "utf-8", errors="replace")
        except TimeoutError:
            return f"{url}: timed out after {self.timeout:g}s"
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return f"{url}: {type(exc).__name__}: {exc}"
        load = load_of(text, metrics)
        return f"{url}: {load}" if isinstance(load, str) else load

    async def verdict(self, spec: PoolSpec, serving: KubeObject, pods: Iterable[KubeObject]) -> IdleResult:
        """Scrape the Ready entry pods of ``serving`` and judge (see the module docstring)."""
        port = spec.idle_port or port_of(serving)
        ready = ready_entry_pods(pods)
        loads = await asyncio.gather(
            *(self._scrape(_url(_ip(p), port, spec.idle_path), spec.idle_metrics) for p in ready)
        )
        probes: Mapping[str, float | str] = {name_of(p): load for p, load in zip(ready, loads, strict=True)}
        return member_verdict(probes)


def _ip(pod: KubeObject) -> str:
    status: Any = pod.get("status") or {}
    return str(status.get("podIP"))
