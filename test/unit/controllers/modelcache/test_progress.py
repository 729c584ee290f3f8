"""The progress scrape over HTTP, against a loopback server: answers, and failures that only leave it unset."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from kthena_py.controllers.modelcache import register
from kthena_py.controllers.modelcache.progress import HttpProgress, scrape_all
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.fake import FakeKube


@dataclass
class Pod:
    """A download pod's progress endpoint on 127.0.0.1; ``mode`` says how it answers."""

    port: int = 0
    mode: str = "ok"


@pytest.fixture
async def pod() -> AsyncIterator[Pod]:
    state = Pod()

    async def progress(_: web.Request) -> web.StreamResponse:
        if state.mode == "slow":
            await asyncio.sleep(2)
        if state.mode == "error":
            return web.Response(status=500)
        if state.mode == "garbage":
            return web.Response(text="<html>")
        return web.json_response({"bytesDone": 10, "bytesTotal": 40, "filesDone": 1, "filesTotal": 2, "etaSeconds": 3})

    app = web.Application()
    app.router.add_get("/progress", progress)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    assert runner.addresses
    state.port = int(runner.addresses[0][1])
    try:
        yield state
    finally:
        await runner.cleanup()


async def test_a_pod_that_answers_gives_its_progress(pod: Pod) -> None:
    source = HttpProgress(timeout=2.0)
    try:
        found = await scrape_all(source, {"job-a": "127.0.0.1"}, pod.port)
    finally:
        await source.close()
    assert found["job-a"].percent == "25%" and found["job-a"].files_total == 2


@pytest.mark.parametrize("mode", ["slow", "error", "garbage"])
async def test_a_pod_that_does_not_answer_well_leaves_progress_unset(pod: Pod, mode: str) -> None:
    pod.mode = mode
    source = HttpProgress(timeout=0.3)
    try:
        # job-b's address has nothing listening (connection refused).
        found = await scrape_all(source, {"job-a": "127.0.0.1", "job-b": "127.0.0.2"}, pod.port)
    finally:
        await source.close()
    assert found == {}


async def test_the_manager_closes_the_scrape_session_when_it_stops(pod: Pod) -> None:
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _, context: reported.append(str(context.get("message"))))
    try:
        manager = Manager(FakeKube(), ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0"))
        controller = register(manager, workers=1)
        source = controller.reconciler.progress  # type: ignore[attr-defined]
        assert isinstance(source, HttpProgress)
        assert await source.fetch("127.0.0.1", pod.port) is not None  # the session is open
        session = source._session
        assert session is not None and not session.closed
        stop = asyncio.Event()
        task = asyncio.create_task(manager.run(stop))
        async with asyncio.timeout(10):
            await manager.leading.wait()
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0
        assert session.closed
        del manager, controller, source, session
        gc.collect()
        assert [m for m in reported if "Unclosed client session" in m] == []
    finally:
        loop.set_exception_handler(None)
