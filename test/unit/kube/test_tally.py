"""``Tally``, ``TallyGauge``, ``TallyHistogram``: lock-free metrics read as prometheus-client's at scrape time."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kthena_py.kube.tally import Tally, TallyGauge, TallyHistogram


def registry_with(tally: Tally) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(tally)
    return registry


def test_increments_are_read_exactly_at_scrape_time() -> None:
    tally = Tally("demo_events_total", "Events.", ("resource", "type"))
    registry = registry_with(tally)
    pods = tally.labels("pods", "ADDED")
    for _ in range(5):
        pods.inc()
    tally.labels("services", "DELETED").inc(2.5)
    assert registry.get_sample_value("demo_events_total", {"resource": "pods", "type": "ADDED"}) == 5
    assert registry.get_sample_value("demo_events_total", {"resource": "services", "type": "DELETED"}) == 2.5
    pods.inc(3)
    assert registry.get_sample_value("demo_events_total", {"resource": "pods", "type": "ADDED"}) == 8


def test_the_exposition_matches_a_counters_but_for_the_created_sample() -> None:
    tally = Tally("demo_bytes_total", "Bytes received.", ("resource",))
    counter = Counter("demo_bytes_total", "Bytes received.", ("resource",), registry=CollectorRegistry())
    tally.labels("pods").inc(42)
    counter.labels("pods").inc(42)
    ours = generate_latest(registry_with(tally)).decode()
    theirs = "".join(
        line + "\n"
        for line in generate_latest(counter).decode().splitlines()
        if "_created" not in line  # type: ignore[arg-type]
    )
    assert ours == theirs


def test_the_same_label_values_give_the_same_series() -> None:
    tally = Tally("demo_total", "Demo.", ("a",))
    assert tally.labels("x") is tally.labels("x")
    assert tally.labels("x") is not tally.labels("y")


def test_wrong_label_counts_and_names_are_refused() -> None:
    tally = Tally("demo_total", "Demo.", ("a", "b"))
    with pytest.raises(ValueError, match="label values"):
        tally.labels("only-one")
    with pytest.raises(ValueError, match="_total"):
        Tally("demo", "Demo.", ())


def test_a_scrape_while_series_are_added_does_not_fail() -> None:
    tally = Tally("demo_total", "Demo.", ("n",))
    registry = registry_with(tally)
    stop = threading.Event()
    errors: list[BaseException] = []

    def scrape() -> None:
        try:
            while not stop.is_set():
                generate_latest(registry)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for i in range(20_000):
            tally.labels(str(i)).inc()
    finally:
        stop.set()
        scraper.join()
    assert errors == []
    assert registry.get_sample_value("demo_total", {"n": "19999"}) == 1


# -- gauges and histograms -------------------------------------------------------------------------------------------

BUCKETS = (1e-8, 0.005, 0.1, 1.0, 2.5, 60.0)


def _without_created(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if "_created" not in line)


def _same_as_prometheus_client(values: list[float], buckets: tuple[float, ...] = BUCKETS) -> None:
    ours = TallyHistogram("demo_seconds", "Demo durations.", ("verb",), buckets=buckets)
    theirs = Histogram("demo_seconds", "Demo durations.", ("verb",), buckets=buckets, registry=CollectorRegistry())
    for value in values:
        ours.labels("GET").observe(value)
        theirs.labels("GET").observe(value)
    registry = CollectorRegistry()
    registry.register(ours)
    assert generate_latest(registry).decode() == _without_created(generate_latest(theirs).decode())  # type: ignore[arg-type]


def test_a_histogram_is_exposed_as_prometheus_client_exposes_the_same_observations() -> None:
    # Values on the bounds go into the bucket they bound (``le`` is inclusive); beyond the last, into +Inf.
    _same_as_prometheus_client([0.0, 1e-8, 0.005, 0.0050001, 0.2, 1.0, 59.0, 60.0, 61.0, 3600.0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), max_size=40))
def test_any_observations_give_prometheus_client_s_exposition(values: list[float]) -> None:
    _same_as_prometheus_client(values)


def test_a_histogram_with_inf_given_and_one_without_expose_the_same_buckets() -> None:
    with_inf = TallyHistogram("a_seconds", "A.", (), buckets=(1.0, float("inf")))
    without = TallyHistogram("a_seconds", "A.", (), buckets=(1.0,))
    for histogram in (with_inf, without):
        histogram.labels().observe(2.0)
    assert [s for m in with_inf.collect() for s in m.samples] == [s for m in without.collect() for s in m.samples]
    with pytest.raises(ValueError, match="ascending"):
        TallyHistogram("b_seconds", "B.", (), buckets=(2.0, 1.0))


def test_a_gauge_is_exposed_as_prometheus_client_exposes_the_same_value() -> None:
    ours = TallyGauge("demo_depth", "Depth.", ("name",))
    theirs = Gauge("demo_depth", "Depth.", ("name",), registry=CollectorRegistry())
    for gauge in (ours.labels("q"), theirs.labels("q")):
        gauge.set(7)
        gauge.inc(2)
        gauge.dec()
    ours.labels("gone").set(1)
    ours.remove("gone")
    registry = CollectorRegistry()
    registry.register(ours)
    assert generate_latest(registry).decode() == generate_latest(theirs).decode()  # type: ignore[arg-type]
    assert registry.get_sample_value("demo_depth", {"name": "q"}) == 8
