"""Stopping the shared cache ends every informer task, even one that swallows a cancellation."""

from __future__ import annotations

import asyncio
import contextlib

from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache, _Key
from kthena_py.testing.fake import FakeKube


async def test_stop_repeats_a_swallowed_cancellation() -> None:
    swallowed = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.set()  # what asyncio.wait_for may do on Python 3.11: the task runs on
        await asyncio.sleep(3600)

    cache = SharedCache(FakeKube())  # never started: one fake informer task
    task = asyncio.create_task(stubborn())
    cache._tasks[_Key(PODS, None)] = task
    await asyncio.sleep(0)
    await asyncio.wait_for(cache.stop(), 10)
    assert swallowed.is_set() and task.cancelled()
    with contextlib.suppress(asyncio.CancelledError):
        await task
