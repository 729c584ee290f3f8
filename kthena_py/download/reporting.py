"""Showing progress: a bar on a terminal, structured log lines otherwise, and ``GET /progress``.

Guarantees:

* on a terminal (stderr is a TTY) a ``tqdm`` bar shows bytes done of total, rate and ETA; otherwise one
  ``progress`` log line at most every :data:`LOG_INTERVAL` seconds, plus one ``file complete`` line per file;
* ``--progress-address HOST:PORT`` serves the current :class:`~.progress.Snapshot` as JSON on
  ``GET /progress`` for as long as the run lasts (the address is bound before the first byte is fetched);
* nothing here sees a credential;
* aiohttp (the progress server's) is imported only when a progress address is given, so a run without one,
  and in particular a cached second run, does not pay for loading it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

import structlog

from .progress import Progress, should_log, snapshot

if TYPE_CHECKING:
    from aiohttp import web

LOG_INTERVAL = 5.0
TICK = 0.5
log = structlog.get_logger("kthena_py.download")


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``:PORT`` = all interfaces).

    Raises:
        ValueError: Not such an address.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"invalid address {address!r}: want HOST:PORT")
    return (host.strip("[]") or "0.0.0.0", int(port))


class Reporter:
    """Samples the progress every tick and shows it."""

    def __init__(self, progress: Progress, *, tty: bool | None = None) -> None:
        self.progress = progress
        self._tty = sys.stderr.isatty() if tty is None else tty
        self._bar: Any = None
        self._last_log: float | None = None
        self._task: asyncio.Task[None] | None = None

    def _tick(self) -> None:
        now = time.monotonic()
        self.progress.record(now)
        snap = snapshot(self.progress)
        if self._tty:
            if self._bar is None and snap.bytes_total is not None:
                from tqdm import tqdm

                self._bar = tqdm(total=snap.bytes_total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr)
            if self._bar is not None:
                self._bar.n = snap.bytes_done
                self._bar.set_postfix_str(f"files {snap.files_done}/{snap.files_total}", refresh=False)
                self._bar.refresh()
        elif snap.bytes_done and should_log(self._last_log, now, LOG_INTERVAL):
            self._last_log = now
            log.info("progress", **snap.to_json())

    async def _loop(self) -> None:
        while True:
            self._tick()
            await asyncio.sleep(TICK)

    def start(self) -> None:
        """Start sampling."""
        self._task = asyncio.ensure_future(self._loop())

    def file_done(self, name: str, size: int, sha256: str, *, skipped: bool = False) -> None:
        """Count a finished file and say so."""
        self.progress.files_done += 1
        if not self._tty:
            log.info(
                "file skipped (verified earlier)" if skipped else "file complete",
                file=name,
                size=size,
                sha256=sha256,
                filesDone=self.progress.files_done,
                filesTotal=self.progress.files_total,
            )

    async def stop(self) -> None:
        """Stop sampling; take a last sample."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._tick()
        if self._bar is not None:
            self._bar.close()


class ProgressServer:
    """``GET /progress`` on one address."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._runner: web.AppRunner | None = None
        self.bound: tuple[str, int] | None = None

    async def _get(self, _: web.Request) -> web.Response:
        from aiohttp import web

        self._progress.record(time.monotonic())
        return web.json_response(snapshot(self._progress).to_json())

    async def start(self, address: str) -> None:
        """Bind and serve."""
        from aiohttp import web

        host, port = parse_address(address)
        app = web.Application()
        app.router.add_get("/progress", self._get)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound = sockets[0].getsockname()[:2] if sockets else (host, port)

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()
