"""Trace replay through the real decision code with a virtual clock."""

from __future__ import annotations

import pytest

from kthena_py.plan.autoscaling import (
    Behavior,
    MetricTarget,
    PanicPolicy,
    ScaleUpPolicy,
    ScalingSpec,
    StablePolicy,
    TracePoint,
    simulate,
)

BURST = [TracePoint(0, {"rps": 0}), TracePoint(60, {"rps": 100}), TracePoint(300, {"rps": 0})]


def spec(panic: bool = True, low: int = 0) -> ScalingSpec:
    return ScalingSpec(
        metrics=(MetricTarget("rps", 10),),
        min_replicas=low,
        max_replicas=20,
        tolerance_percent=10,
        behavior=Behavior(
            ScaleUpPolicy(StablePolicy(instances=4, period=60), PanicPolicy() if panic else None),
            StablePolicy(instances=0, percent=100, period=60, stabilization_window=120),
        ),
    )


def test_scale_from_zero_and_back() -> None:
    timeline = simulate(spec(), BURST, 0, end=600)
    by_time = {p.time: p for p in timeline}
    assert [p.time for p in timeline] == [15.0 * i for i in range(41)]
    assert by_time[45].desired == 0
    assert by_time[60].desired == 10 and by_time[60].mode == "Panic"
    assert all(p.desired == 10 for p in timeline if 60 <= p.time < 300)
    assert timeline[-1].desired == 0
    drop = min(p.time for p in timeline if p.time > 300 and p.desired < 10)
    assert drop >= 300 + 60  # the panic hold, then the stable window and the stabilization window
    assert timeline == simulate(spec(), BURST, 0, end=600)


def test_without_panic_scale_up_is_rate_limited() -> None:
    timeline = simulate(spec(panic=False), BURST, 0, end=300)
    steps = [p.desired for p in timeline if p.time >= 60]
    # the stable window (60 s) averages the burst in: 25 rps -> 3; then at most +4 (or +100%) per 60 s
    assert steps[:8] == [3, 4, 4, 4, 4, 7, 8, 8]
    assert steps[-1] == 10


def test_pod_source_with_ready_delay() -> None:
    trace = [TracePoint(0, {"rps": 10}), TracePoint(30, {"rps": 60})]
    timeline = simulate(spec(low=1), trace, 1, end=240, source="pods", ready_delay=45)
    assert timeline[0].ready == 1
    assert max(p.desired for p in timeline) == 6
    grown = next(p for p in timeline if p.current > 1)
    assert grown.ready < grown.current  # new replicas are not ready yet
    assert timeline[-1].ready == timeline[-1].current == 6


def test_pods_cannot_scale_from_zero() -> None:
    timeline = simulate(spec(), BURST, 0, end=120, source="pods")
    assert all(p.desired == 0 and p.recommended is None for p in timeline)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        simulate(spec(), BURST, 0, sync_period=0)
    with pytest.raises(ValueError):
        simulate(spec(), [], 0)
