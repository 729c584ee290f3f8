"""The leadership bound on a virtual clock: leading ends at the renew deadline even while a renew hangs."""

from __future__ import annotations

import asyncio

from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.leader import LeaderElector
from kthena_py.testing.fake import Call, FakeKube


class Stall:
    """A FakeKube interceptor: once :attr:`on`, no call is ever answered (a stalled connection)."""

    def __init__(self) -> None:
        self.on = False

    async def __call__(self, call: Call) -> None:
        if self.on:
            await asyncio.Event().wait()  # never answers


async def test_leading_ends_at_the_renew_deadline_while_a_renew_hangs() -> None:
    clock = FakeClock()
    kube = FakeKube()
    stall = Stall()
    kube.intercept(stall)
    elector = LeaderElector(
        kube,
        name="l",
        namespace="ns",
        identity="a",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        clock=clock,
    )
    events: list[tuple[str, float]] = []
    work_cancelled = asyncio.Event()

    async def started() -> None:
        events.append(("started", clock.now()))
        try:
            await asyncio.Event().wait()  # leader work that takes long to start (e.g. a cache sync)
        except asyncio.CancelledError:
            work_cancelled.set()
            raise

    async def stopped() -> None:
        events.append(("stopped", clock.now()))

    task = asyncio.create_task(elector.run(started, stopped))
    await clock.run_for(7.0)  # renews at 2, 4, 6 succeed while the leader work is still starting
    assert events == [("started", 0.0)] and elector.is_leader
    stall.on = True  # from now on every request hangs; the last renew started at t=6
    await clock.run_for(20.0)
    assert task.done()
    assert events == [("started", 0.0), ("stopped", 16.0)]  # 6 + renew deadline, before 6 + lease duration
    assert work_cancelled.is_set() and not elector.is_leader
