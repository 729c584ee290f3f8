"""Tests of kthena_py.runtime.ratelimit: client-go's backoff and token-bucket semantics."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

SETTINGS = settings(max_examples=100, deadline=None, database=None)


def test_limiters_satisfy_the_protocol() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    assert isinstance(limiter, RateLimiter)
    assert isinstance(BucketRateLimiter(clock=FakeClock()), RateLimiter)
    assert isinstance(MaxOfRateLimiter(limiter), RateLimiter)


def test_exponential_defaults_are_client_go_ones() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert limiter.num_requeues("a") == 3


@SETTINGS
@given(
    base=st.floats(min_value=1e-4, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=1e4),
    n=st.integers(min_value=1, max_value=80),
)
def test_exponential_delay_is_base_times_two_to_the_failures_capped(base: float, cap: float, n: int) -> None:
    limiter = ItemExponentialFailureRateLimiter(base=base, max=cap)
    delays = [limiter.when("item") for _ in range(n)]
    assert delays == [min(base * 2.0**i, cap) for i in range(n)]
    assert all(0.0 <= d <= cap for d in delays)
    assert delays == sorted(delays)
    assert limiter.num_requeues("item") == n


@SETTINGS
@given(script=st.lists(st.tuples(st.sampled_from(["when", "forget"]), st.sampled_from("abc")), max_size=40))
def test_exponential_counts_per_item_and_forget_resets(script: list[tuple[str, str]]) -> None:
    limiter = ItemExponentialFailureRateLimiter(base=1.0, max=1000.0)
    failures: dict[str, int] = {}
    for op, item in script:
        if op == "when":
            assert limiter.when(item) == 2.0 ** failures.get(item, 0)
            failures[item] = failures.get(item, 0) + 1
        else:
            limiter.forget(item)
            failures.pop(item, None)
        for other in "abc":
            assert limiter.num_requeues(other) == failures.get(other, 0)


def test_exponential_survives_huge_failure_counts() -> None:
    limiter = ItemExponentialFailureRateLimiter(base=1.0, max=5.0)
    for _ in range(1100):
        delay = limiter.when("x")
    assert delay == 5.0
    zero = ItemExponentialFailureRateLimiter(base=0.0, max=5.0)
    assert [zero.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]


def test_exponential_rejects_negative_delays() -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(base=-1.0)
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(max=-1.0)


@SETTINGS
@given(
    qps=st.sampled_from([0.5, 1.0, 2.0, 4.0, 10.0, 100.0]),
    burst=st.integers(min_value=1, max_value=50),
    extra=st.integers(min_value=1, max_value=30),
)
def test_bucket_allows_burst_then_spaces_by_one_over_qps(qps: float, burst: int, extra: int) -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=qps, burst=burst, clock=clock)
    assert [limiter.when(i) for i in range(burst)] == [0.0] * burst
    delays = [limiter.when(i) for i in range(extra)]
    assert delays == pytest.approx([(k + 1) / qps for k in range(extra)])
    # Reservations are spaced exactly 1/qps apart.
    gaps = [b - a for a, b in itertools.pairwise(delays)]
    assert gaps == pytest.approx([1 / qps] * len(gaps))


@SETTINGS
@given(
    qps=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    burst=st.integers(min_value=1, max_value=20),
    used=st.integers(min_value=0, max_value=40),
    wait_ticks=st.integers(min_value=0, max_value=200),
)
def test_bucket_refills_at_qps_up_to_burst(qps: float, burst: int, used: int, wait_ticks: int) -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=qps, burst=burst, clock=clock)
    for i in range(used):
        limiter.when(i)
    wait = wait_ticks / 8  # exact in binary
    clock.advance(wait)
    tokens = min(float(burst), burst - used + wait * qps)
    # The next call costs one token; it is free iff a whole token is there.
    expected = 0.0 if tokens - 1 >= 0 else (1 - tokens) / qps
    assert limiter.when("next") == pytest.approx(expected)


def test_bucket_partial_refill_keeps_the_reservation() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=2.0, burst=1, clock=clock)
    assert limiter.when("a") == 0.0
    assert limiter.when("a") == 0.5
    clock.advance(0.5)
    assert limiter.when("a") == 0.5  # the token that appeared was the one reserved
    clock.advance(10.0)
    assert limiter.when("a") == 0.0  # refilled, capped at burst 1
    assert limiter.when("a") == 0.5


def test_bucket_tracks_no_items_and_validates() -> None:
    limiter = BucketRateLimiter(qps=1.0, burst=1, clock=FakeClock())
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert BucketRateLimiter(qps=math.inf, burst=1, clock=FakeClock()).when("a") == 0.0
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0.0)
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=1.0, burst=0)


def test_max_of_takes_the_longest_and_forgets_everywhere() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base=1.0, max=100.0),
        BucketRateLimiter(qps=1.0, burst=1, clock=clock),
    )
    assert limiter.when("a") == 1.0  # exponential 1, bucket 0
    assert limiter.when("b") == 1.0  # exponential 1, bucket 1 (one reservation ahead)
    assert limiter.when("c") == 2.0  # exponential 1, bucket 2
    assert limiter.when("a") == 3.0  # exponential 2, bucket 3
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_default_controller_rate_limiter() -> None:
    limiter = default_controller_rate_limiter(FakeClock())
    # 100 distinct items fit in the burst: each gets the 5 ms first backoff.
    assert [limiter.when(i) for i in range(100)] == [0.005] * 100
    # The 101st waits for the bucket (10 qps) rather than the backoff.
    assert limiter.when("one-more") == pytest.approx(0.1)
    # An item's own backoff dominates once it has failed enough.
    for _ in range(15):
        limiter.when("flaky")
    assert limiter.when("flaky") == pytest.approx(0.005 * 2**15)
    assert limiter.num_requeues("flaky") == 16
    assert limiter.when("x" * 3) >= 0.005
