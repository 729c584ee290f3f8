"""What the client puts on the wire, read by a real HTTP server on loopback.

The client sends straight through the ApiClient's aiohttp session: these tests pin that it still sends what
kubernetes-asyncio sent (the bearer token after the refresh hook, the User-Agent, the content type, the JSON body,
an encoded query) and counts every request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.metrics import REST_CLIENT_REQUESTS
from kthena_py.kube.resources import EVENTS, PODS


class Recorder:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append(
            {
                "method": request.method,
                "raw_path": request.raw_path,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": json.loads(body) if body else None,
            }
        )
        if request.path.endswith("/missing"):
            status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "pods missing not found"}
            return web.json_response(status, status=404)
        return web.json_response({"metadata": {"name": "x"}})


@pytest.fixture
async def server() -> AsyncIterator[tuple[Recorder, str]]:
    recorder = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield recorder, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _client(host: str, tokens: list[str]) -> KubeClient:
    conf = Configuration(host=host)
    conf.api_key = {"BearerToken": "initial"}
    conf.api_key_prefix = {"BearerToken": "Bearer"}

    def refresh(c: Configuration) -> None:  # what an exec plugin or a rotated token file does
        c.api_key["BearerToken"] = tokens.pop(0)

    conf.refresh_api_key_hook = refresh
    return KubeClient(ApiClient(configuration=conf), user_agent="kthena-py-test")


async def test_each_request_carries_the_refreshed_token_the_agent_and_its_body(server: tuple[Recorder, str]) -> None:
    recorder, host = server
    client = _client(host, ["t1", "t2", "t3"])
    try:
        before = REST_CLIENT_REQUESTS.labels("200", "POST", host).value
        await client.create(EVENTS, {"metadata": {"name": "e", "namespace": "ns"}, "reason": "R"})
        await client.list(PODS, "ns", label_selector="a=b,c in (d,e)", limit=5)
        await client.patch(PODS, "p", [{"op": "remove", "path": "/x"}], "ns", patch_type="json")
        after = REST_CLIENT_REQUESTS.labels("200", "POST", host).value
    finally:
        await client.close()
    create, listing, patch = recorder.seen
    assert [s["headers"]["Authorization"] for s in recorder.seen] == ["Bearer t1", "Bearer t2", "Bearer t3"]
    assert {s["headers"]["User-Agent"] for s in recorder.seen} == {"kthena-py-test"}
    assert create["method"] == "POST" and create["raw_path"] == "/api/v1/namespaces/ns/events"
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"}, "reason": "R"}
    assert create["body"] == event
    assert create["headers"]["Content-Type"] == "application/json"
    assert listing["method"] == "GET" and listing["body"] is None
    assert listing["query"] == {"labelSelector": "a=b,c in (d,e)", "limit": "5"}
    assert patch["headers"]["Content-Type"] == "application/json-patch+json"
    assert patch["body"] == [{"op": "remove", "path": "/x"}]
    assert after - before == 1


async def test_a_path_outside_the_plain_alphabet_is_percent_encoded(server: tuple[Recorder, str]) -> None:
    recorder, host = server
    client = _client(host, ["t"])
    try:
        await client.get(PODS, "a b%c", "ns")
    finally:
        await client.close()
    assert recorder.seen[0]["raw_path"] == "/api/v1/namespaces/ns/pods/a%20b%25c"


async def test_an_error_answer_is_raised_and_counted_by_its_code(server: tuple[Recorder, str]) -> None:
    _, host = server
    client = _client(host, ["t"])
    try:
        before = REST_CLIENT_REQUESTS.labels("404", "GET", host).value
        with pytest.raises(NotFound):
            await client.get(PODS, "missing", "ns")
        assert REST_CLIENT_REQUESTS.labels("404", "GET", host).value - before == 1
    finally:
        await client.close()
