"""Rate limiters that decide how long an item waits before it is re-queued.

They have the semantics of client-go's ``workqueue`` rate limiters:

* `ItemExponentialFailureRateLimiter`: per-item exponential backoff. The n-th call of
  `when(item)` since the last `forget(item)` (counting from 0) returns
  ``min(base * 2**n, max)``.
* `BucketRateLimiter`: one token bucket shared by all items, like
  ``golang.org/x/time/rate``'s ``Reserve().Delay()``: the bucket starts full with `burst`
  tokens and refills at `qps` tokens a second; every `when()` takes one token, reserving a
  future one (and returning the wait until it exists) when the bucket is empty. So `burst`
  calls are free, then calls are spaced ``1/qps`` apart.
* `MaxOfRateLimiter`: asks every limiter and returns the longest delay.
* `default_controller_rate_limiter`: controller-runtime's default, the max of exponential
  backoff (5 ms to 1000 s) and a 10 qps, burst 100 bucket.

All delays are in seconds. The limiters are not thread-safe: use them from one event loop.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from kthena_py.runtime.clock import Clock, RealClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]


@runtime_checkable
class RateLimiter(Protocol):
    """Decides how long an item must wait before it is processed again."""

    def when(self, item: Hashable) -> float:
        """Records a retry of `item` and returns how long it must wait, in seconds.

        Args:
            item: The item being re-queued.
        """
        ...

    def forget(self, item: Hashable) -> None:
        """Stops tracking `item`: its next `when()` starts from scratch.

        Args:
            item: The item to forget.
        """
        ...

    def num_requeues(self, item: Hashable) -> int:
        """Returns how many times `item` has been re-queued since it was last forgotten.

        Args:
            item: The item to look up.
        """
        ...


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base * 2**failures``, capped at `max`.

    Args:
        base: The delay of the first retry, in seconds (must be >= 0).
        max: The longest delay, in seconds (must be >= 0).

    Raises:
        ValueError: If `base` or `max` is negative.
    """

    def __init__(self, base: float = 0.005, max: float = 1000.0) -> None:
        if base < 0 or max < 0:
            raise ValueError(f"delays must not be negative (base={base}, max={max})")
        self.base = float(base)
        self.max = float(max)
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        """Counts a failure of `item` and returns ``min(base * 2**previous_failures, max)``.

        Args:
            item: The item being re-queued.

        Returns:
            The delay in seconds.
        """
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if self.base == 0:
            return 0.0
        try:
            backoff = self.base * math.ldexp(1.0, exp)
        except OverflowError:
            return self.max
        return min(backoff, self.max)

    def forget(self, item: Hashable) -> None:
        """Resets the failure count of `item`.

        Args:
            item: The item to forget.
        """
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        """Returns the failure count of `item`.

        Args:
            item: The item to look up.
        """
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all items (``golang.org/x/time/rate`` reservation semantics).

    Args:
        qps: Tokens added per second; ``math.inf`` means no limit.
        burst: The bucket size, which is also its initial content.
        clock: The time source (default: `RealClock`).

    Raises:
        ValueError: If `qps` is not positive or `burst` is less than 1.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._tokens = float(burst)
        self._last = self._clock.now()

    def when(self, item: Hashable) -> float:
        """Takes a token (reserving a future one if the bucket is empty).

        Args:
            item: Ignored: the bucket is shared by all items.

        Returns:
            How long until the reserved token exists, in seconds (0 if one was available).
        """
        if math.isinf(self.qps):
            return 0.0
        now = self._clock.now()
        elapsed = max(0.0, now - self._last)
        tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
        self._tokens = tokens
        self._last = max(self._last, now)
        if tokens >= 0:
            return 0.0
        return -tokens / self.qps

    def forget(self, item: Hashable) -> None:
        """Does nothing: the bucket does not track items.

        Args:
            item: Ignored.
        """

    def num_requeues(self, item: Hashable) -> int:
        """Returns 0: the bucket does not track items.

        Args:
            item: Ignored.
        """
        return 0


class MaxOfRateLimiter:
    """Combines limiters: the delay is the longest of theirs.

    Every limiter is asked on each `when()`, so each keeps its own accounting.

    Args:
        *limiters: The limiters to combine (at least one).

    Raises:
        ValueError: If no limiter is given.
    """

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters: tuple[RateLimiter, ...] = limiters

    def when(self, item: Hashable) -> float:
        """Returns the longest delay of all the limiters for `item`.

        Args:
            item: The item being re-queued.
        """
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        """Forgets `item` in every limiter.

        Args:
            item: The item to forget.
        """
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        """Returns the largest re-queue count any limiter has for `item`.

        Args:
            item: The item to look up.
        """
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """Returns controller-runtime's default limiter.

    It is the max of per-item exponential backoff from 5 ms to 1000 s and a 10 qps bucket
    with a burst of 100.

    Args:
        clock: The time source of the bucket (default: `RealClock`).
    """
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base=0.005, max=1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
