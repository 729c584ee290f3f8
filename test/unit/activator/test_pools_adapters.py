"""The activator with ModelPool members and LoRA adapters, over FakeKube, against loopback engines.

Engines listen on 127.0.0.1 and 127.0.0.2 (one port), so two pods of one ModelServing are two distinct backends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kthena_py.activator import Activator, ActivatorOptions
from kthena_py.activator.catalog import Catalog
from kthena_py.activator.demand import DemandWriter
from kthena_py.activator.resources import MODELPOOLS, MODELSERVINGS, PODS
from kthena_py.api.modelpool import CONDITION_SWAP_DEFERRED, PHASE_SWAPPING, REASON_PODS_BUSY, STEP_DRAINING
from kthena_py.plan.adapters.desired import adapter_label, source_digest
from kthena_py.plan.modelpool.demand import (
    DEMAND_REFRESH_SECONDS,
    demand_annotation,
    format_demand_time,
    parse_demand_time,
    released_annotation,
)
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import (
    ACTIVATOR_FIELD_MANAGER,
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
    ENTRY_VALUE,
    LORA_ADAPTERS,
    SERVING_ENTRY,
    SERVING_NAME,
)

NS = "ns"
IPS = ("127.0.0.1", "127.0.0.2")
FIN = "s3://adapters/fin"


class Engines:
    """One aiohttp app on 127.0.0.1 and 127.0.0.2 (same port); records (ip, body) of each request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _chat(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        assert request.transport is not None
        self.seen.append((request.transport.get_extra_info("sockname")[0], body))
        return web.json_response({"echo": body})

    async def __aenter__(self) -> Engines:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        for _ in range(20):  # the second IP's port may be taken: try another
            first = web.TCPSite(self._runner, IPS[0], 0)
            await first.start()
            self.port = first._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            try:
                await web.TCPSite(self._runner, IPS[1], self.port).start()
                return self
            except OSError:
                await first.stop()
        raise RuntimeError("no port free on both loopback addresses")

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


def modelserving(name: str, port: int, *, replicas: int, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": MODELSERVINGS.api_version,
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": NS, "annotations": {ACTIVATOR_PORT: str(port), **annotations}},
        "spec": {"replicas": replicas, "template": {"roles": []}},
    }


def entry_pod(ms: str, name: str, ip: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {SERVING_NAME: ms, SERVING_ENTRY: ENTRY_VALUE, **(labels or {})},
        },
        "spec": {"containers": [{"name": "engine", "image": "engine:1"}]},
        "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def modelpool(members: list[str], *, budget: str = "5s", status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": MODELPOOLS.api_version,
        "kind": MODELPOOLS.kind,
        "metadata": {"name": "pool", "namespace": NS},
        "spec": {"members": [{"modelServingRef": {"name": m}} for m in members], "swapBudget": budget},
        "status": status or {},
    }


def demand_writes(kube: FakeKube) -> list[Any]:
    return [c for c in kube.calls if c.verb == "patch" and c.rt == MODELPOOLS]


def scale_writes(kube: FakeKube) -> list[Any]:
    return [c for c in kube.calls if c.verb == "patch" and c.subresource == "scale"]


@contextlib.asynccontextmanager
async def activator(kube: FakeKube) -> AsyncIterator[str]:
    instance = Activator(
        ActivatorOptions(listen="127.0.0.1:0", metrics_bind_address="0", health_probe_bind_address="0"), client=kube
    )
    await instance.start()
    assert await instance.wait_for_sync(5)
    try:
        yield f"http://127.0.0.1:{instance.port}/v1/chat/completions"
    finally:
        await instance.stop()


async def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    await eventually(lambda: predicate() or None, timeout=timeout, interval=0.01)


# -- ModelPool members ---------------------------------------------------------------------------


async def test_a_non_resident_member_is_held_demand_recorded_once_never_scaled_then_served() -> None:
    kube = FakeKube()
    async with Engines() as engines:
        # b opted in to scale from zero: as a pool member that is ignored, the pool controller scales it.
        kube.put(MODELSERVINGS, modelserving("a", engines.port, replicas=1))
        kube.put(MODELSERVINGS, modelserving("b", engines.port, replicas=0, **{ACTIVATOR_SCALE_FROM_ZERO: "true"}))
        kube.put(MODELPOOLS, modelpool(["a", "b"], budget="30s"))
        kube.put(PODS, entry_pod("a", "a-0", IPS[0]))
        async with activator(kube) as url, aiohttp.ClientSession() as http:
            calls = [asyncio.create_task(http.post(url, json={"model": "b", "n": i})) for i in range(5)]
            await wait_for(lambda: demand_writes(kube))
            await asyncio.sleep(0.3)
            assert not any(c.done() for c in calls)  # held: b has no Ready backend
            (write,) = demand_writes(kube)
            assert write.name == "pool" and write.options["patch_type"] == "merge"
            assert write.options["field_manager"] == ACTIVATOR_FIELD_MANAGER
            assert list(write.body["metadata"]["annotations"]) == [demand_annotation("b")]
            stored = kube.store.get(MODELPOOLS, "pool", NS)["metadata"]["annotations"][demand_annotation("b")]
            assert parse_demand_time(stored) is not None
            # The pool controller swaps: b's pod becomes Ready; the held requests are answered by it.
            kube.put(PODS, entry_pod("b", "b-0", IPS[1]))
            answers = await asyncio.gather(*calls)
            assert [a.status for a in answers] == [200] * 5
            assert sorted(body["n"] for ip, body in engines.seen if ip == IPS[1]) == [0, 1, 2, 3, 4]
            # Served by a resident now: recency is recorded at most every 30 s, and it was just recorded.
            for i in range(3):
                async with http.post(url, json={"model": "b", "n": 10 + i}) as answer:
                    assert answer.status == 200
            assert len(demand_writes(kube)) == 1
        assert scale_writes(kube) == []
        assert kube.store.get(MODELSERVINGS, "b", NS)["spec"]["replicas"] == 0


async def test_a_request_to_the_resident_records_recency_once() -> None:
    kube = FakeKube()
    async with Engines() as engines:
        kube.put(MODELSERVINGS, modelserving("a", engines.port, replicas=1))
        kube.put(MODELSERVINGS, modelserving("solo", engines.port, replicas=1))
        kube.put(MODELPOOLS, modelpool(["a", "b"]))
        kube.put(PODS, entry_pod("a", "a-0", IPS[0]))
        kube.put(PODS, entry_pod("solo", "solo-0", IPS[1]))
        async with activator(kube) as url, aiohttp.ClientSession() as http:
            for model in ("a", "a", "solo", "a", "solo"):
                async with http.post(url, json={"model": model}) as answer:
                    assert answer.status == 200
            await wait_for(lambda: demand_writes(kube))
            await asyncio.sleep(0.2)
        writes = demand_writes(kube)
        assert [list(w.body["metadata"]["annotations"]) for w in writes] == [[demand_annotation("a")]]


def written_times(kube: FakeKube, member: str) -> list[float]:
    key = demand_annotation(member)
    found = [parse_demand_time(w.body["metadata"]["annotations"][key]) for w in demand_writes(kube)]
    assert all(t is not None for t in found)
    return [t for t in found if t is not None]


def release(kube: FakeKube, member: str, demand: float | None, released: float) -> None:
    """The pool controller swapped ``member`` out at ``released`` (its demand, if any, recorded at ``demand``)."""
    pool = kube.store.get(MODELPOOLS, "pool", NS)
    annotations = dict(pool["metadata"].get("annotations") or {})
    if demand is not None:
        annotations[demand_annotation(member)] = format_demand_time(demand)
    annotations[released_annotation(member)] = format_demand_time(released)
    kube.put(MODELPOOLS, {**pool, "metadata": {**pool["metadata"], "annotations": annotations}})


async def test_a_held_request_for_a_member_released_after_its_record_writes_demand_at_once() -> None:
    """b's latest record (0.5 s old) was made before b was swapped out (0.2 s ago): the pool controller no longer
    counts it, so a request held for b records demand at once (not after the 1 s limit, nor the 10 s refresh)."""
    kube = FakeKube()
    async with Engines() as engines:
        kube.put(MODELSERVINGS, modelserving("a", engines.port, replicas=1))
        kube.put(MODELSERVINGS, modelserving("b", engines.port, replicas=0))
        kube.put(MODELPOOLS, modelpool(["a", "b"], budget="30s"))
        kube.put(PODS, entry_pod("a", "a-0", IPS[0]))
        now = time.time()
        release(kube, "b", demand=now - 0.5, released=now - 0.2)
        released = parse_demand_time(format_demand_time(now - 0.2))
        assert released is not None
        async with activator(kube) as url, aiohttp.ClientSession() as http:
            call = asyncio.create_task(http.post(url, json={"model": "b"}))
            await wait_for(lambda: demand_writes(kube), timeout=0.9)  # sooner than the 1 s limit would allow
            (first,) = written_times(kube, "b")
            assert first > released
            # Still held, the pool controller swaps b out again (another member won the slot): demand again, at once.
            await asyncio.sleep(0.1)
            again = time.time() + 0.05
            release(kube, "b", demand=None, released=again)
            await wait_for(lambda: len(demand_writes(kube)) >= 2, timeout=3.0)  # not the 10 s refresh
            second = written_times(kube, "b")[1]
            assert second > (parse_demand_time(format_demand_time(again)) or again)
            await asyncio.sleep(0.2)
            assert len(demand_writes(kube)) == 2  # recorded after the release: the plain limits again
            kube.put(PODS, entry_pod("b", "b-0", IPS[1]))
            async with await call as answer:
                assert answer.status == 200
        assert scale_writes(kube) == []


async def test_budget_spent_is_503_naming_the_pools_state() -> None:
    kube = FakeKube()
    before = REGISTRY.get_sample_value(
        "kthena_activator_demand_writes_total",
        {"namespace": NS, "modelserving": "b", "pool": "pool", "result": "written"},
    )
    busy = {
        "phase": PHASE_SWAPPING,
        "residentMember": "a",
        "pendingMember": "b",
        "swap": {"from": "a", "to": "b", "step": STEP_DRAINING},
        "conditions": [
            {"type": CONDITION_SWAP_DEFERRED, "status": "True", "reason": REASON_PODS_BUSY, "message": "a: 2 running"}
        ],
    }
    async with Engines() as engines:
        kube.put(MODELSERVINGS, modelserving("a", engines.port, replicas=1))
        kube.put(MODELSERVINGS, modelserving("b", engines.port, replicas=0, **{ACTIVATOR_HOLD_BUDGET: "1h"}))
        kube.put(MODELPOOLS, modelpool(["a", "b"], budget="400ms", status=busy))
        kube.put(PODS, entry_pod("a", "a-0", IPS[0]))
        async with activator(kube) as url, aiohttp.ClientSession() as http:
            loop = asyncio.get_running_loop()
            started = loop.time()
            async with http.post(url, json={"model": "b"}) as answer:
                waited = loop.time() - started
                assert answer.status == 503
                assert int(answer.headers["Retry-After"]) > 0
                error = (await answer.json())["error"]
        assert 0.4 <= waited < 5  # the pool's swapBudget, not the ModelServing's hold-budget annotation
        assert error["code"] == "model_unavailable" and error["type"] == "service_unavailable"
        message = error["message"]
        assert message.startswith("ns/b has no Ready backend after 0.4s: ModelPool ns/pool: phase Swapping"), message
        assert "resident a" in message and "swap a -> b at step Draining" in message
        assert "SwapDeferred PodsBusy: a: 2 running" in message
        assert scale_writes(kube) == [] and len(demand_writes(kube)) == 1
    after = REGISTRY.get_sample_value(
        "kthena_activator_demand_writes_total",
        {"namespace": NS, "modelserving": "b", "pool": "pool", "result": "written"},
    )
    assert (after or 0) - (before or 0) == 1


class FakeTime:
    """A clock and a sleep the test moves: each sleep advances the clock by what was asked."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0.005)


async def test_demand_is_refreshed_every_ten_seconds_while_held_and_stops_after() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving("b", 8000, replicas=0))
    kube.put(MODELPOOLS, modelpool(["a", "b"]))
    catalog = Catalog(kube, [NS], default_budget=60.0)
    await catalog.start()
    fake = FakeTime()
    writer = DemandWriter(kube, catalog, clock=fake.clock, sleep=fake.sleep)
    try:
        assert await catalog.wait_for_sync(5)
        target = catalog.directory().resolve("b")
        assert target is not None and target.pool is not None
        writer.hold_started(target)
        writer.hold_started(target)  # a second held request joins: no second refresher, no second write
        await wait_for(lambda: len(demand_writes(kube)) >= 6)
        writer.hold_ended(target)
        await asyncio.sleep(0.05)
        assert len(demand_writes(kube)) >= 6  # one request still held: refreshes go on
        writer.hold_ended(target)
        await asyncio.sleep(0.05)
        settled = len(demand_writes(kube))
        await asyncio.sleep(0.1)
        assert len(demand_writes(kube)) == settled  # the last held request ended: no more refreshes
        times = [
            parse_demand_time(w.body["metadata"]["annotations"][demand_annotation("b")]) for w in demand_writes(kube)
        ]
        assert all(t is not None for t in times)
        gaps = [b - a for a, b in itertools.pairwise(times)]  # type: ignore[operator]
        assert all(g >= DEMAND_REFRESH_SECONDS - 0.001 for g in gaps), gaps
        assert all(g <= DEMAND_REFRESH_SECONDS + 0.5 for g in gaps), gaps
    finally:
        await writer.stop()
        await catalog.stop()


# -- LoRA adapters -------------------------------------------------------------------------------


def adapters_annotation() -> dict[str, str]:
    return {LORA_ADAPTERS: json.dumps([{"name": "fin", "source": FIN}])}


async def test_adapter_requests_reach_only_labelled_pods_and_kubeai_names_are_rewritten() -> None:
    kube = FakeKube()
    async with Engines() as engines:
        kube.put(MODELSERVINGS, modelserving("llm", engines.port, replicas=2, **adapters_annotation()))
        kube.put(PODS, entry_pod("llm", "llm-a", IPS[0], {adapter_label("fin"): source_digest(FIN)}))
        kube.put(PODS, entry_pod("llm", "llm-b", IPS[1]))
        async with activator(kube) as url, aiohttp.ClientSession() as http:

            async def ask(model: str, i: int) -> int:
                async with http.post(url, json={"model": model, "i": i, "stream": False}) as answer:
                    return answer.status

            statuses = await asyncio.gather(
                *(ask("fin", i) for i in range(60)), *(ask("llm_fin", i) for i in range(40))
            )
            assert statuses == [200] * 100
            assert {ip for ip, _ in engines.seen} == {IPS[0]}
            assert sorted(body["model"] for _, body in engines.seen) == ["fin"] * 100  # llm_fin rewritten
            assert sorted(body["i"] for _, body in engines.seen) == sorted([*range(60), *range(40)])
            engines.seen.clear()
            # The base model still uses every Ready entry pod.
            await asyncio.gather(*(ask("llm", i) for i in range(40)))
            assert {ip for ip, _ in engines.seen} == set(IPS)
            assert {body["model"] for _, body in engines.seen} == {"llm"}
            async with http.post(url, json={"model": "llm_nope"}) as answer:
                assert answer.status == 404


async def test_an_adapter_loaded_nowhere_is_held_even_when_not_opted_in_then_served() -> None:
    kube = FakeKube()
    async with Engines() as engines:
        kube.put(MODELSERVINGS, modelserving("llm", engines.port, replicas=1, **adapters_annotation()))
        kube.put(PODS, entry_pod("llm", "llm-a", IPS[0]))
        async with activator(kube) as url, aiohttp.ClientSession() as http:
            call = asyncio.create_task(http.post(url, json={"model": "llm_fin"}))
            await asyncio.sleep(0.3)
            assert not call.done() and engines.seen == []
            # A stale source under the same name does not count.
            kube.put(PODS, entry_pod("llm", "llm-a", IPS[0], {adapter_label("fin"): source_digest("s3://old")}))
            await asyncio.sleep(0.2)
            assert not call.done()
            kube.put(PODS, entry_pod("llm", "llm-a", IPS[0], {adapter_label("fin"): source_digest(FIN)}))
            answer = await asyncio.wait_for(call, 5)
            assert answer.status == 200
            assert [body["model"] for _, body in engines.seen] == ["fin"]
        assert scale_writes(kube) == []


@pytest.mark.parametrize("replicas", [1, 0])
async def test_an_adapter_never_loaded_is_503_naming_it(replicas: int) -> None:
    kube = FakeKube()
    async with Engines() as engines:
        ms = modelserving(
            "llm", engines.port, replicas=replicas, **adapters_annotation(), **{ACTIVATOR_HOLD_BUDGET: "300ms"}
        )
        kube.put(MODELSERVINGS, ms)
        if replicas:
            kube.put(PODS, entry_pod("llm", "llm-a", IPS[0]))
        async with (
            activator(kube) as url,
            aiohttp.ClientSession() as http,
            http.post(url, json={"model": "fin"}) as answer,
        ):
            assert answer.status == 503 and answer.headers["Retry-After"]
            message = (await answer.json())["error"]["message"]
        assert message.startswith("ns/llm has no Ready backend with adapter 'fin' after 0.3s: "), message
        if replicas:
            assert "adapter 'fin' is loaded on none of the 1 Ready entry pod" in message
        else:
            assert "scaled to zero" in message and "adapter 'fin' is loaded once an entry pod is Ready" in message
        assert engines.seen == [] and scale_writes(kube) == []


async def test_models_lists_adapters_under_their_base_model_and_pool_members() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving("llm", 8000, replicas=1, **adapters_annotation()))
    kube.put(MODELSERVINGS, modelserving("a", 8000, replicas=1))
    kube.put(MODELSERVINGS, modelserving("b", 8000, replicas=0))
    kube.put(MODELPOOLS, modelpool(["a", "b"]))
    async with (
        activator(kube) as url,
        aiohttp.ClientSession() as http,
        http.get(url.replace("/v1/chat/completions", "/v1/models")) as answer,
    ):
        assert answer.status == 200
        listing = await answer.json()
    assert listing["object"] == "list"
    cards = {c["id"]: (c["owned_by"], c["parent"], c.get("modelpool")) for c in listing["data"]}
    assert cards == {
        "a": ("ns/a", None, "ns/pool"),
        "b": ("ns/b", None, "ns/pool"),  # not resident: listed all the same (a request swaps it in)
        "fin": ("ns/llm", "llm", None),
        "llm": ("ns/llm", None, None),
        "llm_fin": ("ns/llm", "llm", None),
    }
    assert [c["id"] for c in listing["data"]] == sorted(cards)
