"""Pod selection, scraping (timeouts, failures, concurrency bounds) and sample building, on loopback servers."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kthena_py.api.autoscaling import MetricSource
from kthena_py.controllers.autoscaling.collector import (
    Backend,
    PodScraper,
    collect,
    filter_exposition,
    is_ratio_metric,
    pod_state,
    scrape_url,
    select_pods,
    selector_matches,
)
from kthena_py.plan.autoscaling import ExternalSample, HistogramSample, MetricTarget, PodSample, parse_exposition

from .conftest import MetricsServers, PrometheusServer, counter, gauge, pod


def pod_source(port: int, name: str | None = None, **extra: object) -> MetricSource:
    body: dict[str, object] = {"port": port, **extra}
    if name:
        body["name"] = name
    return MetricSource.model_validate({"pod": body})


def backend(pods: list[dict[str, Any]], sources: dict[str, MetricSource], *, replicas: int | None = None) -> Backend:
    """The whole ModelServing ``ns/ms`` with ``pods`` (as many replicas as pods unless ``replicas`` says)."""
    return Backend("ns", "ms", None, len(pods) if replicas is None else replicas, pods, sources)


VLLM = """# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama"} 3.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="llama"} 120.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.5",model_name="llama"} 2.0
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="llama"} 4.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="llama"} 5.0
vllm:e2e_request_latency_seconds_count{model_name="llama"} 5.0
vllm:e2e_request_latency_seconds_sum{model_name="llama"} 3.2
# TYPE other_summary summary
other_summary{quantile="0.5"} 1
other_summary_sum 3
other_summary_count 2
"""


def test_filter_keeps_exactly_the_requested_families() -> None:
    for names in (
        ["vllm:num_requests_waiting"],
        ["vllm:prompt_tokens_total"],
        ["vllm:prompt_tokens"],
        ["vllm:e2e_request_latency_seconds"],
        ["vllm:num_requests_waiting", "vllm:e2e_request_latency_seconds"],
    ):
        assert parse_exposition(filter_exposition(VLLM, names), names) == parse_exposition(VLLM, names)
    assert "other_summary" not in filter_exposition(VLLM, ["vllm:num_requests_waiting"])


def test_selectors() -> None:
    labels = {"app": "a", "tier": "gpu"}
    assert selector_matches(None, labels)
    assert selector_matches({"matchLabels": {"app": "a"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "b"}}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "x", "operator": "In", "values": ["gpu"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["cpu"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, labels)
    with pytest.raises(ValueError, match="unknown label selector operator"):
        selector_matches({"matchExpressions": [{"key": "app", "operator": "Gt"}]}, labels)


def test_select_pods_follows_kthena_rules() -> None:
    pods = [
        pod("entry", "127.0.0.1", extra_labels={"app": "router"}),
        pod("worker", "127.0.0.2", entry=False, extra_labels={"app": "router"}),
        pod("other-ms", "127.0.0.3", ms="other", extra_labels={"app": "router"}),
        pod("no-app", "127.0.0.4"),
        pod("decode", "127.0.0.5", role="decode", extra_labels={"app": "router"}),
    ]
    chosen = select_pods(pods, "ms", None, {"matchLabels": {"app": "router"}})
    assert [p["metadata"]["name"] for p in chosen] == ["entry", "decode"]
    # The fixed labels win over the user's matchLabels of the same key.
    chosen = select_pods(pods, "ms", "decode", {"matchLabels": {"modelserving.volcano.sh/name": "other"}})
    assert [p["metadata"]["name"] for p in chosen] == ["decode"]


def test_pod_state_and_urls() -> None:
    assert pod_state(pod("a", "10.1.2.3")) == ("ready", "10.1.2.3")
    assert pod_state(pod("a", "10.1.2.3", ready=False))[0] == "unready"
    assert pod_state(pod("a", "", ready=True))[0] == "unready"
    assert pod_state(pod("a", "10.1.2.3", phase="Pending", ready=False))[0] == "unready"
    assert pod_state(pod("a", "10.1.2.3", phase="Failed"))[0] == "ignored"
    assert pod_state(pod("a", "10.1.2.3", deleting=True))[0] == "ignored"
    assert scrape_url("10.1.2.3", 8100, "/metrics") == "http://10.1.2.3:8100/metrics"
    assert scrape_url("fd00::1", 8000, "/custom-metrics") == "http://[fd00::1]:8000/custom-metrics"


def test_ratio_metric_names() -> None:
    for name in ("gpu_utilization", "cache_usage", "fill_ratio", "load_percent", "queue_saturation", "CPU_UTILIZATION"):
        assert is_ratio_metric(name)
    for name in ("queue_length", "request_rate", "gpu_utilization_rate", "pending_requests"):
        assert not is_ratio_metric(name)


async def test_gauges_are_averaged_per_replica_and_failures_are_missing(servers: MetricsServers) -> None:
    ips = ["127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24", "127.0.0.25"]
    await servers.start(ips)
    servers.bodies.update({ips[0]: gauge("load", 4), ips[1]: gauge("load", 6), ips[4]: gauge("other", 1)})
    servers.status[ips[2]] = 500
    servers.hang.add(ips[3])
    pods = [
        pod("p0", ips[0], group="ms-0"),
        pod("p1", ips[1], group="ms-1"),
        pod("p2", ips[2], group="ms-2"),
        pod("p3", ips[3], group="ms-3"),
        pod("p4", ips[4], group="ms-4"),
        pod("p5", "127.0.0.26", group="ms-5", ready=False),
        pod("p6", "127.0.0.27", group="ms-6", phase="Failed"),
    ]
    scraper = PodScraper(timeout=0.5, concurrency=2)
    try:
        result = await collect(
            scraper, [backend(pods, {"load": pod_source(servers.port)})], [MetricTarget("load", 1)], {}, deadline=30
        )
    finally:
        await scraper.close()
    sample = result.samples["load"]
    # 2 reporting (4 + 6), 3 missing (HTTP 500, timeout, family absent), 1 unready, the Failed pod ignored.
    assert sample == PodSample(total=10.0, reporting=2, missing=3, unready=1)
    assert result.pod_errors == 2
    report = result.reports[0]
    assert report.sample is not None
    assert report.error is not None and "HTTP 500" in report.error and "timed out" in report.error


async def test_deadline_bounds_the_whole_pass(servers: MetricsServers) -> None:
    ips = [f"127.0.1.{i}" for i in range(1, 9)]
    await servers.start(ips)
    servers.hang.update(ips[1:])
    servers.bodies[ips[0]] = gauge("load", 2)
    pods = [pod(f"p{i}", ip, group=f"ms-{i}") for i, ip in enumerate(ips)]
    scraper = PodScraper(timeout=30, concurrency=1)
    try:
        # The first request may be queued behind a hanging one: the deadline ends the pass regardless.
        result = await collect(
            scraper, [backend(pods, {"load": pod_source(servers.port)})], [MetricTarget("load", 1)], {}, deadline=0.5
        )
    finally:
        await scraper.close()
    assert result.pod_errors >= 7
    assert "deadline" in (result.reports[0].error or "")


async def test_entry_pods_of_one_group_are_one_replica(servers: MetricsServers) -> None:
    ips = ["127.0.2.1", "127.0.2.2", "127.0.2.3"]
    await servers.start(ips)
    servers.bodies.update({ip: gauge("load", v) for ip, v in zip(ips, (1, 2, 5), strict=True)})
    pods = [pod("a", ips[0], group="ms-0"), pod("b", ips[1], group="ms-0"), pod("c", ips[2], group="ms-1")]
    scraper = PodScraper()
    try:
        result = await collect(
            scraper, [backend(pods, {"load": pod_source(servers.port)})], [MetricTarget("load", 1)], {}
        )
        # A group with one unready entry pod is an unready replica.
        pods[1]["status"]["conditions"][0]["status"] = "False"
        degraded = await collect(
            scraper, [backend(pods, {"load": pod_source(servers.port)})], [MetricTarget("load", 1)], {}
        )
    finally:
        await scraper.close()
    assert result.samples["load"] == PodSample(total=8.0, reporting=2)
    assert degraded.samples["load"] == PodSample(total=5.0, reporting=1, unready=1)


async def test_counters_are_rated_against_the_previous_scrape(servers: MetricsServers) -> None:
    ips = ["127.0.3.1"]
    await servers.start(ips)
    times = iter([100.0, 110.0, 120.0])
    scraper = PodScraper(wall_clock=lambda: next(times))
    sources = {"tokens": pod_source(servers.port, name="vllm:prompt_tokens_total")}
    pods = [pod("a", ips[0])]
    try:
        servers.bodies[ips[0]] = counter("vllm:prompt_tokens", 100)
        first = await collect(scraper, [backend(pods, sources)], [MetricTarget("tokens", 1)], {})
        servers.bodies[ips[0]] = counter("vllm:prompt_tokens", 150)
        second = await collect(scraper, [backend(pods, sources)], [MetricTarget("tokens", 1)], first.memory)
        servers.bodies[ips[0]] = counter("vllm:prompt_tokens", 20)  # a restart: the new value is the increase
        third = await collect(scraper, [backend(pods, sources)], [MetricTarget("tokens", 1)], second.memory)
    finally:
        await scraper.close()
    assert first.samples["tokens"] == PodSample(total=0.0, reporting=0, missing=1, weight=1.0)
    assert first.missing == ["tokens"]
    assert second.samples["tokens"] == PodSample(total=5.0, reporting=1, weight=10.0)
    assert third.samples["tokens"] == PodSample(total=2.0, reporting=1, weight=10.0)


async def test_histograms_give_the_increase(servers: MetricsServers) -> None:
    ips = ["127.0.4.1"]
    await servers.start(ips)
    sources = {"latency": pod_source(servers.port, name="vllm:e2e_request_latency_seconds")}
    pods = [pod("a", ips[0])]
    times = iter([1.0, 2.0])
    scraper = PodScraper(wall_clock=lambda: next(times))
    try:
        servers.bodies[ips[0]] = VLLM
        first = await collect(scraper, [backend(pods, sources)], [MetricTarget("latency", 1)], {})
        servers.bodies[ips[0]] = VLLM.replace('le="+Inf",model_name="llama"} 5.0', 'le="+Inf",model_name="llama"} 9.0')
        second = await collect(scraper, [backend(pods, sources)], [MetricTarget("latency", 1)], first.memory)
    finally:
        await scraper.close()
    sample = second.samples["latency"]
    assert isinstance(sample, HistogramSample)
    assert sample.reporting == 1
    assert sample.buckets == ((0.5, 0.0), (1.0, 0.0), (math.inf, 4.0))


async def test_prometheus_sources_and_heterogeneous_aggregation(prometheus: PrometheusServer) -> None:
    prometheus.answers.update({"q_a": 100, "q_b": 200, "u_a": 60, "u_b": 70})
    url = prometheus.url

    def prom(query: str) -> MetricSource:
        return MetricSource.model_validate({"prometheus": {"serverURL": url, "query": query}})

    backends = [
        backend([], {"queue_length": prom("q_a"), "gpu_utilization": prom("u_a"), "shared": prom("q_a")}, replicas=3),
        backend([], {"queue_length": prom("q_b"), "gpu_utilization": prom("u_b"), "shared": prom("q_a")}, replicas=1),
    ]
    metrics = [MetricTarget("queue_length", 1), MetricTarget("gpu_utilization", 1), MetricTarget("shared", 1)]
    scraper = PodScraper()
    try:
        result = await collect(scraper, backends, metrics, {})
        prometheus.answers.pop("q_b")
        failed = await collect(scraper, backends, metrics, {})
    finally:
        await scraper.close()
    assert result.samples == {
        "queue_length": ExternalSample(300.0),
        "gpu_utilization": ExternalSample(62.5),  # replica-weighted mean
        "shared": ExternalSample(100.0),  # the same query on both targets counts once
    }
    assert sorted(prometheus.queries[:4]) == ["q_a", "q_b", "u_a", "u_b"]  # each distinct query once
    assert failed.samples["queue_length"] is None
    assert failed.query_errors == 1
    assert "HTTP 400" in (failed.reports[0].error or "")


async def test_missing_or_mixed_sources_are_reported() -> None:
    scraper = PodScraper()
    try:
        result = await collect(scraper, [backend([], {})], [MetricTarget("load", 1)], {})
    finally:
        await scraper.close()
    assert result.samples == {"load": None}
    assert "no usable metricSources entry for load" in (result.reports[0].error or "")
