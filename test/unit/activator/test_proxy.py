"""The activator against loopback aiohttp engines, over FakeKube (informers watch it as they watch a cluster)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kthena_py.activator import Activator, ActivatorOptions
from kthena_py.activator.resources import MODELROUTES, MODELSERVERS, MODELSERVINGS, PODS
from kthena_py.kube.errors import Conflict, ServerError
from kthena_py.kube.resources import ResourceType
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.fake.faults import refuse
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import (
    ACTIVATOR_FIELD_MANAGER,
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
    ENTRY_VALUE,
    SERVING_ENTRY,
    SERVING_NAME,
)

NS = "ns"


class Engine:
    """A loopback OpenAI-ish engine that records bodies and can stream."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.streamed = 0
        self.unavailable = 0
        """Answer this many next requests 503 (an engine still loading)."""
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.bodies.append(body)
        if self.unavailable:
            self.unavailable -= 1
            return web.Response(status=503, text="loading")
        if not json.loads(body).get("stream"):
            return web.json_response({"echo": json.loads(body)})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for i in range(50):
                await response.write(f"data: {i}\n\n".encode())
                self.streamed += 1
                await self.release.wait()
                self.release.clear()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        await response.write_eof()
        return response

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


def modelserving(name: str, port: int, replicas: int = 0, opted_in: bool = True, budget: str = "5s") -> dict[str, Any]:
    annotations = {ACTIVATOR_PORT: str(port), ACTIVATOR_HOLD_BUDGET: budget}
    if opted_in:
        annotations[ACTIVATOR_SCALE_FROM_ZERO] = "true"
    return {
        "apiVersion": MODELSERVINGS.api_version,
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {"replicas": replicas, "template": {"roles": []}},
    }


def entry_pod(ms: str, name: str, *, ready: bool = True, terminating: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": NS, "labels": {SERVING_NAME: ms, SERVING_ENTRY: ENTRY_VALUE}}
    if terminating:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"containers": [{"name": "engine", "image": "engine:1"}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def scale_writes(kube: FakeKube) -> list[Any]:
    return [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]


@asynccontextmanager
async def scene(**ms_kw: Any) -> AsyncIterator[tuple[FakeKube, Engine, Activator, str]]:
    kube = FakeKube()
    engine = Engine()
    await engine.start()
    kube.put(MODELSERVINGS, modelserving("llm", engine.port, **ms_kw))
    activator = Activator(
        ActivatorOptions(
            listen="127.0.0.1:0", metrics_bind_address="0", health_probe_bind_address="127.0.0.1:0", max_body_bytes=1024
        ),
        client=kube,
    )
    await activator.start()
    assert await activator.wait_for_sync(5)
    try:
        yield kube, engine, activator, f"http://127.0.0.1:{activator.port}"
    finally:
        await activator.stop()
        await engine.stop()


async def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    await eventually(lambda: predicate() or None, timeout=timeout, interval=0.01)


def put(kube: FakeKube, rt: ResourceType, obj: dict[str, Any]) -> None:
    kube.put(rt, obj)


async def test_cold_start_holds_many_requests_with_one_scale_write() -> None:
    async with scene() as (kube, engine, _activator, url), aiohttp.ClientSession() as http:
        bodies = [{"model": "llm", "messages": [{"role": "user", "content": f"hi {i}"}]} for i in range(20)]
        calls = [asyncio.create_task(http.post(url + "/v1/chat/completions", json=b)) for b in bodies]
        await wait_for(lambda: kube.store.get(MODELSERVINGS, "llm", NS)["spec"]["replicas"] == 1)
        await asyncio.sleep(0.2)
        assert not any(c.done() for c in calls)  # held: no backend yet
        writes = scale_writes(kube)
        assert len(writes) == 1
        assert writes[0].options["field_manager"] == ACTIVATOR_FIELD_MANAGER
        assert writes[0].body["metadata"]["resourceVersion"]
        put(kube, PODS, entry_pod("llm", "llm-0-r-0-0", ready=False))
        await asyncio.sleep(0.2)
        assert not any(c.done() for c in calls)  # Running but not Ready: still held
        put(kube, PODS, entry_pod("llm", "llm-0-r-0-0"))
        answers = await asyncio.gather(*calls)
        assert [a.status for a in answers] == [200] * 20
        echoed = sorted([json.dumps((await a.json())["echo"], sort_keys=True) for a in answers])
        assert echoed == sorted(json.dumps(b, sort_keys=True) for b in bodies)
        assert sorted(engine.bodies) == sorted(json.dumps(b).encode() for b in bodies)
        assert len(scale_writes(kube)) == 1


async def test_not_opted_in_is_503_at_once_without_a_write() -> None:
    async with scene(opted_in=False) as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/chat/completions", json={"model": "llm"}) as answer:
            assert answer.status == 503
            assert answer.headers["Retry-After"]
            error = (await answer.json())["error"]
            assert "not opted in" in error["message"] and error["type"] == "service_unavailable"
        assert scale_writes(kube) == []


async def test_budget_spent_is_503_with_the_reason() -> None:
    async with scene(budget="300ms") as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/completions", json={"model": "llm", "prompt": "x"}) as answer:
            assert answer.status == 503
            assert int(answer.headers["Retry-After"]) > 0
            assert "no Ready backend after 0.3s: no pod exists yet" in (await answer.json())["error"]["message"]
        assert len(scale_writes(kube)) == 1


async def test_held_while_scaling_down_then_served_without_a_write() -> None:
    async with scene(replicas=1) as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        put(kube, PODS, entry_pod("llm", "old", terminating=True))
        call = asyncio.create_task(http.post(url + "/v1/chat/completions", json={"model": "llm"}))
        await asyncio.sleep(0.3)
        assert not call.done()
        put(kube, PODS, entry_pod("llm", "new"))
        answer = await call
        assert answer.status == 200
        assert scale_writes(kube) == []


@pytest.mark.parametrize(
    ("error", "times"),
    [(Conflict(409, "Conflict", "modified"), 3), (ServerError(500, "InternalError", "etcd"), 2)],
    ids=["conflicts", "errors"],
)
async def test_a_wake_up_left_at_zero_is_tried_again_while_requests_are_held(error: Any, times: int) -> None:
    # Writers that keep changing the ModelServing (the marker's annotation, the manager's status) can refuse every
    # attempt of one wake-up, and nothing else may change it afterwards: the held requests must not just wait out
    # their budget.
    async with scene(budget="10s") as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        refusal = refuse(error, "patch", MODELSERVINGS, subresource="scale", times=times)
        kube.intercept(refusal)
        call = asyncio.create_task(http.post(url + "/v1/chat/completions", json={"model": "llm"}))
        await wait_for(lambda: refusal.times is not None and len(refusal.refused) == refusal.times)
        await wait_for(lambda: kube.store.get(MODELSERVINGS, "llm", NS)["spec"]["replicas"] == 1, timeout=3)
        assert not call.done()
        put(kube, PODS, entry_pod("llm", "p"))
        assert (await call).status == 200
        assert len(scale_writes(kube)) == refusal.times + 1  # every refused attempt, then the one that took


async def test_no_request_held_means_no_write_after_a_failed_wake_up() -> None:
    async with scene(budget="200ms") as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        kube.intercept(refuse(ServerError(500, "InternalError", "etcd"), "patch", MODELSERVINGS))
        async with http.post(url + "/v1/chat/completions", json={"model": "llm"}) as answer:
            assert answer.status == 503
        tried = len(scale_writes(kube))
        await asyncio.sleep(1.0)  # several retry delays
        assert len(scale_writes(kube)) == tried
        assert kube.store.get(MODELSERVINGS, "llm", NS)["spec"]["replicas"] == 0


async def test_two_activators_make_one_write() -> None:
    async with scene() as (kube, _engine, first, _url), aiohttp.ClientSession() as http:
        second = Activator(
            ActivatorOptions(listen="127.0.0.1:0", metrics_bind_address="0", health_probe_bind_address="0"), client=kube
        )
        await second.start()
        try:
            assert await second.wait_for_sync(5)
            kube.hold()  # neither sees the other's write before its own
            calls = [
                asyncio.create_task(http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "llm"}))
                for port in (first.port, second.port)
            ]
            await wait_for(lambda: len(scale_writes(kube)) >= 2 or all(c.done() for c in calls), 2)
            await asyncio.sleep(0.2)
            kube.release()
            put(kube, PODS, entry_pod("llm", "p"))
            assert [(await c).status for c in calls] == [200, 200]
            written = [c for c in scale_writes(kube)]
            assert len(written) == 2  # the second was refused by its resourceVersion precondition
            assert kube.store.get(MODELSERVINGS, "llm", NS)["spec"]["replicas"] == 1
            assert int(kube.store.get(MODELSERVINGS, "llm", NS)["metadata"]["generation"]) == 2
        finally:
            await second.stop()


async def test_streaming_passes_chunks_as_they_come_and_disconnect_cancels() -> None:
    async with scene(replicas=1) as (_kube, engine, _a, url):
        put(_kube, PODS, entry_pod("llm", "p"))
        http = aiohttp.ClientSession()
        try:
            response = await http.post(url + "/v1/chat/completions", json={"model": "llm", "stream": True})
            assert response.status == 200
            for i in range(3):
                line = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 2)
                assert line == f"data: {i}\n\n".encode()
                assert engine.streamed == i + 1  # the engine has not sent more than the client has
                engine.release.set()
            response.close()
        finally:
            await http.close()
        await asyncio.wait_for(engine.cancelled.wait(), 5)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not json", 400, "invalid_json"),
        (b"{}", 400, "missing_model"),
        (b'{"model": "nope"}', 404, "model_not_found"),
        (b'{"model": "llm", "pad": "' + b"x" * 2000 + b'"}', 413, "body_too_large"),
        (b"", 404, "not_found"),
    ],
)
async def test_bad_input_is_an_openai_error(body: bytes, status: int, code: str) -> None:
    async with scene() as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/chat/completions", data=body) as answer:
            assert answer.status == status
            assert (await answer.json())["error"]["code"] == code
        async with http.get(url + "/v1/models") as answer:
            assert [m["id"] for m in (await answer.json())["data"]] == ["llm"]
        assert scale_writes(kube) == []


async def test_a_refused_connection_is_retried_on_another_pod() -> None:
    async with scene(replicas=1) as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        dead = entry_pod("llm", "a-dead")
        dead["status"]["podIP"] = "127.0.0.2"  # nothing listens there
        put(kube, PODS, dead)
        put(kube, PODS, entry_pod("llm", "b-live"))
        await asyncio.sleep(0.1)
        async with http.post(url + "/v1/chat/completions", json={"model": "llm"}) as answer:
            assert answer.status == 200


async def test_a_kthena_modelroute_name_routes_to_its_modelserving() -> None:
    async with scene(replicas=1) as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        ms_obj = kube.store.get(MODELSERVINGS, "llm", NS)
        ms_obj["spec"]["template"]["roles"] = [
            {"name": "r", "entryTemplate": {"metadata": {"labels": {"model-uid": "u1"}}, "spec": {"containers": []}}}
        ]
        kube.put(MODELSERVINGS, ms_obj)
        kube.put(
            MODELSERVERS,
            {
                "metadata": {"name": "s", "namespace": NS},
                "spec": {"workloadSelector": {"matchLabels": {"model-uid": "u1"}}},
            },
        )
        kube.put(
            MODELROUTES,
            {
                "metadata": {"name": "r", "namespace": NS},
                "spec": {"modelName": "router-name", "rules": [{"targetModels": [{"modelServerName": "s"}]}]},
            },
        )
        put(kube, PODS, entry_pod("llm", "p"))
        await wait_for(lambda: "router-name" in _a.catalog.directory().by_model)
        async with http.post(url + "/v1/chat/completions", json={"model": "router-name"}) as answer:
            assert answer.status == 200
            assert (await answer.json())["echo"]["model"] == "router-name"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"namespace": NS, "modelserving": "llm", **labels}) or 0.0


async def test_metrics_count_held_in_flight_answers_and_writes() -> None:
    before = {
        "ok": sample("kthena_activator_requests_total", code="200"),
        "held": sample("kthena_activator_hold_seconds_count"),
        "written": sample("kthena_activator_scale_writes_total", result="written"),
    }
    async with scene() as (kube, _engine, _a, url), aiohttp.ClientSession() as http:
        calls = [asyncio.create_task(http.post(url + "/v1/chat/completions", json={"model": "llm"})) for _ in range(3)]
        await wait_for(lambda: sample("kthena_activator_requests_held") == 3)
        put(kube, PODS, entry_pod("llm", "p"))
        assert [(await c).status for c in calls] == [200] * 3
    assert sample("kthena_activator_requests_held") == 0
    assert sample("kthena_activator_requests_in_flight") == 0
    assert sample("kthena_activator_requests_total", code="200") - before["ok"] == 3
    assert sample("kthena_activator_hold_seconds_count") - before["held"] == 3
    assert sample("kthena_activator_scale_writes_total", result="written") - before["written"] == 1


async def test_probes_say_ready_once_informers_synced() -> None:
    async with scene() as (_kube, _engine, activator, _url), aiohttp.ClientSession() as http:
        host, port = activator.probes.bound["health"]
        async with http.get(f"http://{host}:{port}/readyz") as answer:
            assert answer.status == 200
        async with http.get(f"http://{host}:{port}/healthz") as answer:
            assert answer.status == 200


async def test_a_503_from_a_loading_engine_is_retried_within_the_budget() -> None:
    async with scene(replicas=1) as (kube, engine, _a, url), aiohttp.ClientSession() as http:
        put(kube, PODS, entry_pod("llm", "p"))
        engine.unavailable = 2
        async with http.post(url + "/v1/chat/completions", json={"model": "llm"}) as answer:
            assert answer.status == 200
        assert len(engine.bodies) == 3  # two 503s, then the answer


async def test_a_request_waiting_to_retry_still_counts_as_demand() -> None:
    # Demand (held + in flight) feeds the autoscaler: a request between two attempts (a refused connection, an
    # engine answering 503 while it loads) must not read as no demand, or a policy may scale the model back to zero
    # under it.
    labels = {"namespace": NS, "modelserving": "llm"}

    def demand() -> float:
        held = REGISTRY.get_sample_value("kthena_activator_requests_held", labels) or 0.0
        return held + (REGISTRY.get_sample_value("kthena_activator_requests_in_flight", labels) or 0.0)

    async with scene(replicas=1) as (kube, engine, _a, url), aiohttp.ClientSession() as http:
        put(kube, PODS, entry_pod("llm", "p"))
        engine.unavailable = 6
        samples: list[float] = []
        call = asyncio.create_task(http.post(url + "/v1/chat/completions", json={"model": "llm"}))
        await wait_for(lambda: engine.bodies)
        while not call.done():
            samples.append(demand())
            await asyncio.sleep(0.002)
        assert (await call).status == 200
        assert len(engine.bodies) == 7
        assert len(samples) > 20 and min(samples[:-1]) >= 1.0, samples
        assert demand() == 0.0


async def test_a_503_with_no_budget_left_is_the_activators_503() -> None:
    async with scene(replicas=1, budget="100ms") as (kube, engine, _a, url), aiohttp.ClientSession() as http:
        put(kube, PODS, entry_pod("llm", "p"))
        engine.unavailable = 1000
        async with http.post(url + "/v1/chat/completions", json={"model": "llm"}) as answer:
            assert answer.status == 503
            assert "answered 503" in (await answer.json())["error"]["message"]
        assert 1 <= len(engine.bodies) <= 3  # 0.05 s, then 0.1 s waits: the budget allows at most two retries
