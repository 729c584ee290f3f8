"""The leadership bound on a virtual clock: leading ends at the renew deadline even while a renew hangs."""

from __future__ import annotations

import asyncio
from typing import Any

from kthena_py.kube import NotFound
from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.leader import LeaderElector


class LeaseServer:
    """An in-memory Lease endpoint whose answers can be made to hang (a stalled connection)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.hang = False

    async def _maybe_hang(self) -> None:
        if self.hang:
            await asyncio.Event().wait()  # never answers

    async def get(self, rt: Any, name: str, namespace: str | None = None, **_: Any) -> dict[str, Any]:
        await self._maybe_hang()
        if self.lease is None:
            raise NotFound(404, "NotFound", "no lease")
        return {"metadata": dict(self.lease["metadata"]), "spec": dict(self.lease["spec"])}

    async def create(self, rt: Any, body: dict[str, Any], namespace: str | None = None, **_: Any) -> dict[str, Any]:
        await self._maybe_hang()
        self.rv += 1
        self.lease = {"metadata": {**body["metadata"], "resourceVersion": str(self.rv)}, "spec": body["spec"]}
        return self.lease

    async def replace(self, rt: Any, body: dict[str, Any], namespace: str | None = None, **_: Any) -> dict[str, Any]:
        await self._maybe_hang()
        self.rv += 1
        self.lease = {"metadata": {**body["metadata"], "resourceVersion": str(self.rv)}, "spec": body["spec"]}
        return self.lease


async def test_leading_ends_at_the_renew_deadline_while_a_renew_hangs() -> None:
    clock = FakeClock()
    server = LeaseServer()
    elector = LeaderElector(
        server,  # type: ignore[arg-type]
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
    server.hang = True  # from now on every request hangs; the last renew started at t=6
    await clock.run_for(20.0)
    assert task.done()
    assert events == [("started", 0.0), ("stopped", 16.0)]  # 6 + renew deadline, before 6 + lease duration
    assert work_cancelled.is_set() and not elector.is_leader
