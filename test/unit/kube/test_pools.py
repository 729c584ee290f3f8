"""The client's priority pool: a status write does not queue behind requests that hold the whole main pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kthena_py.kube import KubeClient
from kthena_py.kube.client import PRIORITY_POOL


@contextlib.asynccontextmanager
async def api_server(release: asyncio.Event) -> AsyncIterator[int]:
    """A loopback HTTP server: ``/slow`` answers once ``release`` is set, everything else at once."""

    async def slow(_: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"kind": "Pod"})

    async def fast(_: web.Request) -> web.Response:
        return web.json_response({"kind": "ModelServing", "status": {}})

    app = web.Application()
    app.router.add_get("/slow", slow)
    app.router.add_route("*", "/fast", fast)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        release.set()
        await runner.cleanup()


def kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t0k3n}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return str(path)


async def test_a_priority_request_goes_through_while_the_main_pool_is_full(tmp_path: Path) -> None:
    release = asyncio.Event()
    async with api_server(release) as port:
        client = await KubeClient.from_kubeconfig(kubeconfig(tmp_path, port), qps_pool=2)
        try:
            assert client._priority_api.configuration.connection_pool_maxsize == PRIORITY_POOL
            held = [asyncio.create_task(client.request("GET", "/slow")) for _ in range(4)]  # 2 sent, 2 queued
            await asyncio.sleep(0.2)
            # The main pool is full: another ordinary request waits for a connection...
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.request("GET", "/fast"), 0.5)
            # ...while a priority one is answered.
            answer = await asyncio.wait_for(client.request("PATCH", "/fast", body={}, priority=True), 30)
            assert answer["kind"] == "ModelServing"
            assert not any(t.done() for t in held)
            release.set()
            assert [a["kind"] for a in await asyncio.gather(*held)] == ["Pod"] * 4
        finally:
            await client.close()


async def test_a_client_around_one_api_client_uses_it_for_everything(tmp_path: Path) -> None:
    release = asyncio.Event()
    release.set()
    async with api_server(release) as port:
        built = await KubeClient.from_kubeconfig(kubeconfig(tmp_path, port))
        single = KubeClient(built._api)
        try:
            assert single._priority_api is None
            assert (await single.request("PATCH", "/fast", body={}, priority=True))["kind"] == "ModelServing"
        finally:
            await built.close()
