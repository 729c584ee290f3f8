"""Injectable clocks for the controller runtime.

Everything in the runtime that needs the time of day or has to wait takes a `Clock`, so
that production code runs on `RealClock` and tests run on `FakeClock` without ever
sleeping on the wall clock.

Guarantees:

* `Clock.now()` is monotonic: it never goes backwards, on either implementation.
* `RealClock` is `time.monotonic()` plus `asyncio.sleep()`.
* `FakeClock` keeps a virtual time that only moves when a test calls `FakeClock.advance`
  (or one of its async helpers). A `FakeClock.sleep()` resolves only once virtual time has
  reached its deadline; sleepers are woken in deadline order (ties in the order they went to
  sleep). A sleep of zero or negative length only yields to the event loop once.
* `FakeClock.run_until_idle()` returns once no other task of the running event loop is
  runnable, so a test can advance time and then observe the effects deterministically.

`FakeClock` is not thread-safe: use it from the event loop it is awaited on.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from typing import Any, Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "RealClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of monotonic time that can also suspend the calling task."""

    def now(self) -> float:
        """Returns the current monotonic time in seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspends the calling task for `seconds` (returns at once if `seconds <= 0`).

        Args:
            seconds: How long to sleep, in seconds.
        """
        ...


class RealClock:
    """The wall clock: `time.monotonic()` and `asyncio.sleep()`."""

    def now(self) -> float:
        """Returns `time.monotonic()`."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleeps with `asyncio.sleep()`; non-positive durations only yield once.

        Args:
            seconds: How long to sleep, in seconds.
        """
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A virtual clock for tests: time only moves when the test says so.

    Typical use::

        clock = FakeClock()
        task = asyncio.create_task(something_that_sleeps(clock))
        await clock.run_until_idle()   # let it reach its sleep
        await clock.run_for(5.0)       # move 5 virtual seconds, waking sleepers in order

    Args:
        start: The initial virtual time, in seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        """Returns the current virtual time in seconds."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Suspends the caller until virtual time reaches `now() + seconds`.

        A non-positive duration only yields to the event loop once. Cancelling the caller
        cancels the sleep; the cancelled sleeper is then skipped by `advance`.

        Args:
            seconds: How long to sleep, in virtual seconds.
        """
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """The number of tasks currently sleeping on this clock."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    def next_deadline(self) -> float | None:
        """Returns the earliest deadline of a pending sleeper, or None when nobody sleeps."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    def advance(self, seconds: float) -> None:
        """Moves virtual time forward and wakes the sleepers whose deadline has passed.

        Woken sleepers are resumed in deadline order once the caller yields to the event
        loop; they all observe the new time. Use `run_for` to move time deadline by deadline
        instead, so that sleepers see the exact time they asked for and sleeps they start
        on waking are honoured within the same call.

        Args:
            seconds: How far to move, in seconds; must not be negative.

        Raises:
            ValueError: If `seconds` is negative.
        """
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards (advance({seconds}))")
        self._now += seconds
        self._wake_due()

    async def run_until_idle(self, max_iterations: int = 100_000) -> None:
        """Yields to the event loop until no other task is ready to run.

        Tasks blocked on this clock, on queues or on futures count as idle. Real timers
        (such as `asyncio.sleep(1)`) and real I/O are not waited for. Only one task should
        run this at a time: two tasks doing so keep each other busy until the bound is hit.

        Args:
            max_iterations: A bound on event-loop iterations, to catch tasks that never
                block.

        Raises:
            RuntimeError: If the event loop is still busy after `max_iterations` yields.
        """
        loop = asyncio.get_running_loop()
        ready: Any = getattr(loop, "_ready", None)
        if not isinstance(ready, deque):
            # An event loop that does not expose its ready queue: yield generously instead.
            for _ in range(min(max_iterations, 200)):
                await asyncio.sleep(0)
            return
        quiet = 0
        for _ in range(max_iterations):
            await asyncio.sleep(0)
            if ready:
                quiet = 0
                continue
            quiet += 1
            if quiet >= 2:
                return
        raise RuntimeError(f"event loop still busy after {max_iterations} iterations")

    async def run_for(self, seconds: float) -> None:
        """Moves virtual time forward by `seconds`, deadline by deadline.

        At each pending deadline within the window, time is set to exactly that deadline,
        its sleepers are woken and the event loop is run until idle, so that sleeps started
        by woken tasks are honoured too. Finally time is set to `now() + seconds` and the
        loop is run until idle once more.

        Args:
            seconds: How far to move, in seconds; must not be negative.

        Raises:
            ValueError: If `seconds` is negative.
        """
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards (run_for({seconds}))")
        await self.run_until(self._now + seconds)

    async def run_until(self, when: float) -> None:
        """Like `run_for`, but to the absolute virtual time `when` (no-op if it has passed).

        Args:
            when: The virtual time to reach, in seconds.
        """
        await self.run_until_idle()
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > when:
                break
            self._now = max(self._now, deadline)
            self._wake_due()
            await self.run_until_idle()
        self._now = max(self._now, when)
        await self.run_until_idle()

    async def run_next(self) -> bool:
        """Jumps to the next pending deadline, wakes its sleepers and runs until idle.

        Returns:
            False if nobody was sleeping (time is unchanged), True otherwise.
        """
        await self.run_until_idle()
        deadline = self.next_deadline()
        if deadline is None:
            return False
        await self.run_until(deadline)
        return True

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
