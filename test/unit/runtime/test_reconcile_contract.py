"""The controller engine's outcome handling, with a virtual clock and no API server."""

from __future__ import annotations

import asyncio

from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.controller import Controller
from kthena_py.runtime.reconcile import Request, Result, TerminalError, result_of
from kthena_py.testing.fake import FakeKube


async def test_outcomes_map_to_queue_actions() -> None:
    clock = FakeClock()
    calls: list[str] = []

    class Rec:
        async def reconcile(self, request: Request) -> Result | None:
            calls.append(request.name)
            if request.name == "boom":
                raise KeyError("bug")
            if request.name == "stop":
                raise TerminalError("no")
            if request.name == "later":
                return Result(requeue_after=30)
            return None

    ctrl = Controller("contract", Rec(), SharedCache(FakeKube()), workers=2, clock=clock)
    await ctrl.start()
    for n in ("ok", "boom", "stop", "later"):
        ctrl.enqueue(Request("ns", n))
    await clock.run_until_idle()
    await asyncio.sleep(0)
    assert sorted(calls) == ["boom", "later", "ok", "stop"]
    assert ctrl.queue.num_requeues(Request("ns", "boom")) == 1
    assert ctrl.queue.num_requeues(Request("ns", "stop")) == 0
    # The failing key comes back after its backoff (5 ms), the requeue_after key after 30 s.
    await clock.run_for(0.01)
    assert calls.count("boom") == 2
    assert calls.count("later") == 1
    await clock.run_for(30)
    assert calls.count("later") == 2
    assert calls.count("stop") == 1 and calls.count("ok") == 1
    await ctrl.stop(drain=False)


async def test_result_of_takes_the_soonest_delay_set_and_the_settle() -> None:
    async def settle() -> None:
        return None

    assert result_of(None, 0.0) is None
    assert result_of(None, 5.0, 2.0) == Result(requeue_after=2.0)
    assert result_of(None, settle=settle) == Result(settle=settle)
    assert result_of(3.0, settle=settle) == Result(requeue_after=3.0, settle=settle)


async def test_a_later_result_replaces_the_look_an_earlier_one_asked_for() -> None:
    """A reconcile that asked to look again in 1 s is followed by one (an event) that needs nothing: no look is left.

    The ModelServing status wait is the case: a progress-only change waits a second, and a reconcile meanwhile that
    writes the status (carrying it) leaves nothing for the waiting look to do.
    """
    clock = FakeClock()
    calls: list[float] = []
    answers = [Result(requeue_after=1.0), None, Result(requeue_after=5.0)]

    class Rec:
        async def reconcile(self, request: Request) -> Result | None:
            calls.append(clock.now())
            return answers[len(calls) - 1] if len(calls) <= len(answers) else None

    ctrl = Controller("supersede", Rec(), SharedCache(FakeKube()), workers=1, clock=clock)
    await ctrl.start()
    key = Request("ns", "ms")
    ctrl.enqueue(key)
    await clock.run_until_idle()
    await clock.run_for(0.5)
    ctrl.enqueue(key)  # an event half-way through the wait: this reconcile answers None
    await clock.run_until_idle()
    await clock.run_for(2.0)
    assert len(calls) == 2  # the first result's look at 1 s was replaced
    ctrl.enqueue(key)  # answers 5 s
    await clock.run_until_idle()
    await clock.run_for(5.0)
    assert len(calls) == 4  # that look is taken
    await ctrl.stop(drain=False)
