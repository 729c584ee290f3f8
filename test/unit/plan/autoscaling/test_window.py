"""Metric windows, scaling history and the serialisable state.

Kthena conformance (reference §6.3, window 10 s): the record-window vectors (max and min of recent
recommendations, window 0 never answers) and the line-chart vectors (best replica count in effect during the
last period, current count included) hold for every query except two. Deliberate difference: Kthena forgets
the last applied value ``2 * window`` after it was set (``GetBest(0)`` at t28 answers 0, resp. the current
10); here the last applied count stays in effect until another one is recorded, so t28 answers 2, resp. 4.
The snapshot-window vectors do not apply: windows keep per-pass increments, not histogram snapshots.
"""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.autoscaling import (
    ExternalReading,
    ExternalSample,
    HistogramSample,
    MetricWindow,
    PodReading,
    PodSample,
    ScalingHistory,
    WindowState,
)


def history_of(values: list[tuple[float, int]], *, recs: bool) -> ScalingHistory:
    history = ScalingHistory()
    for time, value in values:
        history = history.record(time, value if recs else None, value, horizon=10)
    return history


def test_max_and_min_record_windows() -> None:
    assert ScalingHistory().recommendations_within(0, 10) == []
    high = history_of([(1, 6), (3, 3), (5, 5), (7, 2)], recs=True)
    answers = [max(r) if (r := high.recommendations_within(t, 10)) else None for t in (7, 12, 14, 16, 18)]
    assert answers == [6, 5, 5, 2, None]
    low = history_of([(1, 6), (3, 3), (5, 5), (7, 7)], recs=True)
    answers = [min(r) if (r := low.recommendations_within(t, 10)) else None for t in (7, 12, 14, 16, 18)]
    assert answers == [3, 3, 5, 7, None]
    zero = ScalingHistory().record(1, 0, 0, horizon=10)
    assert zero.recommendations_within(1, 0) == []


def test_line_chart_windows() -> None:
    assert max([6, *ScalingHistory().replicas_in_effect(0, 10)]) == 6
    high = history_of([(1, 6), (3, 3), (5, 5), (7, 2)], recs=False)
    best = [max([0, *high.replicas_in_effect(t, 10)]) for t in (7, 12, 14, 16, 18, 26, 28)]
    assert best == [6, 6, 5, 5, 2, 2, 2]  # Kthena: ..., 2, 0 (forgets after 2 windows)
    assert max([3, *high.replicas_in_effect(18, 10)]) == 3
    low = history_of([(1, 6), (3, 3), (5, 9), (7, 4)], recs=False)
    best = [min([10, *low.replicas_in_effect(t, 10)]) for t in (7, 12, 14, 16, 18, 26, 28)]
    assert best == [3, 3, 3, 4, 4, 4, 4]  # Kthena: ..., 4, 10
    assert min([2, *low.replicas_in_effect(18, 10)]) == 2


events = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 20)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(events, st.integers(1, 40), st.integers(0, 40))
def test_compaction_never_changes_an_answer(steps: list[tuple[int, int]], horizon: int, window: int) -> None:
    window = min(window, horizon)
    raw_recs: list[tuple[float, int]] = []
    raw_reps: list[tuple[float, int]] = []
    history = ScalingHistory()
    now = 0.0
    for gap, value in steps:
        now += gap
        history = history.record(now, value, value, horizon=horizon)
        raw_recs.append((now, value))
        raw_reps.append((now, value))
        recent = [v for t, v in raw_recs if now - window < t <= now]
        kept = history.recommendations_within(now, window)
        assert (max(recent), min(recent)) == (max(kept), min(kept)) if recent else kept == []
        start = now - window
        effect = [v for t, v in raw_reps if start <= t] + [v for t, v in raw_reps if t < start][-1:]
        assert set(history.replicas_in_effect(now, window)) == set(effect)
    assert len(history.recommendations) <= len(steps)


def test_metric_window_readings() -> None:
    window = MetricWindow()
    window = window.add(0, {"rps": ExternalSample(10), "load": PodSample(4, reporting=2)})
    window = window.add(15, {"rps": ExternalSample(30), "load": PodSample(12, reporting=4, missing=1, unready=2)})
    assert window.reading("rps", 15, 60) == ExternalReading(20)
    assert window.reading("rps", 15, 6) == ExternalReading(30)
    # mean of totals (8) over the pods reporting now (4); counts from the newest pass
    assert window.reading("load", 15, 60) == PodReading(2.0, 4, 1, 2)
    assert window.reading("other", 15, 60) is None
    assert window.prune(75, 60).entries == ()


def test_counter_window_is_a_time_weighted_rate() -> None:
    window = MetricWindow().add(10, {"c": PodSample(3.0, 1, weight=10)}).add(40, {"c": PodSample(6.0, 1, weight=30)})
    reading = window.reading("c", 40, 60)
    assert isinstance(reading, PodReading)
    assert reading.average == (3 * 10 + 6 * 30) / 40


def test_histogram_window_takes_the_quantile_of_the_summed_increase() -> None:
    window = (
        MetricWindow()
        .add(0, {"lat": HistogramSample(((1.0, 2.0), (2.0, 2.0), (math.inf, 2.0)), reporting=3)})
        .add(15, {"lat": HistogramSample(((1.0, 0.0), (2.0, 2.0), (math.inf, 2.0)), reporting=3)})
    )
    # 4 observations: 2 in (0, 1], 2 in (1, 2]; the median is 1.0; a per-pass sum of quantiles would be ~2.
    assert window.reading("lat", 15, 60, 0.5) == PodReading(1.0, 3, 0, 0)
    assert window.reading("lat", 15, 10, 0.5) == PodReading(1.5, 3, 0, 0)


def test_no_reporting_pod_now_means_no_reading() -> None:
    window = MetricWindow().add(0, {"load": PodSample(4, 2)}).add(15, {"load": PodSample(0, 0, missing=2)})
    assert window.reading("load", 15, 60) is None


samples = st.one_of(
    st.builds(ExternalSample, st.floats(-1e9, 1e9)),
    st.builds(PodSample, st.floats(0, 1e9), st.integers(0, 50), st.integers(0, 5), st.integers(0, 5), st.floats(0, 60)),
    st.builds(
        HistogramSample,
        st.just(((0.5, 1.0), (math.inf, 3.0))),
        st.integers(0, 5),
        st.integers(0, 5),
        st.integers(0, 5),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.dictionaries(st.sampled_from("abc"), samples)), max_size=5),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 1000)), max_size=5),
    st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_state_round_trips_through_json(
    passes: list[tuple[int, dict[str, ExternalSample | PodSample | HistogramSample]]],
    history: list[tuple[int, int]],
    panic_until: int | None,
) -> None:
    window = MetricWindow()
    for time, pass_samples in passes:
        window = window.add(float(time), dict(pass_samples))
    pairs = tuple((float(t), v) for t, v in sorted(history))
    state = WindowState(window, ScalingHistory(pairs, pairs, None if panic_until is None else float(panic_until)))
    text = json.dumps(state.to_dict(), allow_nan=False)
    assert WindowState.from_dict(json.loads(text)) == state
    persisted = WindowState.from_dict(json.loads(json.dumps(state.to_dict(include_metrics=False))))
    assert persisted == WindowState(MetricWindow(), state.history)


def test_malformed_state_is_a_value_error() -> None:
    for bad in ({}, {"version": 2, "history": {}}, {"version": 1, "history": {"replicas": [[1]]}}):
        try:
            WindowState.from_dict(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")
