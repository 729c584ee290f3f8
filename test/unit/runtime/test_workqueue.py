"""Tests of kthena_py.runtime.workqueue: client-go's work queue guarantees, on a FakeClock."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.metrics import REGISTRY, PrometheusQueueMetrics
from kthena_py.runtime.ratelimit import ItemExponentialFailureRateLimiter
from kthena_py.runtime.workqueue import NoopQueueMetrics, RateLimitingQueue, ShutDown

SETTINGS = settings(max_examples=100, deadline=None, database=None)
_names = itertools.count()


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    """Runs a coroutine on a private event loop (for synchronous hypothesis tests)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()


def make_queue(
    clock: FakeClock | None = None, base: float = 1.0, cap: float = 8.0, **kwargs: Any
) -> tuple[RateLimitingQueue[str], FakeClock]:
    clock = clock or FakeClock()
    limiter = ItemExponentialFailureRateLimiter(base=base, max=cap)
    return RateLimitingQueue[str](limiter, clock=clock, **kwargs), clock


async def finished(task: asyncio.Task[Any], clock: FakeClock) -> Any:
    """Returns the result of a task that must be able to finish without time moving."""
    await clock.run_until_idle()
    assert task.done(), "task is still blocked"
    return task.result()


async def get_now(q: RateLimitingQueue[str]) -> str:
    """Gets a key that must be available without time moving (fails instead of hanging)."""
    key: str = await finished(asyncio.create_task(q.get()), FakeClock())
    return key


async def drain_now(q: RateLimitingQueue[str]) -> list[str]:
    """Gets (and marks done) everything that is queued right now."""
    got = []
    while len(q):
        key = await get_now(q)
        got.append(key)
        q.done(key)
    return got


# -- fairness, coalescing, one worker per key ------------------------------------------------


async def test_fifo_and_coalescing() -> None:
    q, _ = make_queue()
    for key in ["a", "b", "a", "c", "b", "a"]:
        q.add(key)
    assert len(q) == 3
    assert await drain_now(q) == ["a", "b", "c"]
    assert len(q) == 0


async def test_add_while_processing_requeues_once_on_done() -> None:
    q, clock = make_queue()
    q.add("a")
    q.add("b")
    assert await get_now(q) == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 1  # only b is ready; a is dirty but in flight
    q.add("d")
    assert await get_now(q) == "b"
    # Nobody may get "a" while it is processed, even with the queue otherwise empty.
    assert await get_now(q) == "d"
    getter = asyncio.create_task(q.get())
    await clock.run_until_idle()
    assert not getter.done()
    q.done("a")
    assert await finished(getter, clock) == "a"
    q.done("a")
    q.done("b")
    q.done("d")
    assert len(q) == 0 and q.in_flight == 0


async def test_urgent_keys_go_first_and_an_urgent_add_moves_a_waiting_key_ahead() -> None:
    q, clock = make_queue()
    for key in ["a", "b", "c"]:
        q.add(key)
    q.add("u", urgent=True)
    q.add("c", urgent=True)  # waiting in the normal lane: moves ahead, behind "u"
    q.add("u")  # a normal add of an urgent key leaves it where it is
    assert len(q) == 4
    assert await get_now(q) == "u"
    q.add("u")  # added again while processed, not urgent: queued behind the others at done
    q.add("a", urgent=True)
    q.done("u")
    assert await drain_now(q) == ["c", "a", "b", "u"]
    # An urgent add while the key is processed queues it ahead when it is done.
    q.add("x")
    q.add("y")
    assert await get_now(q) == "x"
    q.add("x", urgent=True)
    q.done("x")
    assert await drain_now(q) == ["x", "y"]
    assert len(q) == 0 and q.in_flight == 0
    del clock


async def test_done_of_an_unknown_key_is_ignored() -> None:
    q, _ = make_queue()
    q.add("a")
    q.done("a")  # queued, not handed out
    q.done("zzz")
    assert await drain_now(q) == ["a"]


async def test_getters_are_served_in_arrival_order() -> None:
    q, clock = make_queue()
    first = asyncio.create_task(q.get())
    await clock.run_until_idle()
    second = asyncio.create_task(q.get())
    await clock.run_until_idle()
    q.add("x")
    q.add("y")
    assert await finished(first, clock) == "x"
    assert await finished(second, clock) == "y"


async def test_a_woken_getter_cancelled_passes_the_key_on() -> None:
    q, clock = make_queue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await clock.run_until_idle()
    q.add("x")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it can take x
    await clock.run_until_idle()
    assert first.cancelled()
    assert second.done() and second.result() == "x"


async def test_cancelled_idle_getter_leaves_no_trace() -> None:
    q, clock = make_queue()
    getter = asyncio.create_task(q.get())
    await clock.run_until_idle()
    getter.cancel()
    await clock.run_until_idle()
    q.add("x")
    assert await get_now(q) == "x"


async def test_workers_never_share_a_key() -> None:
    q, clock = make_queue()
    active: set[str] = set()
    processed: list[str] = []

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            assert key not in active
            active.add(key)
            processed.append(key)
            await clock.sleep(1.0)
            if len(processed) < 10:
                q.add(key)  # re-added while processing: must wait for done
            active.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    q.add("only")
    while await clock.run_next():
        pass
    assert processed == ["only"] * 10
    q.shutdown()
    await clock.run_until_idle()
    assert all(w.done() for w in workers)
    await asyncio.gather(*workers)


# -- delays and rate limiting ----------------------------------------------------------------


async def test_add_after_fires_in_deadline_order() -> None:
    q, clock = make_queue()
    q.add_after("a", 3.0)
    q.add_after("b", 1.0)
    q.add_after("c", 2.0)
    q.add_after("d", 1.0)  # same deadline as b: after b
    q.add_after("now", 0)
    q.add_after("neg", -1)
    assert await drain_now(q) == ["now", "neg"]
    assert q.waiting == 4
    await clock.run_for(0.5)
    assert len(q) == 0
    await clock.run_for(0.5)
    assert await drain_now(q) == ["b", "d"]
    await clock.run_for(2.0)
    assert await drain_now(q) == ["c", "a"]
    assert q.waiting == 0
    q.shutdown()


async def test_add_after_keeps_the_earlier_deadline() -> None:
    q, clock = make_queue()
    q.add_after("a", 5.0)
    q.add_after("a", 1.0)  # earlier: wins
    q.add_after("b", 1.0)
    q.add_after("b", 5.0)  # later: ignored
    assert q.waiting == 2
    await clock.run_for(1.0)
    assert await drain_now(q) == ["a", "b"]
    assert q.waiting == 0
    await clock.run_for(10.0)
    assert len(q) == 0
    q.shutdown()


async def test_a_replaced_deadline_never_fires() -> None:
    q, clock = make_queue()
    q.add_after("a", 3.0)
    q.add_after("a", 1.0)  # replaces the 3 s deadline
    q.add_after("b", 2.0)
    await clock.run_for(1.0)
    assert await drain_now(q) == ["a"]
    q.add_after("a", 10.0)
    clock.advance(4.0)  # one jump over b's deadline and a's replaced one
    await clock.run_until_idle()
    assert await drain_now(q) == ["b"]
    assert q.waiting == 1
    await clock.run_for(7.0)
    assert await drain_now(q) == ["a"]
    q.shutdown()


async def test_a_result_replaces_the_look_an_earlier_result_asked_for() -> None:
    q, clock = make_queue()
    q.requeue("a", 1.0)  # a reconcile asks to look again in 1 s (a status change waits)
    q.requeue("a", None)  # a later one wrote it: no look is left to take
    q.requeue("b", 1.0)
    q.requeue("b", 3.0)  # a later result's later look replaces the earlier one
    assert q.waiting == 1
    await clock.run_for(1.0)
    assert await drain_now(q) == []
    await clock.run_for(2.0)
    assert await drain_now(q) == ["b"]
    await clock.run_for(10.0)
    assert await drain_now(q) == []
    q.shutdown()


async def test_a_result_never_drops_a_look_a_watch_or_a_retry_asked_for() -> None:
    q, clock = make_queue()
    q.add_after("watched", 0.5, retry=False)  # a watch's coalescing: sooner than the result's look
    q.requeue("watched", 1.0)
    q.requeue("watched", None)
    q.requeue("joined", 1.0)
    q.add_after("joined", 2.0, retry=False)  # later: joins the result's look, which is no longer the result's alone
    q.requeue("joined", None)
    q.add_rate_limited("retried")  # 1 s backoff
    q.requeue("retried", None)
    await clock.run_for(0.5)
    assert await drain_now(q) == ["watched"]
    await clock.run_for(0.5)
    assert await drain_now(q) == ["joined", "retried"]
    q.shutdown()


async def test_add_after_coalesces_with_a_queued_key() -> None:
    q, clock = make_queue()
    q.add("a")
    q.add_after("a", 1.0)
    await clock.run_for(1.0)
    assert await drain_now(q) == ["a"]
    q.shutdown()


async def test_earlier_add_after_interrupts_a_long_wait() -> None:
    q, clock = make_queue()
    q.add_after("slow", 100.0)
    await clock.run_until_idle()
    q.add_after("fast", 1.0)
    await clock.run_for(1.0)
    assert await drain_now(q) == ["fast"]
    await clock.run_for(99.0)
    assert await drain_now(q) == ["slow"]
    q.shutdown()


async def test_rate_limited_requeue_backs_off_and_forget_resets() -> None:
    q, clock = make_queue(base=1.0, cap=4.0)
    expected_delays = [1.0, 2.0, 4.0, 4.0]
    for n, delay in enumerate(expected_delays, start=1):
        q.add_rate_limited("a")
        assert q.num_requeues("a") == n
        await clock.run_for(delay - 0.5)
        assert len(q) == 0, f"requeue {n} came before its {delay}s backoff"
        await clock.run_for(0.5)
        assert await drain_now(q) == ["a"]
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    await clock.run_for(1.0)
    assert await drain_now(q) == ["a"]
    q.shutdown()


async def test_default_rate_limiter_uses_the_queue_clock() -> None:
    clock = FakeClock()
    q = RateLimitingQueue[str](clock=clock)
    q.add_rate_limited("a")
    await clock.run_for(0.004)
    assert len(q) == 0
    await clock.run_for(0.001)
    assert await drain_now(q) == ["a"]
    q.shutdown()


async def test_delayed_adds_survive_awkward_float_deadlines() -> None:
    q, clock = make_queue(clock=FakeClock(start=0.1))
    q.add_after("a", 0.2)  # 0.1 + 0.2 is not 0.3 in binary
    q.add_after("b", 1e-12)
    await clock.run_for(0.3)
    assert sorted(await drain_now(q)) == ["a", "b"]
    q.shutdown()


# -- shutdown ------------------------------------------------------------------------------


async def test_shutdown_hands_out_what_is_queued_then_raises() -> None:
    q, clock = make_queue()
    q.add("a")
    q.add("b")
    assert await get_now(q) == "a"
    q.add("a")  # dirty while processing
    q.add_after("late", 1.0)
    q.shutdown()
    assert q.shutting_down
    assert q.waiting == 0  # delayed adds are dropped
    q.add("ignored")
    q.add_after("ignored", 0)
    q.add_rate_limited("ignored")
    assert await get_now(q) == "b"
    q.done("b")
    q.done("a")  # a was dirty: it is still handed out
    assert await get_now(q) == "a"
    q.done("a")
    with pytest.raises(ShutDown):
        await get_now(q)
    await clock.run_for(2.0)
    assert len(q) == 0


async def test_shutdown_wakes_blocked_getters() -> None:
    q, clock = make_queue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await clock.run_until_idle()
    q.shutdown()
    await clock.run_until_idle()
    assert all(g.done() and isinstance(g.exception(), ShutDown) for g in getters)


async def test_shutdown_with_drain_waits_for_in_flight_and_queued_work() -> None:
    q, clock = make_queue()
    q.add("a")
    q.add("b")
    assert await get_now(q) == "a"
    drain = asyncio.create_task(q.shutdown_with_drain())
    await clock.run_until_idle()
    assert not drain.done()
    assert q.shutting_down
    q.done("a")
    await clock.run_until_idle()
    assert not drain.done()  # nothing in flight, but b is still queued
    assert await get_now(q) == "b"
    await clock.run_until_idle()
    assert not drain.done()  # b in flight
    q.done("b")
    await clock.run_until_idle()
    assert drain.done()
    with pytest.raises(ShutDown):
        await get_now(q)


async def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    q, _ = make_queue()
    await q.shutdown_with_drain()
    assert q.shutting_down


async def test_shutdown_cuts_a_drain_short() -> None:
    q, clock = make_queue()
    q.add("a")
    await get_now(q)
    drain = asyncio.create_task(q.shutdown_with_drain())
    await clock.run_until_idle()
    assert not drain.done()
    q.shutdown()
    await clock.run_until_idle()
    assert drain.done()


# -- metrics -------------------------------------------------------------------------------


def sample(metric: str, name: str) -> float:
    value = REGISTRY.get_sample_value(metric, {"name": name, "controller": name})
    assert value is not None, f"{metric} for {name} not found"
    return value


async def test_prometheus_metrics_follow_the_queue() -> None:
    name = f"test-queue-{next(_names)}"
    clock = FakeClock()
    q = RateLimitingQueue[str](
        ItemExponentialFailureRateLimiter(base=1.0, max=8.0),
        name=name,
        clock=clock,
        metrics=PrometheusQueueMetrics(name),
    )
    assert sample("workqueue_adds_total", name) == 0
    assert sample("workqueue_depth", name) == 0
    assert sample("workqueue_unfinished_work_seconds", name) == 0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0

    for key in ["a", "a", "b"]:
        q.add(key)
    await clock.run_for(1.0)
    q.add("a")  # coalesces: neither counted nor restarting a's queue time
    assert sample("workqueue_adds_total", name) == 2
    assert sample("workqueue_depth", name) == 2

    await clock.run_for(1.0)
    assert await get_now(q) == "a"
    assert sample("workqueue_depth", name) == 1
    assert sample("workqueue_queue_duration_seconds_count", name) == 1
    assert sample("workqueue_queue_duration_seconds_sum", name) == 2.0

    await clock.run_for(1.0)
    assert await get_now(q) == "b"
    await clock.run_for(3.0)
    # a held for 4 s, b for 3 s.
    assert sample("workqueue_unfinished_work_seconds", name) == 7.0
    assert sample("workqueue_longest_running_processor_seconds", name) == 4.0

    q.done("a")
    assert sample("workqueue_work_duration_seconds_count", name) == 1
    assert sample("workqueue_work_duration_seconds_sum", name) == 4.0
    assert sample("workqueue_longest_running_processor_seconds", name) == 3.0
    q.done("b")
    assert sample("workqueue_unfinished_work_seconds", name) == 0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0
    assert sample("workqueue_depth", name) == 0

    q.add_rate_limited("a")
    q.add_after("b", 0)
    q.add_after("c", 1.0, retry=False)  # a watch's coalescing delay is no retry
    assert sample("workqueue_retries_total", name) == 2
    assert sample("workqueue_adds_total", name) == 3  # b was added at once
    assert (
        REGISTRY.get_sample_value(
            "workqueue_work_duration_seconds_bucket", {"name": name, "controller": name, "le": "10.0"}
        )
        == 2
    )
    q.shutdown()


def test_controller_label_can_differ_from_name() -> None:
    PrometheusQueueMetrics("queue-x", controller="ctrl-x").add()
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": "queue-x", "controller": "ctrl-x"}) == 1


def test_noop_metrics_accept_everything() -> None:
    m = NoopQueueMetrics()
    m.add()
    m.depth(1)
    m.get(1.0)
    m.done(1.0)
    m.retry()
    m.observe_in_progress(RateLimitingQueue[str](clock=FakeClock()))


# -- properties ----------------------------------------------------------------------------

KEYS = st.sampled_from("abcde")
DELAYS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])  # exact in binary


class QueueMachine(RuleBasedStateMachine):
    """Drives a queue step by step and checks it against a model of client-go's queue."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.q = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(base=0.5, max=4.0), clock=self.clock)
        self.queue: list[str] = []
        self.urgent: list[str] = []  # the lane that goes first
        self.urgent_keys: set[str] = set()
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.waiting: dict[str, tuple[float, int]] = {}
        self.requeues: dict[str, tuple[float, int]] = {}  # waiting entries a result's requeue alone made
        self.failures: dict[str, int] = {}
        self.seq = itertools.count()
        self.shut = False
        self.drain: asyncio.Task[None] | None = None
        self.drain_cut = False

    def settle(self, coro: Awaitable[Any] | None = None) -> Any:
        """Awaits `coro` (if any) on the machine's loop, then lets the loop go idle."""

        async def go() -> Any:
            result = await coro if coro is not None else None
            await self.clock.run_until_idle()
            return result

        return self.loop.run_until_complete(go())

    def call(self, fn: Callable[[], None]) -> None:
        """Calls a synchronous queue method from inside the running loop, then settles."""

        async def go() -> None:
            fn()

        self.settle(go())

    def model_add(self, key: str, urgent: bool = False) -> None:
        if self.shut:
            return
        if key in self.dirty:
            if urgent and key not in self.urgent_keys:
                self.urgent_keys.add(key)
                if key not in self.processing:  # waiting in the other lane: moves ahead
                    self.queue.remove(key)
                    self.urgent.append(key)
            return
        self.dirty.add(key)
        if urgent:
            self.urgent_keys.add(key)
        if key not in self.processing:
            (self.urgent if urgent else self.queue).append(key)

    def model_add_after(self, key: str, delay: float) -> None:
        if self.shut:
            return
        self.requeues.pop(key, None)
        self.model_wait(key, delay)

    def model_wait(self, key: str, delay: float) -> tuple[float, int] | None:
        if delay <= 0:
            self.model_add(key)
            return None
        ready = self.clock.now() + delay
        if key in self.waiting and self.waiting[key][0] <= ready:
            return None
        entry = self.waiting[key] = (ready, next(self.seq))
        return entry

    def model_requeue(self, key: str, delay: float | None) -> None:
        if self.shut:
            return
        earlier = self.requeues.pop(key, None)
        if earlier is not None and self.waiting.get(key) == earlier:
            del self.waiting[key]
        if delay is None or delay <= 0:
            return
        made = self.model_wait(key, delay)
        if made is not None:
            self.requeues[key] = made

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.q.add(key)
        self.model_add(key)
        self.settle()

    @rule(key=KEYS)
    def add_urgent(self, key: str) -> None:
        self.q.add(key, urgent=True)
        self.model_add(key, urgent=True)
        self.settle()

    @rule(key=KEYS, delay=DELAYS)
    def add_after(self, key: str, delay: float) -> None:
        self.call(lambda: self.q.add_after(key, delay))
        self.model_add_after(key, delay)

    @rule(key=KEYS, delay=st.one_of(st.none(), DELAYS))
    def requeue(self, key: str, delay: float | None) -> None:
        self.call(lambda: self.q.requeue(key, delay))
        self.model_requeue(key, delay)

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        self.call(lambda: self.q.add_rate_limited(key))
        if not self.shut:
            n = self.failures.get(key, 0)
            self.failures[key] = n + 1
            self.model_add_after(key, min(0.5 * 2**n, 4.0))

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.q.forget(key)
        self.failures.pop(key, None)

    @rule(step=st.sampled_from([0.5, 1.0, 2.5, 5.0]))
    def advance(self, step: float) -> None:
        target = self.clock.now() + step
        due = sorted((entry, key) for key, entry in self.waiting.items() if entry[0] <= target)
        for _, key in due:
            del self.waiting[key]
            self.requeues.pop(key, None)
            self.model_add(key)
        self.settle(self.clock.run_for(step))

    @rule()
    def get(self) -> None:
        if self.queue or self.urgent:
            getter = self.loop.create_task(self.q.get())
            self.settle()
            assert getter.done(), "get() blocked with keys queued"
            key = getter.result()
            assert key == (self.urgent or self.queue).pop(0)
            self.urgent_keys.discard(key)
            assert key not in self.processing, "a key was handed to two workers"
            self.processing.add(key)
            self.dirty.discard(key)
        elif self.shut:
            getter = self.loop.create_task(self.q.get())
            self.settle()
            assert getter.done(), "get() blocked after shutdown with nothing queued"
            with pytest.raises(ShutDown):
                getter.result()
        else:
            getter = self.loop.create_task(self.q.get())
            self.settle()
            assert not getter.done(), "get() returned with nothing queued"
            getter.cancel()
            self.settle()

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(key)
        self.processing.discard(key)
        if key in self.dirty:
            (self.urgent if key in self.urgent_keys else self.queue).append(key)
        self.settle()

    @rule(key=KEYS)
    def done_unknown(self, key: str) -> None:
        if key not in self.processing:
            self.q.done(key)
            self.settle()

    @precondition(lambda self: not self.shut)
    @rule()
    def shutdown(self) -> None:
        self.q.shutdown()
        self.shut = True
        self.drain_cut = True
        self.waiting.clear()
        self.requeues.clear()
        self.settle()

    @precondition(lambda self: not self.shut)
    @rule()
    def shutdown_with_drain(self) -> None:
        self.drain = self.loop.create_task(self.q.shutdown_with_drain())
        self.shut = True
        self.waiting.clear()
        self.requeues.clear()
        self.settle()

    @invariant()
    def matches_model(self) -> None:
        assert len(self.q) == len(self.queue) + len(self.urgent)
        assert self.q.in_flight == len(self.processing)
        assert self.q.waiting == len(self.waiting)
        assert self.q.shutting_down == self.shut
        assert self.q.num_requeues("a") == self.failures.get("a", 0)
        if self.drain is not None:
            drained = not self.queue and not self.urgent and not self.processing
            assert self.drain.done() == (drained or self.drain_cut)

    def teardown(self) -> None:
        self.q.shutdown()
        self.settle()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()


QueueMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None, database=None)
TestQueueMachine = QueueMachine.TestCase


OPS = st.one_of(
    st.tuples(st.just("add"), KEYS, st.just(0.0)),
    st.tuples(st.just("after"), KEYS, DELAYS),
    st.tuples(st.just("tick"), st.just(""), st.sampled_from([0.25, 0.5, 1.0])),
)


@SETTINGS
@given(
    script=st.lists(OPS, max_size=40),
    workers=st.integers(min_value=1, max_value=3),
    work=st.dictionaries(KEYS, st.sampled_from([0.25, 0.5, 1.0, 2.0])),
    drain=st.booleans(),
)
def test_every_key_is_processed_exactly_once_after_its_last_add(
    script: list[tuple[str, str, float]], workers: int, work: dict[str, float], drain: bool
) -> None:
    """With concurrent workers: no key on two workers, nothing lost, nothing processed twice.

    Adds are recorded where they take effect (delayed ones when their delay runs out), by
    recording in `add`. Each key's processing starts after its last effective add must number
    exactly one: coalescing allows no more, fairness and done() re-queueing allow no fewer.
    """

    async def main() -> None:
        clock = FakeClock()
        events: list[tuple[str, str]] = []

        class RecordingQueue(RateLimitingQueue[str]):
            def add(self, key: str) -> None:
                if not self.shutting_down:
                    events.append(("add", key))
                super().add(key)

        q = RecordingQueue(clock=clock)
        active: set[str] = set()

        async def worker() -> None:
            while True:
                try:
                    key = await q.get()
                except ShutDown:
                    return
                assert key not in active, f"{key} on two workers"
                active.add(key)
                events.append(("start", key))
                await clock.sleep(work.get(key, 0.5))
                events.append(("end", key))
                active.discard(key)
                q.done(key)

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        for op, key, value in script:
            if op == "add":
                q.add(key)
            elif op == "after":
                q.add_after(key, value)
            else:
                await clock.run_for(value)

        if drain:
            draining = asyncio.create_task(q.shutdown_with_drain())
            while not draining.done():
                if not await clock.run_next():
                    await clock.run_until_idle()
                    assert draining.done(), "shutdown_with_drain is stuck: work was lost"
        else:
            while await clock.run_next():
                pass
            assert len(q) == 0 and q.waiting == 0
            q.shutdown()
        await clock.run_until_idle()
        assert all(t.done() for t in tasks), "a worker did not see ShutDown"
        await asyncio.gather(*tasks)
        assert len(q) == 0 and q.in_flight == 0

        for key in {k for kind, k in events if kind == "add"}:
            mine = [kind for kind, k in events if k == key]
            last_add = max(i for i, kind in enumerate(mine) if kind == "add")
            assert mine[last_add:].count("start") == 1, f"{key}: {mine}"
            # starts and ends of one key alternate: never two at once
            flow = [kind for kind in mine if kind != "add"]
            assert flow == ["start", "end"] * (len(flow) // 2), f"{key}: {mine}"

    run(main)
