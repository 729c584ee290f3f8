"""Instant queries: Kthena's accepted answers and error messages (autoscaler.md §6.5)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from kthena_py.controllers.autoscaling.prometheus import PrometheusError, instant_query, parse_query_result


def vector(*values: str) -> dict[str, object]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, v]} for v in values]},
    }


def test_answers() -> None:
    assert (
        parse_query_result({"status": "success", "data": {"resultType": "scalar", "result": [1, "42.5"]}}, "q") == 42.5
    )
    assert parse_query_result(vector("7"), "q") == 7.0
    for body in (vector(), vector("1", "2")):
        with pytest.raises(PrometheusError, match="single sample vector"):
            parse_query_result(body, "q")
    with pytest.raises(PrometheusError, match="unsupported prometheus query result type matrix"):
        parse_query_result({"status": "success", "data": {"resultType": "matrix", "result": []}}, "q")
    with pytest.raises(PrometheusError, match="non-finite value NaN for target q"):
        parse_query_result(vector("NaN"), "q")
    with pytest.raises(PrometheusError, match="query failed: bad_data: parse error"):
        parse_query_result({"status": "error", "errorType": "bad_data", "error": "parse error"}, "q")


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def server() -> AsyncIterator[str]:
    release = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        query = request.query["query"]
        if query == "hang":
            await release.wait()
        if query == "bad":
            return web.json_response({"status": "error", "errorType": "bad_data", "error": "parse"}, status=400)
        assert float(request.query["time"]) > 0
        return web.json_response(vector("3"))

    app = web.Application()
    app.router.add_get("/prefix/api/v1/query", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/prefix/"
    release.set()
    await runner.cleanup()


async def test_queries(server: str, session: aiohttp.ClientSession) -> None:
    assert await instant_query(session, server, "up", at=1000.0) == 3.0
    with pytest.raises(PrometheusError, match="HTTP 400"):
        await instant_query(session, server, "bad", at=1000.0)
    with pytest.raises(PrometheusError, match="timed out"):
        await instant_query(session, server, "hang", at=1000.0, timeout=0.2)
    with pytest.raises(PrometheusError, match="request failed"):
        await instant_query(session, "http://127.0.0.1:1", "up", at=1000.0)
    with pytest.raises(PrometheusError, match="unsupported prometheus serverURL scheme"):
        await instant_query(session, "ftp://127.0.0.1", "up", at=1000.0)
