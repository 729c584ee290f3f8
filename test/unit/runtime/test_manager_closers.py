"""Manager closers: run once when the manager stops, after its controllers, in order, each whatever the others do."""

from __future__ import annotations

import asyncio

from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.fake import FakeKube


async def test_closers_run_once_in_order_when_the_manager_stops_even_after_one_fails() -> None:
    manager = Manager(FakeKube(), ManagerOptions(metrics_bind_address="0", health_probe_bind_address="0"))
    closed: list[str] = []

    async def first() -> None:
        closed.append("first")
        raise RuntimeError("cannot close")

    async def second() -> None:
        closed.append(f"second, leading={manager.leading.is_set()}")

    manager.add_closer(first)
    manager.add_closer(second)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    async with asyncio.timeout(10):
        await manager.leading.wait()
    assert closed == []
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert closed == ["first", "second, leading=False"]
