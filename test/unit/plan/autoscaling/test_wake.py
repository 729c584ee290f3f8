"""The wake-up guard: a target the activator raised from zero is not scaled back to zero at once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.autoscaling import (
    Behavior,
    ExternalSample,
    MetricTarget,
    ScaleUpPolicy,
    ScalingHistory,
    ScalingSpec,
    StablePolicy,
    WindowState,
    decide,
    guard_zero,
    woken_at,
)

UNLIMITED = Behavior(ScaleUpPolicy(StablePolicy(period=0)), StablePolicy(period=0))
DEMAND = ScalingSpec((MetricTarget("demand", 1),), 0, 10, 0, UNLIMITED, stable_window=20.0, panic_window=5.0)


def history(*replicas: tuple[float, int]) -> ScalingHistory:
    return ScalingHistory(recommendations=(), replicas=replicas)


@pytest.mark.parametrize(
    ("applied", "current", "now", "expected"),
    [
        ((), 1, 100.0, None),  # no history: nothing to guard
        (((10.0, 0),), 0, 100.0, None),  # still at zero
        (((10.0, 0),), 1, 100.0, 100.0),  # this pass is the first to see the wake-up
        (((10.0, 0), (50.0, 1)), 1, 100.0, 50.0),  # seen at 50
        (((10.0, 0), (50.0, 1), (60.0, 3)), 3, 100.0, 50.0),  # the first change point after the last zero
        (((10.0, 2), (50.0, 1)), 1, 100.0, None),  # never at zero
        (((10.0, 0), (20.0, 1), (30.0, 0), (40.0, 1)), 1, 100.0, 40.0),  # the last wake-up counts
    ],
)
def test_woken_at(applied: tuple[tuple[float, int], ...], current: int, now: float, expected: float | None) -> None:
    assert woken_at(history(*applied), current, now) == expected


@pytest.mark.parametrize(
    ("desired", "applied", "current", "now", "max_replicas", "expected"),
    [
        (0, ((10.0, 0),), 1, 100.0, 10, 1),  # first pass after the wake: keep the pod
        (0, ((10.0, 0), (90.0, 1)), 1, 100.0, 10, 1),  # 10 s after the wake, guard 20 s
        (0, ((10.0, 0), (80.0, 1)), 1, 100.0, 10, 0),  # 20 s after: zero allowed
        (3, ((10.0, 0),), 1, 100.0, 10, 3),  # demand still scales up
        (0, ((10.0, 2),), 2, 100.0, 10, 0),  # never woken: zero allowed
        (0, ((10.0, 0),), 1, 100.0, 0, 0),  # maxReplicas 0 wins
    ],
)
def test_guard_zero(
    desired: int,
    applied: tuple[tuple[float, int], ...],
    current: int,
    now: float,
    max_replicas: int,
    expected: int,
) -> None:
    result, reason = guard_zero(desired, history(*applied), current, now, 20.0, max_replicas)
    assert result == expected
    assert (reason is not None) == (result != desired)


def at_zero(now: float) -> WindowState:
    """The state of a policy that held its target at zero with no demand up to ``now``."""
    state = WindowState()
    for t in range(int(now) - 60, int(now), 5):
        state = decide(DEMAND, 0, float(t), {"demand": ExternalSample(0)}, state).state
    return state


def test_a_wake_with_lagging_demand_is_not_undone_until_a_stable_window_passed() -> None:
    state = at_zero(100.0)
    # The activator wrote 0 -> 1; Prometheus has not scraped the held request yet: demand reads 0.
    first = decide(DEMAND, 1, 100.0, {"demand": ExternalSample(0)}, state)
    assert first.desired == 1
    assert any("woken from zero" in r for r in first.reasons)
    assert first.allowed[0] <= first.desired <= first.allowed[1]
    later = decide(DEMAND, 1, 110.0, {"demand": ExternalSample(0)}, first.state)
    assert later.desired == 1
    quiet = decide(DEMAND, 1, 120.0, {"demand": ExternalSample(0)}, later.state)
    assert quiet.desired == 0  # one stable window of no demand after the wake-up: back to zero


def test_demand_seen_after_the_wake_scales_up_without_the_guard() -> None:
    state = at_zero(100.0)
    decision = decide(DEMAND, 1, 100.0, {"demand": ExternalSample(12)}, state)  # window average 3
    assert decision.desired >= 2
    assert not any("woken from zero" in r for r in decision.reasons)


def test_without_a_wake_the_policy_scales_to_zero_at_once() -> None:
    state = WindowState()
    for t in (85.0, 90.0, 95.0):
        state = decide(DEMAND, 1, t, {"demand": ExternalSample(1)}, state).state
    assert decide(DEMAND, 1, 100.0, {"demand": ExternalSample(0)}, state).desired == 1  # window average > 0
    assert decide(DEMAND, 1, 130.0, {"demand": ExternalSample(0)}, state).desired == 0


@given(
    wake=st.floats(min_value=0, max_value=1000, allow_nan=False),
    after=st.floats(min_value=0, max_value=19.999, allow_nan=False),
    current=st.integers(min_value=1, max_value=10),
)
def test_never_zero_within_one_stable_window_of_a_wake(wake: float, after: float, current: int) -> None:
    woken = history((wake - 30.0, 0), (wake, current))
    state = WindowState(history=woken)
    decision = decide(DEMAND, current, wake + after, {"demand": ExternalSample(0)}, state)
    assert decision.desired >= 1
    assert DEMAND.min_replicas <= decision.desired <= DEMAND.max_replicas
