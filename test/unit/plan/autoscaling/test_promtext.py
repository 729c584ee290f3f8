"""Prometheus text parsing and the reductions (counter increase, histogram increase, histogram_quantile).

Kthena conformance (reference §6.4 and §6.5):

* §6.5 parsing vectors hold: counter samples 2 and 3 sum to 5, gauge samples 4 and 6 to 10, a malformed line is
  an error. Deliberate difference: an untyped family (no ``# TYPE``) reads as a gauge (Kthena drops the whole
  pod group) and a summary makes only that family unusable.
* §6.4 histogram vectors do **not** apply: Kthena ranks with ``ceil(n * p / 100)`` in integers, reads the
  ``+Inf`` bucket as twice the last bound and answers 0 for an empty difference. The issue asks for PromQL's
  ``histogram_quantile`` (rank ``q * n``, linear interpolation, the largest finite bound for the ``+Inf``
  bucket, no answer for an empty histogram); the table below is that semantics, worked by hand.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.autoscaling import (
    ExpositionError,
    Histogram,
    Scalar,
    Unsupported,
    counter_increase,
    find_family,
    histogram_increase,
    histogram_quantile,
    merge_histograms,
    parse_exposition,
)

INF = math.inf

TEXT = """\
# TYPE requests_total counter
requests_total{pod="a"} 2
requests_total{pod="b"} 3
# TYPE queue_depth gauge
queue_depth{model="x"} 4
queue_depth{model="y"} 6
load 1.5
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting 7
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.5",path="/a"} 2
latency_seconds_bucket{le="1",path="/a"} 3
latency_seconds_bucket{le="+Inf",path="/a"} 4
latency_seconds_sum{path="/a"} 2.5
latency_seconds_count{path="/a"} 4
latency_seconds_bucket{le="0.5",path="/b"} 1
latency_seconds_bucket{le="1",path="/b"} 1
latency_seconds_bucket{le="+Inf",path="/b"} 2
latency_seconds_sum{path="/b"} 3
latency_seconds_count{path="/b"} 2
# TYPE rpc summary
rpc{quantile="0.5"} 1
rpc_sum 1
rpc_count 1
"""


def test_parse_sums_label_sets_and_merges_histograms() -> None:
    families = parse_exposition(TEXT)
    assert find_family(families, "requests_total") == Scalar("counter", 5.0)
    assert find_family(families, "requests") == Scalar("counter", 5.0)
    assert families["queue_depth"] == Scalar("gauge", 10.0)
    assert families["load"] == Scalar("gauge", 1.5)  # untyped reads as a gauge
    assert families["vllm:num_requests_waiting"] == Scalar("gauge", 7.0)
    assert families["latency_seconds"] == Histogram(((0.5, 3.0), (1.0, 4.0), (INF, 6.0)), 5.5)
    assert isinstance(families["rpc"], Unsupported)


def test_parse_filters_names() -> None:
    assert set(parse_exposition(TEXT, ["requests_total", "load"])) == {"requests", "load"}


def test_single_sample_families() -> None:
    assert parse_exposition("# TYPE c_total counter\nc_total 2.5\n")["c"] == Scalar("counter", 2.5)
    assert parse_exposition("# TYPE g gauge\ng 4.5\n")["g"] == Scalar("gauge", 4.5)


def test_malformed_text_is_an_error() -> None:
    with pytest.raises(ExpositionError):
        parse_exposition('queue_depth{model="x" 4\n')


def test_histogram_layout_mismatch_is_unsupported() -> None:
    text = (
        "# TYPE h histogram\n"
        'h_bucket{le="1",a="1"} 1\nh_bucket{le="+Inf",a="1"} 1\n'
        'h_bucket{le="2",a="2"} 1\nh_bucket{le="+Inf",a="2"} 1\n'
    )
    assert isinstance(parse_exposition(text)["h"], Unsupported)


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [(2.0, 5.0, 3.0), (5.0, 5.0, 0.0), (10.0, 3.0, 3.0), (0.0, 0.0, 0.0)],
)
def test_counter_increase(previous: float, current: float, expected: float) -> None:
    assert counter_increase(previous, current) == expected


def test_histogram_increase_and_reset() -> None:
    before = Histogram(((0.5, 2.0), (INF, 5.0)), 1.0)
    after = Histogram(((0.5, 4.0), (INF, 10.0)), 3.0)
    assert histogram_increase(before, after) == Histogram(((0.5, 2.0), (INF, 5.0)), 2.0)
    restarted = Histogram(((0.5, 1.0), (INF, 1.0)), 0.2)
    assert histogram_increase(after, restarted) == restarted
    assert histogram_increase(None, after) == after
    relaid = Histogram(((1.0, 20.0), (INF, 20.0)))
    assert histogram_increase(after, relaid) == relaid


def test_merge_histograms() -> None:
    a = Histogram(((1.0, 1.0), (INF, 2.0)), 1.0)
    assert merge_histograms([a, a]) == Histogram(((1.0, 2.0), (INF, 4.0)), 2.0)
    assert merge_histograms([]) is None
    with pytest.raises(ValueError):
        merge_histograms([a, Histogram(((2.0, 1.0), (INF, 2.0)))])


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (1.0, ((0.5, 2), (0.75, 4), (INF, 5)), 0.75),  # rank in +Inf: the largest finite bound
        (0.5, ((0.5, 2), (0.75, 4), (INF, 5)), 0.5625),
        (0.01, ((0.5, 1), (0.75, 4), (INF, 5)), 0.025),  # lowest bucket starts at 0
        (0.5, ((0.5, 0), (0.75, 5), (INF, 5)), 0.625),
        (0.95, ((1.0, 1), (INF, 1)), 0.95),
        (0.5, ((0.0, 3), (1.0, 4), (INF, 4)), 0.0),  # first bound <= 0 is returned as is
        (0.0, ((1.0, 2), (INF, 4)), 0.0),
        (0.95, ((0.5, 0), (INF, 0)), None),  # no observation
        (0.95, ((0.5, 1), (1.0, 2)), None),  # no +Inf bucket
        (0.5, ((INF, 3),), None),  # no finite bucket
    ],
)
def test_histogram_quantile(q: float, buckets: tuple[tuple[float, float], ...], expected: float | None) -> None:
    result = histogram_quantile(q, Histogram(tuple((b, float(c)) for b, c in buckets)))
    assert result == (None if expected is None else pytest.approx(expected))


def test_histogram_quantile_rejects_bad_quantile() -> None:
    with pytest.raises(ValueError):
        histogram_quantile(1.5, Histogram(((1.0, 1.0), (INF, 1.0))))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=6),
    st.floats(0, 1),
)
def test_quantile_lies_within_the_finite_range_and_is_monotone(counts: list[int], q: float) -> None:
    bounds = [0.1 * (i + 1) for i in range(len(counts))]
    cumulative = [float(sum(counts[: i + 1])) for i in range(len(counts))]
    histogram = Histogram((*zip(bounds, cumulative, strict=True), (INF, cumulative[-1] + 1)))
    value = histogram_quantile(q, histogram)
    assert value is not None
    assert 0 <= value <= bounds[-1] + 1e-12
    higher = histogram_quantile(min(1.0, q + 0.1), histogram)
    assert higher is not None and higher >= value - 1e-12


def test_counter_declared_without_total_suffix() -> None:
    families = parse_exposition("# TYPE c counter\nc_total 2.5\n# TYPE e counter\n")
    assert families == {"c": Scalar("counter", 2.5)}
    assert find_family(families, "c_total") == Scalar("counter", 2.5)
