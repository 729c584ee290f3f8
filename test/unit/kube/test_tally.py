"""``Tally``: lock-free counters read as Prometheus counters at scrape time."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from kthena_py.kube.tally import Tally


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
