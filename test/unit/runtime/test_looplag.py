"""The event-loop lag probe: the overshoot of each wake-up is observed, large ones reach the timeline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kthena_py.runtime import looplag, timeline


@pytest.fixture(autouse=True)
def closed() -> Iterator[None]:
    timeline.close()
    yield
    timeline.close()


def _observed() -> tuple[float, float]:
    """(count, sum) of the lag histogram so far."""
    count = total = 0.0
    for metric in looplag.EVENT_LOOP_LAG.collect():
        for s in metric.samples:
            if s.name.endswith("_count"):
                count = s.value
            elif s.name.endswith("_sum"):
                total = s.value
    return count, total


async def test_each_wake_up_observes_how_late_it_came_and_large_lags_are_recorded(tmp_path: Path) -> None:
    # Each sleep of 0.1 s "takes" 0.1 + overshoot seconds on a fake clock.
    overshoots = [0.0, 0.2, 0.01, 0.5]
    now = [100.0]
    wakes = iter(overshoots)

    async def sleep(interval: float) -> None:
        try:
            now[0] += interval + next(wakes)
        except StopIteration:
            raise asyncio.CancelledError from None

    path = tmp_path / "t.jsonl"
    timeline.open_file(str(path))
    count0, sum0 = _observed()
    with pytest.raises(asyncio.CancelledError):
        await looplag.watch_lag(0.1, 0.05, monotonic=lambda: now[0], sleep=sleep)
    timeline.close()

    count, total = _observed()
    assert count - count0 == len(overshoots)
    assert total - sum0 == pytest.approx(sum(overshoots))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["stage"], r["lag"]) for r in records] == [("loop_lag", 0.2), ("loop_lag", 0.5)]


async def test_a_clock_that_runs_early_never_observes_a_negative_lag() -> None:
    now = [0.0]
    calls = 0

    async def sleep(interval: float) -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise asyncio.CancelledError
        now[0] += interval / 2  # woke "early"

    _, sum0 = _observed()
    with pytest.raises(asyncio.CancelledError):
        await looplag.watch_lag(0.1, monotonic=lambda: now[0], sleep=sleep)
    assert _observed()[1] == pytest.approx(sum0)
