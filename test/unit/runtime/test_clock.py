"""Tests of kthena_py.runtime.clock: the real clock's contract and FakeClock's virtual time."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.clock import Clock, FakeClock, RealClock

SETTINGS = settings(max_examples=100, deadline=None, database=None)


def run(coro_factory):  # type: ignore[no-untyped-def]
    """Runs a coroutine on a private event loop (for synchronous hypothesis tests)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro_factory())
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(FakeClock(), Clock)


async def test_real_clock_is_monotonic_and_zero_sleeps_return() -> None:
    clock = RealClock()
    first = clock.now()
    await clock.sleep(0)
    await clock.sleep(-5)
    assert clock.now() >= first


def test_fake_clock_starts_where_told_and_advances() -> None:
    clock = FakeClock(start=42.0)
    assert clock.now() == 42.0
    clock.advance(1.5)
    assert clock.now() == 43.5
    clock.advance(0)
    assert clock.now() == 43.5
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_sleep_resolves_only_at_its_deadline() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(1.0))
    await clock.run_until_idle()
    assert clock.sleepers == 1
    assert clock.next_deadline() == 1.0
    clock.advance(0.5)
    await clock.run_until_idle()
    assert not task.done()
    clock.advance(0.5)
    await clock.run_until_idle()
    assert task.done()
    assert clock.sleepers == 0
    assert clock.next_deadline() is None


async def test_non_positive_sleep_returns_without_time_moving() -> None:
    clock = FakeClock()
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.now() == 0.0
    assert clock.sleepers == 0


async def test_advance_wakes_sleepers_in_deadline_order_ties_in_arrival_order() -> None:
    clock = FakeClock()
    woken: list[str] = []

    async def sleeper(label: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woken.append(label)

    tasks = [
        asyncio.create_task(sleeper(label, seconds))
        for label, seconds in [("c", 3.0), ("a1", 1.0), ("b", 2.0), ("a2", 1.0), ("late", 10.0)]
    ]
    await clock.run_until_idle()
    clock.advance(5.0)
    await clock.run_until_idle()
    assert woken == ["a1", "a2", "b", "c"]
    assert not tasks[-1].done()
    tasks[-1].cancel()
    await clock.run_until_idle()
    assert clock.sleepers == 0


async def test_run_for_honours_sleeps_started_by_woken_tasks() -> None:
    clock = FakeClock()
    seen: list[float] = []

    async def ticker() -> None:
        for _ in range(3):
            await clock.sleep(1.0)
            seen.append(clock.now())

    task = asyncio.create_task(ticker())
    await clock.run_for(2.5)
    assert seen == [1.0, 2.0]
    assert clock.now() == 2.5
    await clock.run_for(0.5)
    assert seen == [1.0, 2.0, 3.0]
    assert task.done()
    with pytest.raises(ValueError):
        await clock.run_for(-1)


async def test_run_next_jumps_to_the_next_deadline() -> None:
    clock = FakeClock()
    assert await clock.run_next() is False
    assert clock.now() == 0.0
    task = asyncio.create_task(clock.sleep(7.0))
    assert await clock.run_next() is True
    assert clock.now() == 7.0
    assert task.done()


async def test_run_until_does_not_go_back() -> None:
    clock = FakeClock(start=5.0)
    await clock.run_until(3.0)
    assert clock.now() == 5.0


async def test_cancelled_sleeper_is_skipped() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(1.0))
    await clock.run_until_idle()
    task.cancel()
    await clock.run_until_idle()
    assert task.cancelled()
    assert clock.sleepers == 0
    assert clock.next_deadline() is None
    clock.advance(2.0)  # must not try to resolve the cancelled future
    await clock.run_until_idle()


async def test_run_until_idle_lets_chains_of_tasks_finish() -> None:
    clock = FakeClock()
    done: list[int] = []

    async def chain(n: int) -> None:
        for _ in range(n):
            await asyncio.sleep(0)
        done.append(n)

    tasks = [asyncio.create_task(chain(n)) for n in (1, 10, 100)]
    await clock.run_until_idle()
    assert all(t.done() for t in tasks)
    assert sorted(done) == [1, 10, 100]


async def test_run_until_idle_detects_a_busy_loop() -> None:
    clock = FakeClock()

    async def spin() -> None:
        while True:  # noqa: ASYNC110 - a deliberately busy task
            await asyncio.sleep(0)

    task = asyncio.create_task(spin())
    with pytest.raises(RuntimeError):
        await clock.run_until_idle(max_iterations=50)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@SETTINGS
@given(
    durations=st.lists(st.integers(min_value=1, max_value=20).map(lambda n: n / 4), min_size=1, max_size=15),
    steps=st.lists(st.integers(min_value=0, max_value=12).map(lambda n: n / 4), max_size=10),
)
def test_sleepers_wake_in_order_never_early(durations: list[float], steps: list[float]) -> None:
    async def main() -> None:
        clock = FakeClock()
        woken: list[tuple[float, int, float]] = []

        async def sleeper(index: int, seconds: float) -> None:
            await clock.sleep(seconds)
            woken.append((seconds, index, clock.now()))

        tasks = [asyncio.create_task(sleeper(index, seconds)) for index, seconds in enumerate(durations)]
        await clock.run_until_idle()
        for step in steps:
            await clock.run_for(step)
            # Everyone due has woken, nobody early, each at exactly its deadline.
            assert {i for _, i, _ in woken} == {i for i, d in enumerate(durations) if d <= clock.now()}
            assert all(at == seconds for seconds, _, at in woken)
        while await clock.run_next():
            pass
        assert all(t.done() for t in tasks)
        assert [(d, i) for d, i, _ in woken] == sorted((d, i) for i, d in enumerate(durations))

    run(main)
