"""The client's two lanes: which requests go first, and that they do while a burst holds every other slot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kthena_py.kube import KubeClient
from kthena_py.kube.lanes import bulk_slots, priority_request
from kthena_py.kube.metrics import REST_CLIENT_WAIT

STATUS = "/apis/workload.serving.volcano.sh/v1alpha1/namespaces/ns/modelservings/a/status"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kthena-system/leases/kthena-py-controller-manager"
PODS = "/api/v1/namespaces/ns/pods"
EVENTS = "/api/v1/namespaces/ns/events"


@pytest.mark.parametrize(
    ("path", "priority"),
    [
        (STATUS, True),
        ("/api/v1/namespaces/ns/pods/p/status", True),
        (LEASE, True),
        ("/apis/coordination.k8s.io/v1/leases", True),
        ("/api/v1/namespaces/status", False),  # the Namespace object named "status", not a subresource
        ("/api/v1/namespaces/ns/status", True),  # the Namespace's status subresource
        ("/api/v1/namespaces/status/pods", False),  # pods in a namespace named "status"
        ("/api/v1/namespaces/ns/pods/status", False),  # a pod named "status"
        (PODS, False),
        ("/api/v1/namespaces/ns/pods/p", False),
        ("/apis/workload.serving.volcano.sh/v1alpha1/namespaces/ns/modelservings/a/scale", False),
        (EVENTS, False),
        ("/version", False),
        ("/apis/workload.serving.volcano.sh/v1alpha1", False),
    ],
)
def test_which_requests_go_first(path: str, priority: bool) -> None:
    assert priority_request(path) is priority


# -- the client against a loopback server --------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def api_server(
    release: asyncio.Event, arrived: list[str], held: asyncio.Event | None = None, hold: int = 0
) -> AsyncIterator[int]:
    """A loopback HTTP server: ``POST`` to pods answers once ``release`` is set, everything else at once;
    ``held`` is set once ``hold`` pod requests are waiting."""

    async def pods(request: web.Request) -> web.Response:
        arrived.append(request.path)
        if held is not None and len(arrived) >= hold:
            held.set()
        await release.wait()
        return web.json_response({"kind": "Pod"})

    async def other(request: web.Request) -> web.Response:
        arrived.append(request.path)
        return web.json_response({"kind": "Answer", "path": request.path})

    app = web.Application()
    app.router.add_post(PODS, pods)
    app.router.add_route("*", "/{tail:.*}", other)
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


def waits_observed() -> float:
    return sum(s.value for m in REST_CLIENT_WAIT.collect() for s in m.samples if s.name.endswith("_count"))


async def test_status_and_lease_requests_are_answered_while_a_burst_holds_every_other_slot(tmp_path: Path) -> None:
    release, arrived, held = asyncio.Event(), [], asyncio.Event()
    pool = 16
    slots = bulk_slots(pool)
    async with api_server(release, arrived, held, slots) as port:
        client = await KubeClient.from_kubeconfig(kubeconfig(tmp_path, port), qps_pool=pool)
        try:
            waits_before = waits_observed()
            burst = [asyncio.create_task(client.request("POST", PODS, body={})) for _ in range(3 * pool)]
            await asyncio.wait_for(held.wait(), 10)
            await asyncio.sleep(0.2)
            # Only the bulk slots reached the server; the rest of the burst waits on the client...
            assert len(arrived) == slots
            # ...and another ordinary request waits behind it,
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.request("GET", "/api/v1/namespaces/ns/pods/p"), 0.3)
            # while status writes and lease renewals go through at once, several at a time.
            answers = await asyncio.wait_for(
                asyncio.gather(
                    *(client.request("PATCH", STATUS, body={}) for _ in range(3)),
                    client.request("PUT", LEASE, body={}),
                ),
                10,
            )
            assert [a["path"] for a in answers] == [STATUS] * 3 + [LEASE]
            assert not any(t.done() for t in burst)
            release.set()
            assert [a["kind"] for a in await asyncio.gather(*burst)] == ["Pod"] * (3 * pool)
            assert waits_observed() - waits_before >= 3 * pool  # every bulk request's wait was observed
        finally:
            await client.close()


async def test_a_small_pool_keeps_at_least_one_bulk_slot(tmp_path: Path) -> None:
    release, arrived = asyncio.Event(), []
    release.set()
    async with api_server(release, arrived) as port:
        client = await KubeClient.from_kubeconfig(kubeconfig(tmp_path, port), qps_pool=1)
        try:
            results = await asyncio.gather(*(client.request("POST", PODS, body={}) for _ in range(3)))
            assert [r["kind"] for r in results] == ["Pod"] * 3
        finally:
            await client.close()


async def test_request_bodies_reach_the_server_as_the_same_json(tmp_path: Path) -> None:
    received: list[object] = []

    async def echo(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.json_response({"kind": "Pod"})

    app = web.Application()
    app.router.add_post(PODS, echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    body = {"metadata": {"name": "p", "labels": {"ü": "ß"}}, "spec": {"n": 1, "f": 0.5, "ok": True, "none": None}}
    try:
        client = await KubeClient.from_kubeconfig(kubeconfig(tmp_path, port))
        try:
            await client.request("POST", PODS, body=body)
        finally:
            await client.close()
    finally:
        await runner.cleanup()
    assert received == [body]


@pytest.mark.parametrize(("pool", "slots"), [(100, 92), (16, 12), (8, 6), (4, 3), (2, 2), (1, 1)])
def test_a_pool_keeps_eight_connections_or_a_quarter_for_the_priority_lane(pool: int, slots: int) -> None:
    assert bulk_slots(pool) == slots
