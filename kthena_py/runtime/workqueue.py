"""A rate-limited, delaying work queue for asyncio controllers, with client-go's semantics.

`RateLimitingQueue` hands keys (hashable values, usually ``namespace/name`` strings or
tuples) to workers. It guarantees:

* **Fair**: keys are handed out in the order they were added (delayed keys in the order
  their delay ran out, earlier deadline first; getters are served first come, first served),
  except that keys added as *urgent* go ahead of the others (in their own order). An urgent add of
  a key that already waits moves it ahead; one of a key being processed queues it ahead when
  `RateLimitingQueue.done` is called. Controllers mark as urgent what keeps running workloads
  healthy (say, a pod's readiness changing), so it does not wait behind a burst of new work.
* **Stingy**: a key added several times before a worker gets it is handed out once; adds
  coalesce until `RateLimitingQueue.get` returns the key.
* **One worker per key**: a key is processed by at most one worker at a time. Adding a key
  while it is being processed only marks it dirty; it is queued again (once) when the worker
  calls `RateLimitingQueue.done`, never handed to a second worker before that.
* **Shutdown**: after `RateLimitingQueue.shutdown` adds are ignored and pending delayed adds
  are dropped, but `get()` keeps handing out what is already queued (including keys that
  were dirty while processing when `done()` is called); once nothing is left it raises
  `ShutDown`. `RateLimitingQueue.shutdown_with_drain` also waits until nothing is queued and
  every key handed out has been marked `done()` (or until `shutdown()` is called).

Delays (`add_after`, `add_rate_limited`) are measured on an injected `Clock`, by one
background task per queue (started on the first delayed add) that keeps a heap of
deadlines. A key waiting for a delay is kept once: a second `add_after` of the same key only
moves its deadline if the new one is earlier.

A finished reconcile's own request to look again (`RateLimitingQueue.requeue`) *replaces* the one an
earlier reconcile of the same key made, while that one still waits: a later successful reconcile saw
everything the earlier one did, and its answer is the one that counts. Only a wait that came from a
result alone is replaced; one that any other delayed add (a watch's coalescing, a retry) joined is
kept, so no change a watch reported is ever dropped.

Every method except `get` and `shutdown_with_drain` is synchronous and must be called from
the thread running the event loop (delayed adds also need that loop to be running). The
queue is not thread-safe, except for the read-only in-progress metrics
(`unfinished_work_seconds`, `longest_running_processor_seconds`), which a metrics scrape may
read from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from kthena_py.runtime.clock import Clock, RealClock
from kthena_py.runtime.ratelimit import RateLimiter, default_controller_rate_limiter

__all__ = [
    "InProgressSource",
    "NoopQueueMetrics",
    "QueueMetrics",
    "RateLimitingQueue",
    "ShutDown",
]

K = TypeVar("K", bound=Hashable)

_log = logging.getLogger(__name__)


class ShutDown(Exception):
    """Raised by `RateLimitingQueue.get` once the queue is shut down and empty."""


class InProgressSource(Protocol):
    """Something that can report on the work currently in progress (a queue)."""

    def unfinished_work_seconds(self) -> float:
        """Returns the summed age, in seconds, of all the work in progress."""
        ...

    def longest_running_processor_seconds(self) -> float:
        """Returns the age, in seconds, of the oldest work in progress (0 when idle)."""
        ...


class QueueMetrics(Protocol):
    """Receives a queue's events, to turn them into metrics.

    The queue calls these synchronously, from the event loop, so they must not block.
    """

    def add(self) -> None:
        """A key was added (an add that coalesced with a pending one is not reported)."""
        ...

    def depth(self, n: int) -> None:
        """The number of keys waiting to be handed out is now `n`.

        Args:
            n: Keys added and not yet handed out, including keys re-added while being
                processed (client-go's depth).
        """
        ...

    def get(self, queued_seconds: float) -> None:
        """A key was handed to a worker after waiting `queued_seconds` since it was added.

        Args:
            queued_seconds: The time between the add and the hand-out.
        """
        ...

    def done(self, work_seconds: float) -> None:
        """A worker finished a key it had held for `work_seconds`.

        Args:
            work_seconds: The time between the hand-out and `done()`.
        """
        ...

    def retry(self) -> None:
        """A delayed (or rate-limited) add was requested."""
        ...

    def observe_in_progress(self, source: InProgressSource) -> None:
        """Called once by the queue with itself, so that in-progress gauges can be computed.

        Args:
            source: The queue to ask for unfinished and longest-running work when needed.
        """
        ...


class NoopQueueMetrics:
    """A `QueueMetrics` that records nothing (the queue's default)."""

    def add(self) -> None:
        """Does nothing."""

    def depth(self, n: int) -> None:
        """Does nothing.

        Args:
            n: Ignored.
        """

    def get(self, queued_seconds: float) -> None:
        """Does nothing.

        Args:
            queued_seconds: Ignored.
        """

    def done(self, work_seconds: float) -> None:
        """Does nothing.

        Args:
            work_seconds: Ignored.
        """

    def retry(self) -> None:
        """Does nothing."""

    def observe_in_progress(self, source: InProgressSource) -> None:
        """Does nothing.

        Args:
            source: Ignored.
        """


class RateLimitingQueue(Generic[K]):
    """A fair, coalescing work queue with delayed and rate-limited adds.

    See the module docstring for the guarantees. A worker loop looks like::

        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                ok = await reconcile(key)
            finally:
                queue.done(key)
            if ok:
                queue.forget(key)
            else:
                queue.add_rate_limited(key)

    Args:
        rate_limiter: Decides the delay of `add_rate_limited` (default:
            `default_controller_rate_limiter` on the same clock).
        name: The queue's name, for logs and metrics.
        clock: The time source for delays and durations (default: `RealClock`).
        metrics: Receives the queue's events (default: `NoopQueueMetrics`).
    """

    def __init__(
        self,
        rate_limiter: RateLimiter | None = None,
        *,
        name: str = "",
        clock: Clock | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(self._clock)
        )
        self._metrics: QueueMetrics = metrics if metrics is not None else NoopQueueMetrics()

        # Keys ready to be handed out, in order, in two lanes (urgent first); each key appears at most once in
        # either. _urgent_keys: the dirty keys added as urgent (in _urgent, or being processed).
        self._queue: deque[K] = deque()
        self._urgent: deque[K] = deque()
        self._urgent_keys: set[K] = set()
        # Keys that need processing: those in _queue plus those re-added while processing.
        self._dirty: set[K] = set()
        # Keys handed out and not yet done, with the time they were handed out.
        self._processing: dict[K, float] = {}
        # When each dirty key was (first) added, for the queue-duration metric.
        self._add_times: dict[K, float] = {}

        self._shutting_down = False
        self._drain = False
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []

        # Delayed adds: a heap of (ready_at, seq, key) with lazy deletion; _waiting maps a
        # key to its live (ready_at, seq) entry.
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, tuple[float, int]] = {}
        # The waiting entries that only a result's requeue made (see `requeue`).
        self._requeues: dict[K, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._waiting_task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._sleep_until: float | None = None

        self._metrics.observe_in_progress(self)

    # -- basic queue -------------------------------------------------------------------

    def add(self, key: K, *, urgent: bool = False) -> None:
        """Marks `key` as needing processing (ignored once shutting down).

        If `key` is already queued this does nothing (but move it ahead, if ``urgent``); if it is
        being processed it is queued again when `done(key)` is called.

        Args:
            key: The key to add.
            urgent: Hand it out before every key that was not added as urgent.
        """
        if self._shutting_down:
            return
        if key in self._dirty:
            if urgent and key not in self._urgent_keys:
                self._urgent_keys.add(key)
                if key not in self._processing:
                    self._queue.remove(key)
                    self._urgent.append(key)
            return
        self._dirty.add(key)
        self._add_times.setdefault(key, self._clock.now())
        self._metrics.add()
        self._metrics.depth(len(self._dirty))
        if urgent:
            self._urgent_keys.add(key)
        if key in self._processing:
            return
        (self._urgent if urgent else self._queue).append(key)
        self._wake_getter()

    async def get(self) -> K:
        """Waits for a key and hands it out; the caller must call `done(key)` afterwards.

        Returns:
            The first queued key.

        Raises:
            ShutDown: If the queue is shut down and nothing is queued any more.
        """
        while not (self._urgent or self._queue):
            if self._shutting_down:
                raise ShutDown(f"work queue {self.name!r} is shut down")
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    # Woken for a key but cancelled before taking it: pass the wake-up on.
                    self._wake_getter()
                else:
                    with contextlib.suppress(ValueError):
                        self._getters.remove(fut)
                raise
        key = self._urgent.popleft() if self._urgent else self._queue.popleft()
        self._urgent_keys.discard(key)
        now = self._clock.now()
        self._processing[key] = now
        self._dirty.discard(key)
        added = self._add_times.pop(key, now)
        self._metrics.depth(len(self._dirty))
        self._metrics.get(max(0.0, now - added))
        return key

    def done(self, key: K) -> None:
        """Marks `key`, handed out by `get()`, as processed.

        If `key` was added again while it was processed, it is queued again now. Calling
        this for a key that is not being processed does nothing.

        Args:
            key: The key a worker has finished.
        """
        started = self._processing.pop(key, None)
        if started is None:
            return
        self._metrics.done(max(0.0, self._clock.now() - started))
        if key in self._dirty:
            (self._urgent if key in self._urgent_keys else self._queue).append(key)
            self._wake_getter()
        elif self._drained():
            self._release_drainers()

    def __len__(self) -> int:
        """Returns the number of keys ready to be handed out."""
        return len(self._queue) + len(self._urgent)

    @property
    def shutting_down(self) -> bool:
        """Whether `shutdown()` or `shutdown_with_drain()` has been called."""
        return self._shutting_down

    @property
    def in_flight(self) -> int:
        """The number of keys handed out and not yet `done()`."""
        return len(self._processing)

    @property
    def waiting(self) -> int:
        """The number of keys waiting for their delay to run out."""
        return len(self._waiting)

    def shutdown(self) -> None:
        """Stops the queue: ignores further adds, drops delayed adds, wakes all getters.

        `get()` keeps handing out keys already queued, then raises `ShutDown`. A pending
        `shutdown_with_drain()` returns at once.
        """
        self._drain = False
        self._shut()
        self._release_drainers()

    async def shutdown_with_drain(self) -> None:
        """Shuts the queue down like `shutdown()`, then waits until it has drained.

        Drained means nothing is queued and every key handed out has been marked `done()`;
        so workers must keep calling `get()` until it raises `ShutDown`. Calling
        `shutdown()` meanwhile makes this return at once. Keys waiting for a delay are
        dropped, not waited for.
        """
        self._drain = True
        self._shut()
        if self._drained():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drainers.append(fut)
        await fut

    # -- delays and rate limiting ------------------------------------------------------

    def add_after(self, key: K, delay: float, *, retry: bool = True) -> None:
        """Adds `key` once `delay` seconds have passed on the queue's clock.

        A non-positive delay adds at once. If `key` is already waiting, the earlier of the
        two deadlines is kept. Ignored once shutting down. Must be called from the running
        event loop.

        Args:
            key: The key to add.
            delay: How long to wait, in seconds.
            retry: Count it in ``workqueue_retries_total`` (as client-go does for every delayed add);
                false for a watch's coalescing delay, which is no retry.
        """
        if self._shutting_down:
            return
        self._requeues.pop(key, None)  # a wait this add joins is no longer a result's alone
        if retry:
            self._metrics.retry()
        self._wait(key, delay)

    def requeue(self, key: K, delay: float | None) -> None:
        """What a reconcile of `key` that succeeded asks for: another look after `delay` seconds, or none.

        It replaces the look an earlier reconcile of `key` asked for, if that one still waits and no
        other delayed add joined it (module docstring); it is then merged with any other delayed add of
        `key` as `add_after` does (the earlier deadline is kept). Counted as a retry when it asks for a
        look. Ignored once shutting down.

        Args:
            key: The key that was reconciled.
            delay: Seconds until the next look; ``None`` or non-positive: no look asked for.
        """
        if self._shutting_down:
            return
        earlier = self._requeues.pop(key, None)
        if earlier is not None and self._waiting.get(key) == earlier:
            del self._waiting[key]  # its heap entry goes stale
        if delay is None or delay <= 0:
            return
        self._metrics.retry()
        made = self._wait(key, delay)
        if made is not None:
            self._requeues[key] = made

    def _wait(self, key: K, delay: float) -> tuple[float, int] | None:
        """Add `key` after `delay`; return the waiting entry made (``None``: added at once, or an earlier one kept)."""
        if delay <= 0:
            self.add(key)
            return None
        ready_at = self._clock.now() + delay
        known = self._waiting.get(key)
        if known is not None and known[0] <= ready_at:
            return None
        seq = next(self._seq)
        entry = self._waiting[key] = (ready_at, seq)
        heapq.heappush(self._heap, (ready_at, seq, key))
        self._ensure_waiting_loop()
        if self._sleep_until is None or ready_at < self._sleep_until:
            self._poke()
        return entry

    def add_rate_limited(self, key: K) -> None:
        """Adds `key` after the delay the rate limiter decides (``add_after(key, when(key))``).

        Args:
            key: The key to re-queue.
        """
        if self._shutting_down:
            return
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Tells the rate limiter to stop tracking `key` (call it when processing succeeded).

        Args:
            key: The key to forget.
        """
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """Returns how many times `key` was rate-limited since it was last forgotten.

        Args:
            key: The key to look up.
        """
        return self._rate_limiter.num_requeues(key)

    # -- in-progress metrics -----------------------------------------------------------

    def unfinished_work_seconds(self) -> float:
        """Returns the summed time, in seconds, that the keys now in flight have been held."""
        now = self._clock.now()
        starts = list(self._processing.values())  # one C-level copy: safe from a scrape thread
        return sum(max(0.0, now - s) for s in starts)

    def longest_running_processor_seconds(self) -> float:
        """Returns how long, in seconds, the oldest key in flight has been held (0 if none)."""
        now = self._clock.now()
        starts = list(self._processing.values())
        return max((max(0.0, now - s) for s in starts), default=0.0)

    # -- internals ---------------------------------------------------------------------

    def _wake_getter(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _drained(self) -> bool:
        return not self._queue and not self._urgent and not self._processing

    def _release_drainers(self) -> None:
        if self._drain and not self._drained():
            return
        drainers, self._drainers = self._drainers, []
        for fut in drainers:
            if not fut.done():
                fut.set_result(None)

    def _shut(self) -> None:
        self._shutting_down = True
        self._heap.clear()
        self._waiting.clear()
        self._requeues.clear()
        getters, self._getters = self._getters, deque()
        for fut in getters:
            if not fut.done():
                fut.set_result(None)
        self._poke()

    def _poke(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _ensure_waiting_loop(self) -> None:
        if self._waiting_task is None:
            self._waiting_task = asyncio.get_running_loop().create_task(
                self._waiting_loop(), name=f"workqueue-waiting-loop-{self.name}"
            )
            self._waiting_task.add_done_callback(self._waiting_loop_ended)

    def _waiting_loop_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.error("work queue %r: waiting loop failed", self.name, exc_info=task.exception())

    def _fire_due(self, horizon: float) -> None:
        while self._heap and self._heap[0][0] <= horizon:
            ready_at, seq, key = heapq.heappop(self._heap)
            if self._waiting.get(key) == (ready_at, seq):
                del self._waiting[key]
                self._requeues.pop(key, None)
                self.add(key)

    def _drop_stale(self) -> None:
        while self._heap:
            ready_at, seq, key = self._heap[0]
            if self._waiting.get(key) == (ready_at, seq):
                return
            heapq.heappop(self._heap)

    async def _waiting_loop(self) -> None:
        loop = asyncio.get_running_loop()
        # Entries due at or before the horizon are added. After a completed sleep the horizon is
        # at least the deadline slept for, so rounding in `now + delay` cannot make us spin.
        horizon = self._clock.now()
        try:
            while not self._shutting_down:
                self._fire_due(horizon)
                self._drop_stale()
                wakeup: asyncio.Future[None] = loop.create_future()
                self._wakeup = wakeup
                if not self._heap:
                    self._sleep_until = None
                    await wakeup
                    horizon = self._clock.now()
                    continue
                deadline = self._heap[0][0]
                self._sleep_until = deadline
                sleeper = loop.create_task(self._clock.sleep(deadline - self._clock.now()))
                try:
                    await asyncio.wait((sleeper, wakeup), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not sleeper.done():
                        sleeper.cancel()
                horizon = self._clock.now()
                if sleeper.done() and not sleeper.cancelled():
                    sleeper.result()  # a failing clock ends the loop (and is logged)
                    horizon = max(horizon, deadline)
        finally:
            self._wakeup = None
            self._sleep_until = None
