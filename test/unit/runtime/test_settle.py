"""A result's ``settle`` wait: the worker is released, the key stays in progress until the wait ends."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from kthena_py.runtime import metrics
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Controller
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.wait import eventually


class Settling:
    """Reconciles count per key; keys named ``hold*`` return a settle wait that ends when released."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.release = asyncio.Event()
        self.settling = asyncio.Event()
        self.fail = False

    async def reconcile(self, request: Request) -> Result | None:
        self.calls[request.name] += 1
        if not request.name.startswith("hold") or self.calls[request.name] > 1:
            return None

        async def settle() -> None:
            self.settling.set()
            await self.release.wait()
            if self.fail:
                raise RuntimeError("settle broke")

        return Result(settle=settle)


async def _until(condition: Callable[[], bool]) -> None:
    await eventually(condition, timeout=5, interval=0.005)


def _settling_keys(name: str) -> float:
    return metrics.REGISTRY.get_sample_value("kthena_controller_settling_keys", {"controller": name}) or 0.0


async def test_a_settling_key_frees_its_worker_and_stays_in_progress() -> None:
    rec = Settling()
    ctrl = Controller("settle-free", rec, SharedCache(FakeKube()), workers=1)  # never started
    await ctrl.start()
    try:
        ctrl.enqueue(Request("ns", "hold"))
        await asyncio.wait_for(rec.settling.wait(), 5)
        # The only worker is free: another key is reconciled while "hold" settles.
        ctrl.enqueue(Request("ns", "other"))
        await _until(lambda: rec.calls["other"] == 1)
        assert _settling_keys("settle-free") == 1
        # "hold" is still in progress: an event for it waits for the settle to end.
        ctrl.enqueue(Request("ns", "hold"))
        await asyncio.sleep(0.05)
        assert rec.calls["hold"] == 1
        rec.release.set()
        await _until(lambda: rec.calls["hold"] == 2)
        await _until(lambda: _settling_keys("settle-free") == 0)
        assert ctrl.queue.in_flight == 0
    finally:
        await ctrl.stop(drain=False)


async def test_a_failed_settle_is_logged_and_releases_the_key() -> None:
    rec = Settling()
    rec.fail = True
    ctrl = Controller("settle-fail", rec, SharedCache(FakeKube()), workers=1)  # never started
    await ctrl.start()
    try:
        ctrl.enqueue(Request("ns", "hold"))
        await asyncio.wait_for(rec.settling.wait(), 5)
        rec.release.set()
        await _until(lambda: ctrl.queue.in_flight == 0)
        ctrl.enqueue(Request("ns", "hold"))
        await _until(lambda: rec.calls["hold"] == 2)
    finally:
        await ctrl.stop(drain=False)


async def test_stop_without_drain_cancels_a_settle_and_drain_waits_for_it() -> None:
    rec = Settling()
    ctrl = Controller("settle-stop", rec, SharedCache(FakeKube()), workers=1)  # never started
    await ctrl.start()
    ctrl.enqueue(Request("ns", "hold"))
    await asyncio.wait_for(rec.settling.wait(), 5)
    await asyncio.wait_for(ctrl.stop(drain=False), 5)
    assert not rec.release.is_set() and _settling_keys("settle-stop") == 0

    rec = Settling()
    ctrl = Controller("settle-drain", rec, SharedCache(FakeKube()), workers=1)  # never started
    await ctrl.start()
    ctrl.enqueue(Request("ns", "hold"))
    await asyncio.wait_for(rec.settling.wait(), 5)
    stopping = asyncio.create_task(ctrl.stop(drain=True, timeout=5))
    await asyncio.sleep(0.05)
    assert not stopping.done()  # the drain waits for the settling key
    rec.release.set()
    await asyncio.wait_for(stopping, 5)
    assert ctrl.queue.in_flight == 0
