"""Benchmark: the manager's CPU per API request against the floor of a bare connection (printed, never asserted).

``bench/apiserver_cost.py`` prices a write for the client as well as the server. This asks how much of the client's
price is the HTTP stack's: the same Event creates are sent, in alternating rounds, by

* ``KubeClient``: the manager's client (kubernetes-asyncio's request layer over aiohttp's pooled sessions), and
* ``bare``: the floor, 16 kept-alive TLS connections from asyncio's own streams, each writing a request's bytes and
  reading the answer's status line, headers and body (``Content-Length`` or chunked), then decoding the body as
  the manager does. No pool, no timeouts, no metrics, no retries, no error mapping: what no real client can skip.

Both run on the manager's event loop (uvloop when importable), 16 requests at a time, against one fresh envtest tier
(etcd and kube-apiserver over TLS, client-certificate auth). The figure is this process's CPU per request (it does
nothing else); the ratio ``KubeClient / bare`` says what a leaner HTTP client could at most save per request.

Usage: python bench/request_floor.py [--requests N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic_core import from_json, to_json

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import NAMESPACES
from kthena_py.testing.controlplane import EnvTest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apiserver_cost import (  # the same Event create both price, on the same loop and concurrency
    CONCURRENCY,
    LOOP_FACTORY,
    LOOP_NAME,
    NAMESPACE,
    Writes,
    event,
    timed,
)


class BareConnection:
    """One kept-alive TLS connection that sends Event creates as raw HTTP/1.1."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader = reader
        self.writer = writer
        self.head = (
            f"POST /api/v1/namespaces/{NAMESPACE}/events HTTP/1.1\r\nHost: {host}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
        ).encode()

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        data = to_json(body)
        self.writer.write(self.head + b"Content-Length: %d\r\n\r\n" % len(data) + data)
        status = await self.reader.readuntil(b"\r\n")
        headers = await self.reader.readuntil(b"\r\n\r\n")
        code = int(status.split(b" ", 2)[1])
        lowered = headers.lower()
        if b"transfer-encoding: chunked" in lowered:
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(chunk[:-2])
            payload = b"".join(chunks)
        else:
            start = lowered.index(b"content-length:") + len(b"content-length:")
            payload = await self.reader.readexactly(int(lowered[start : lowered.index(b"\r\n", start)]))
        if code >= 300:
            raise RuntimeError(f"HTTP {code}: {payload[:200]!r}")
        answer: dict[str, Any] = from_json(payload)
        return answer


async def bare_connections(env: EnvTest) -> list[BareConnection]:
    """CONCURRENCY TLS connections to the API server, as the admin's client certificate."""
    url = urlsplit(env.server)
    ctx = ssl.create_default_context(cafile=str(env.pki.serving_ca_cert))
    ctx.load_cert_chain(str(env.pki.admin.cert), str(env.pki.admin.key))
    conns = []
    for _ in range(CONCURRENCY):
        reader, writer = await asyncio.open_connection(url.hostname, url.port, ssl=ctx)
        conns.append(BareConnection(reader, writer, url.netloc))
    return conns


async def bare_round(conns: list[BareConnection], serial: itertools.count[int], n: int) -> float:
    """This process's CPU milliseconds per Event create sent over the bare connections."""
    left = iter(range(n))

    async def drain(conn: BareConnection) -> None:
        for _ in left:
            await conn.create(event(next(serial)))

    before = time.process_time()
    await asyncio.gather(*(drain(c) for c in conns))
    return (time.process_time() - before) * 1000 / n


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000, help="Event creates per side per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, EnvTest(d, crds=[]) as env:
        client = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        conns = await bare_connections(env)
        writes = Writes(client)
        serial = writes.serial  # one counter for both sides: every Event gets a name of its own

        async def kube_client_round(n: int) -> float:
            return (await timed([], n, writes.event_create))[1]  # this process's CPU ms per write

        try:
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await kube_client_round(300)  # warm-up: both sides' connections and caches
            await bare_round(conns, serial, 300)
            sides: dict[str, list[float]] = {"KubeClient": [], "bare": []}
            ratios: list[float] = []
            for r in range(args.rounds):
                if r % 2 == 0:
                    k8s = await kube_client_round(args.requests)
                    bare = await bare_round(conns, serial, args.requests)
                else:
                    bare = await bare_round(conns, serial, args.requests)
                    k8s = await kube_client_round(args.requests)
                sides["KubeClient"].append(k8s)
                sides["bare"].append(bare)
                ratios.append(k8s / bare)
                print(f"round {r + 1}: KubeClient {k8s:.3f} ms, bare {bare:.3f} ms per request ({k8s / bare:.2f}x)")
            print(
                f"client CPU per Event create, median of {args.rounds} rounds of {args.requests} "
                f"(on {LOOP_NAME}, {CONCURRENCY} at a time):"
            )
            for side, values in sides.items():
                print(f"  {side:<12} {statistics.median(values):.3f} ms")
            paired = " ".join(f"{x:.2f}" for x in ratios)
            print(f"  KubeClient / bare: {statistics.median(ratios):.2f}x (paired: {paired})")
        finally:
            for c in conns:
                c.writer.close()
            await client.close()


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=LOOP_FACTORY) as runner:
        runner.run(main())
