"""From scrapes to window samples: gauges, counter rates, histogram increases, missing pods."""

from __future__ import annotations

import math

from kthena_py.plan.autoscaling import (
    ExternalSample,
    HistogramSample,
    PodSample,
    Scrape,
    external_sample,
    parse_exposition,
    pod_sample,
)


def scrape(time: float, text: str) -> Scrape:
    return Scrape(time, parse_exposition(text))


def test_gauge_sums_ready_pods_and_counts_missing() -> None:
    ready = {
        "a": scrape(10, "# TYPE load gauge\nload 3\n"),
        "b": scrape(10, "# TYPE load gauge\nload 5\n"),
        "c": scrape(10, "# TYPE other gauge\nother 1\n"),  # lacks the family
        "d": None,  # scrape failed
    }
    assert pod_sample("load", ready, {}, unready=2) == PodSample(8.0, reporting=2, missing=2, unready=2)


def test_counter_rate_needs_a_previous_scrape() -> None:
    previous = {"a": scrape(0, "# TYPE req_total counter\nreq_total 100\n")}
    ready = {
        "a": scrape(10, "# TYPE req_total counter\nreq_total 150\n"),
        "b": scrape(10, "# TYPE req_total counter\nreq_total 7\n"),  # new pod: no rate yet
    }
    sample = pod_sample("req_total", ready, previous)
    assert sample == PodSample(5.0, reporting=1, missing=1, unready=0, weight=10.0)


def test_counter_reset_counts_from_zero() -> None:
    previous = {"a": scrape(0, "# TYPE req_total counter\nreq_total 100\n")}
    ready = {"a": scrape(20, "# TYPE req_total counter\nreq_total 40\n")}
    assert pod_sample("req", ready, previous) == PodSample(2.0, reporting=1, weight=20.0)


def test_kind_mismatch_is_missing() -> None:
    ready = {
        "a": scrape(10, "# TYPE load gauge\nload 3\n"),
        "b": scrape(10, "# TYPE load_total counter\nload_total 3\n"),
    }
    assert pod_sample("load", ready, {}) == PodSample(3.0, reporting=1, missing=1)


def test_histogram_merges_increases_over_pods() -> None:
    def hist(time: float, low: int, total: int) -> Scrape:
        text = (
            f'# TYPE lat histogram\nlat_bucket{{le="1"}} {low}\nlat_bucket{{le="+Inf"}} {total}\n'
            f"lat_count {total}\nlat_sum 0\n"
        )
        return scrape(time, text)

    previous = {"a": hist(0, 1, 2), "b": hist(0, 5, 5)}
    ready = {"a": hist(15, 3, 6), "b": hist(15, 6, 8), "c": hist(15, 1, 1)}
    sample = pod_sample("lat", ready, previous, unready=1)
    assert sample == HistogramSample(((1.0, 3.0), (math.inf, 7.0)), reporting=2, missing=1, unready=1)


def test_no_pods_gives_an_empty_sample() -> None:
    assert pod_sample("load", {}, {}) == PodSample(0.0, reporting=0)


def test_external_sample() -> None:
    assert external_sample(42.5) == ExternalSample(42.5)
    assert external_sample(None) is None
    assert external_sample(math.nan) is None
    assert external_sample(math.inf) is None
