"""Progress of running downloads, scraped from the download pods (``GET http://<podIP>:<port>/progress``).

Guarantees: a scrape never fails a reconcile and never blocks it for long: each takes at most the configured
timeout, and any failure (refused, timed out, not JSON, not a progress report) just leaves that Job's progress
unset. Scrapes of several pods run concurrently. :class:`ProgressSource` is the seam tests replace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp
import structlog

from kthena_py.api.modelcache import DownloadProgress
from kthena_py.plan.modelcache import parse_progress

__all__ = ["HttpProgress", "ProgressSource", "scrape_all"]

log = structlog.get_logger("kthena_py.modelcache.progress")


class ProgressSource(Protocol):
    """Reads one download pod's progress report (decoded JSON), or ``None``."""

    async def fetch(self, ip: str, port: int) -> Any:
        """Return the decoded ``/progress`` body of the pod at ``ip``, or ``None`` when it cannot be read."""
        ...


class HttpProgress:
    """Scrapes over HTTP with one shared session (created on first use)."""

    def __init__(self, timeout: float = 2.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, ip: str, port: int) -> Any:
        """See :meth:`ProgressSource.fetch`."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        host = f"[{ip}]" if ":" in ip else ip
        try:
            async with self._session.get(f"http://{host}:{port}/progress") as response:
                if response.status != 200:
                    return None
                return await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.debug("progress scrape failed", ip=ip, error=str(exc))
            return None

    async def close(self) -> None:
        """Close the session (a later scrape opens a new one); the manager calls this when it stops."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


async def scrape_all(source: ProgressSource, targets: Mapping[str, str], port: int) -> dict[str, DownloadProgress]:
    """Scrape every ``{job name: pod IP}`` target; return the progress of those that answered."""
    names = sorted(targets)

    async def one(name: str) -> Any:
        try:
            return await source.fetch(targets[name], port)
        except Exception as exc:  # a scrape never fails the reconcile
            log.debug("progress scrape failed", job=name, error=str(exc))
            return None

    bodies = await asyncio.gather(*(one(name) for name in names))
    found = {name: parse_progress(body) for name, body in zip(names, bodies, strict=True)}
    return {name: progress for name, progress in found.items() if progress is not None}
