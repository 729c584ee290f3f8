"""Behaviour: stabilization windows and rate limits.

Kthena conformance (reference §6.2, ``GetCorrectedInstances``; Kthena's windows are 1e15 ms, ours 30 min, the
longest the API allows, with the pre-appended history one second old): 16 of the 19 vectors hold. The three
``"Unknown"`` selectPolicy vectors cannot be expressed: the API's enum is ``Or|And`` and :class:`StablePolicy`
rejects anything else (Kthena silently drops the limit).

Deliberate difference: scaling up from a zero base, the percent rule allows nothing, so only the instances rule
applies (with ``And``, Kthena could never leave zero outside panic mode).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kthena_py.api import AutoscalingPolicyStablePolicy
from kthena_py.plan.autoscaling import (
    Behavior,
    ExternalSample,
    MetricTarget,
    PanicPolicy,
    ScaleUpPolicy,
    ScalingHistory,
    ScalingSpec,
    SelectPolicy,
    StablePolicy,
    correct,
    decide,
    scale_down_floor,
    scale_up_ceiling,
)

LONG = 1800.0
NOW = 10_000.0


Limit = tuple[int, int, SelectPolicy]
"""One direction's stable policy in a vector: instances, percent, selectPolicy."""


def behavior(down: Limit, up: Limit, panic_percent: int) -> Behavior:
    def stable(inst: int, pct: int, sel: SelectPolicy) -> StablePolicy:
        return StablePolicy(inst, pct, LONG, sel, LONG)

    return Behavior(
        ScaleUpPolicy(stable(*up), PanicPolicy(panic_percent, LONG, 200, LONG)),
        stable(*down),
    )


DEFAULT: tuple[Limit, Limit, int] = ((2, 20, "Or"), (2, 100, "Or"), 1000)

VECTORS: list[tuple[str, bool, list[int], list[int], tuple[Limit, Limit, int], int, int, int, int, int]] = [
    # name, panic, recs, replicas, (down, up, panic%), min, max, current, recommendation, expected
    ("equal", False, [], [], DEFAULT, 1, 20, 7, 7, 7),
    ("sd Or", False, [], [], ((1, 40, "Or"), (2, 100, "Or"), 1000), 1, 20, 10, 5, 6),
    ("sd And", False, [], [], ((1, 40, "And"), (2, 100, "Or"), 1000), 1, 20, 10, 5, 9),
    ("sd maxRec", False, [9], [], ((2, 20, "Or"), (2, 100, "Or"), 1000), 1, 20, 10, 5, 9),
    ("sd maxCorr", False, [], [12], ((3, 25, "Or"), (2, 100, "Or"), 1000), 1, 20, 10, 3, 9),
    ("su Or", False, [], [], ((2, 20, "Or"), (3, 100, "Or"), 1000), 1, 100, 5, 20, 10),
    ("su And", False, [], [], ((2, 20, "Or"), (3, 100, "And"), 1000), 1, 100, 5, 20, 8),
    ("su minRec", False, [12], [], ((2, 20, "Or"), (3, 100, "Or"), 1000), 1, 100, 5, 20, 10),
    ("su minStable", False, [], [6], ((2, 20, "Or"), (2, 50, "Or"), 1000), 1, 100, 10, 50, 10),
    ("panic 1000%", True, [], [], ((2, 20, "Or"), (2, 100, "Or"), 1000), 1, 100, 5, 15, 15),
    ("panic 100%", True, [], [], ((2, 20, "Or"), (2, 100, "Or"), 100), 1, 100, 5, 15, 10),
    ("panic hist", True, [], [6], ((2, 20, "Or"), (2, 100, "Or"), 100), 1, 100, 10, 30, 12),
    ("panic cur 0", True, [], [], ((2, 20, "Or"), (2, 100, "Or"), 100), 0, 100, 0, 5, 5),
    ("panic past 0", True, [], [0], ((2, 20, "Or"), (2, 100, "Or"), 100), 0, 100, 0, 5, 5),
    ("panic rec<cur", True, [], [], ((2, 20, "Or"), (2, 100, "Or"), 1000), 1, 100, 10, 3, 10),
    ("below min", False, [], [], DEFAULT, 8, 20, 5, 5, 8),
    ("above max", False, [], [], DEFAULT, 1, 10, 15, 15, 10),
]


@pytest.mark.parametrize(
    ("name", "panic", "recs", "replicas", "beh", "low", "high", "current", "rec", "expected"),
    VECTORS,
    ids=[v[0] for v in VECTORS],
)
def test_kthena_correction_vectors(
    name: str,
    panic: bool,
    recs: list[int],
    replicas: list[int],
    beh: tuple[Limit, Limit, int],
    low: int,
    high: int,
    current: int,
    rec: int,
    expected: int,
) -> None:
    history = ScalingHistory(tuple((NOW - 1, v) for v in recs), tuple((NOW - 1, v) for v in replicas))
    result = correct(history, NOW, rec, current, behavior(*beh), panic)
    assert min(max(result.replicas, low), high) == expected
    assert result.low <= result.replicas and (result.high is None or result.replicas <= result.high)


def test_unknown_select_policy_is_rejected() -> None:
    with pytest.raises(ValidationError, match="selectPolicy"):  # the API's enum
        AutoscalingPolicyStablePolicy.model_validate({"selectPolicy": "Unknown"})
    decoded = json.loads('{"selectPolicy": "Unknown"}')  # untyped data that skipped the API model
    with pytest.raises(ValueError, match="selectPolicy must be Or or And"):
        StablePolicy(select_policy=decoded["selectPolicy"])


def test_status_wiring_vector() -> None:
    history = ScalingHistory(replicas=((1.0, 3), (2.0, 8), (3.0, 5)))
    policy = StablePolicy(instances=0, percent=0, period=LONG)
    assert scale_down_floor(history, 4.0, 4, policy) == 4  # max in effect is 8, but never above current
    assert max([4, *history.replicas_in_effect(4.0, LONG)]) == 8


def test_scale_up_from_zero_uses_the_instances_rule() -> None:
    history = ScalingHistory()
    assert scale_up_ceiling(history, NOW, 0, StablePolicy(3, 100, 60, "And")) == 3
    assert scale_up_ceiling(history, NOW, 0, StablePolicy(3, 100, 60, "Or")) == 3
    assert scale_up_ceiling(history, NOW, 0, StablePolicy(0, 100, 60, "Or")) == 0
    assert scale_up_ceiling(history, NOW, 4, StablePolicy(1, 100, 0)) is None


policies = st.builds(
    StablePolicy,
    st.integers(0, 5),
    st.integers(0, 300),
    st.sampled_from([0.0, 15.0, 30.0, 60.0]),
    st.sampled_from(["Or", "And"]),
    st.sampled_from([None, 0.0, 30.0, 120.0]),
)
panics = st.one_of(
    st.none(),
    st.builds(
        PanicPolicy,
        st.integers(0, 1000),
        st.sampled_from([None, 15.0, 60.0]),
        st.sampled_from([None, 110, 200, 400]),
        st.sampled_from([0.0, 30.0, 60.0]),
    ),
)


def in_effect(applied: list[tuple[float, int]], now: float, period: float, current: int) -> list[int]:
    start = now - period
    values = [v for t, v in applied if start <= t <= now] + [v for t, v in applied if t < start][-1:]
    return [current, *values]


@settings(max_examples=200, deadline=None)
@given(
    policies,
    policies,
    panics,
    st.integers(0, 4),
    st.integers(0, 30),
    st.integers(0, 30),
    st.lists(st.tuples(st.sampled_from([5.0, 15.0, 20.0]), st.one_of(st.none(), st.integers(0, 400))), max_size=25),
)
def test_behaviour_limits_are_never_exceeded(
    up: StablePolicy,
    down: StablePolicy,
    panic: PanicPolicy | None,
    low: int,
    span: int,
    start: int,
    trace: list[tuple[float, int | None]],
) -> None:
    spec = ScalingSpec(
        metrics=(MetricTarget("rps", 10),),
        min_replicas=low,
        max_replicas=low + span + 1,
        tolerance_percent=0,
        behavior=Behavior(ScaleUpPolicy(up, panic), down),
    )
    current, now, state = start, 1000.0, None
    applied: list[tuple[float, int]] = []
    for gap, value in trace:
        now += gap
        samples = {} if value is None else {"rps": ExternalSample(float(value))}
        decision = decide(spec, current, now, samples, state)
        desired, state = decision.desired, decision.state
        assert spec.min_replicas <= desired <= spec.max_replicas
        assert decision.allowed[0] <= desired <= decision.allowed[1]
        inside = spec.min_replicas <= current <= spec.max_replicas
        if inside and desired > current:
            if decision.mode == "Panic" and panic is not None and panic.period:
                base = min(in_effect(applied, now, panic.period, current))
                assert base == 0 or desired <= base + base * panic.percent // 100
            elif decision.mode == "Stable" and up.period:
                base = min(in_effect(applied, now, up.period, current))
                by_inst, by_pct = base + up.instances, base + base * up.percent // 100
                limit = by_inst if base == 0 else (max if up.select_policy == "Or" else min)(by_inst, by_pct)
                assert desired <= limit
        if inside and desired < current:
            assert decision.mode == "Stable"
            if down.period:
                base = max(in_effect(applied, now, down.period, current))
                by_inst, by_pct = base - down.instances, base - base * down.percent // 100
                limit = (min if down.select_policy == "Or" else max)(by_inst, by_pct)
                assert desired >= limit
        applied.append((now, desired))
        current = desired
