"""A loopback TCP proxy whose connections a test can cut or stall, to simulate network failures.

Guarantees: listens on 127.0.0.1 only. Three failure modes:

* :meth:`TcpProxy.drop_connections` closes every open connection at once (both directions);
* while :attr:`TcpProxy.refusing` is set, new connections are closed immediately, as if the server
  were unreachable;
* :meth:`TcpProxy.stall` holds every byte in both directions while keeping every connection open, and
  accepts new connections without forwarding anything on them: a silent partition, where requests
  hang instead of failing (no RST, no FIN; the kernel still acknowledges, so only application-level
  timeouts can notice). :meth:`TcpProxy.resume` forwards what was held, like a healed partition.
  ``stall(new_connections=False)`` stalls only the connections open now and serves new ones: a
  connection silently dropped on the way (a NAT or firewall that forgot it) while the server is fine.

:func:`proxy_kubeconfig` starts a proxy in front of a kubeconfig's API server and writes a copy of the
kubeconfig that goes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import yaml


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.refusing = False
        self.connections_accepted = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._connections: set[asyncio.Event] = set()

    @property
    def port(self) -> int:
        """The listening port (after :meth:`start`)."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def stalled(self) -> bool:
        """Whether traffic is being held (see :meth:`stall`)."""
        return not self._flowing.is_set()

    def stall(self, *, new_connections: bool = True) -> None:
        """Hold the traffic of every open connection (and of new ones, unless ``new_connections`` is False)."""
        for flowing in self._connections:
            flowing.clear()
        if new_connections:
            self._flowing.clear()

    def resume(self) -> None:
        """Forward the held traffic and everything after it."""
        self._flowing.set()
        for flowing in self._connections:
            flowing.set()

    async def start(self) -> TcpProxy:
        """Start listening on an ephemeral loopback port."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        self.connections_accepted += 1
        self._writers.add(writer)
        await self._flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._close(writer)
            return
        self._writers.add(up_writer)
        flowing = asyncio.Event()
        flowing.set()
        self._connections.add(flowing)
        pipes = [self._pipe(src, dst, flowing) for src, dst in ((reader, up_writer), (up_reader, writer))]
        for pipe in pipes:
            task = asyncio.create_task(pipe)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, flowing: asyncio.Event) -> None:
        try:
            while True:
                await flowing.wait()
                data = await src.read(65536)
                await flowing.wait()  # a stall that began during the read holds this chunk (or EOF) too
                if not data:
                    break
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._close(dst)
            self._connections.discard(flowing)

    def _close(self, writer: asyncio.StreamWriter) -> None:
        self._writers.discard(writer)
        with contextlib.suppress(Exception):
            writer.close()

    def drop_connections(self) -> int:
        """Close every open connection; return how many sockets were closed."""
        writers = list(self._writers)
        for w in writers:
            transport = w.transport
            with contextlib.suppress(Exception):
                transport.abort()
            self._writers.discard(w)
        return len(writers)

    async def stop(self) -> None:
        """Stop listening and drop everything."""
        self.resume()
        self.drop_connections()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def proxy_kubeconfig(kubeconfig: Path, name: str) -> tuple[TcpProxy, Path]:
    """A started proxy to ``kubeconfig``'s API server, and a copy of the kubeconfig that goes through it.

    The copy is ``<name>.kubeconfig`` beside the original, with the same credentials (the proxy forwards TLS
    untouched); only the first cluster's server changes.
    """
    cfg = _read(kubeconfig)
    host, port = cfg["clusters"][0]["cluster"]["server"].removeprefix("https://").rstrip("/").rsplit(":", 1)
    proxy = await TcpProxy(host, int(port)).start()
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    return proxy, _write(kubeconfig.parent / f"{name}.kubeconfig", yaml.safe_dump(cfg))


def _read(path: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = yaml.safe_load(path.read_bytes())
    return cfg


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
