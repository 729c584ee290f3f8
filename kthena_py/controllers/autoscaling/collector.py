"""Metric collection for one pass of one policy: pod scrapes and Prometheus queries, turned into window samples.

Pod selection (Kthena's rules, autoscaler.md §1.2): pods of the target's namespace labelled
``modelserving.volcano.sh/name=<target>`` and ``modelserving.volcano.sh/entry=true`` that also match the pod
source's ``labelSelector`` (the two fixed labels win over the user's ``matchLabels``); for a disaggregated role
``modelserving.volcano.sh/role=<role>`` is added. Each selected pod is scraped at
``http://<podIP>:<port>/<uri>`` (``port`` from the pod source, default 8100; IPv6 bracketed) once per
``(uri, port, labelSelector)`` group, however many metrics the group serves.

Guarantees:

* **Never blocked by a slow or broken pod.** Every scrape is bounded by ``timeout`` seconds (connect, answer and
  body), at most ``concurrency`` scrapes of one pass run at once, and the whole collection is bounded by
  ``deadline`` seconds: whatever has not answered by then counts as failed. Passes of different policies use
  independent limits (only the connection pool is shared), so one policy never waits for another's pods.
  Bodies are capped (``max_body`` bytes) and filtered down to the requested families before parsing, so a
  large ``/metrics`` page costs little event-loop time.
* **One sample per scaling-unit replica** (the planners' per-pod unit): a homogeneous or heterogeneous target's
  replica is a ServingGroup (entry pods sharing ``modelserving.volcano.sh/group-name`` are added up first); a
  role's replica is a role ordinal (entry pods sharing ``modelserving.volcano.sh/role-id`` across groups).
  A replica is *ready* when all its selected entry pods are Running and Ready with an IP; otherwise it is
  *unready* (counted, not scraped). Terminating, Failed and Succeeded pods are ignored.
* **Missing data like the Kubernetes HPA**: a ready replica whose scrape failed, or that lacks the family, is
  *missing*; the recommendation applies the HPA rules to missing and unready replicas. A failing pod never
  discards the values of the other pods (Kthena drops the whole group).
* Families are reduced by :func:`~kthena_py.plan.autoscaling.observe.pod_sample`: gauges averaged per replica,
  counters rated per second against the previous scrape of the same replica (kept in the returned
  :class:`ScrapeMemory`), histograms as the quantile of the window's bucket increases.
* Prometheus sources run one instant query per distinct ``(serverURL, query)``; a heterogeneous target's
  values are summed over targets (each distinct query counted once), except metrics whose name ends in
  ``_utilization``, ``_usage``, ``_ratio``, ``_percent`` or ``_saturation`` (Kthena's ``isRatioMetric``), which
  get the replica-weighted mean.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any, Literal, Protocol, TypeVar

import aiohttp

from kthena_py.api.autoscaling import MetricSource
from kthena_py.kube.objects import KubeObject, is_deleting, labels_of, meta, uid_of
from kthena_py.plan.autoscaling import (
    ExpositionError,
    ExternalSample,
    FamilyValue,
    Histogram,
    MetricSample,
    MetricTarget,
    Scalar,
    Scrape,
    external_sample,
    find_family,
    merge_histograms,
    parse_exposition,
    pod_sample,
)
from kthena_py.vocab.labels import SERVING_ENTRY, SERVING_GROUP_NAME, SERVING_NAME, SERVING_ROLE, SERVING_ROLE_ID
from kthena_py.vocab.pods import TERMINAL_PHASES, phase_of, running_and_ready

from .prometheus import PrometheusError, instant_query

__all__ = [
    "ENTRY_LABEL",
    "GROUP_LABEL",
    "NAME_LABEL",
    "ROLE_ID_LABEL",
    "ROLE_LABEL",
    "Backend",
    "Collected",
    "MetricReport",
    "PodScraper",
    "ScrapeMemory",
    "Scraper",
    "collect",
    "filter_exposition",
    "is_ratio_metric",
    "pod_state",
    "scrape_url",
    "select_pods",
    "selector_matches",
]

NAME_LABEL = SERVING_NAME
ENTRY_LABEL = SERVING_ENTRY
ROLE_LABEL = SERVING_ROLE
ROLE_ID_LABEL = SERVING_ROLE_ID
GROUP_LABEL = SERVING_GROUP_NAME

_RATIO_SUFFIXES = ("_utilization", "_usage", "_ratio", "_percent", "_saturation")
_SAMPLE_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created", "_gcount", "_gsum")

K = TypeVar("K")

ScrapeMemory = dict[tuple[str, str], tuple[frozenset[str], Scrape]]
"""Previous scrapes: ``(metric, replica key) -> (member pod UIDs, scrape)``; needed for counters and histograms."""


# -- selection -------------------------------------------------------------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Return whether ``labels`` match a ``metav1.LabelSelector`` (``None`` or empty matches everything).

    Raises:
        ValueError: The selector has an unknown operator or is malformed.
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str):
            raise ValueError(f"malformed matchExpression {expr!r}")
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            raise ValueError(f"unknown label selector operator {operator!r}")
        if not ok:
            return False
    return True


def select_pods(
    pods: Sequence[KubeObject], target: str, role: str | None, selector: Mapping[str, Any] | None
) -> list[KubeObject]:
    """Return the entry pods of ``target`` (and ``role``) that match the user's ``selector``.

    Raises:
        ValueError: The selector is malformed.
    """
    fixed = {NAME_LABEL: target, ENTRY_LABEL: "true"}
    if role is not None:
        fixed[ROLE_LABEL] = role
    user = dict(selector or {})
    if user.get("matchLabels"):
        user["matchLabels"] = {k: v for k, v in user["matchLabels"].items() if k not in fixed}
    chosen = []
    for pod in pods:
        labels = labels_of(pod)
        if all(labels.get(k) == v for k, v in fixed.items()) and selector_matches(user, labels):
            chosen.append(pod)
    return chosen


def pod_state(pod: KubeObject) -> tuple[Literal["ignored", "unready", "ready"], str]:
    """Classify a pod: ``ignored`` (terminating, Failed, Succeeded), ``unready`` or ``ready`` (with its IP)."""
    status = pod.get("status") or {}
    if is_deleting(pod) or phase_of(pod) in TERMINAL_PHASES:
        return "ignored", ""
    ip = str(status.get("podIP") or "")
    if running_and_ready(pod) and ip:
        return "ready", ip
    return "unready", ""


def scrape_url(ip: str, port: int, uri: str) -> str:
    """Return ``http://<ip>:<port><uri>`` (IPv6 addresses in brackets)."""
    try:
        host = f"[{ip}]" if ip_address(ip).version == 6 else ip
    except ValueError:
        host = ip
    return f"http://{host}:{port}{uri}"


def is_ratio_metric(name: str) -> bool:
    """Kthena's ``isRatioMetric``: a name ending in a utilization-like suffix (case-insensitive)."""
    return name.lower().endswith(_RATIO_SUFFIXES)


# -- parsing ---------------------------------------------------------------------------------------------------


def filter_exposition(text: str, names: Collection[str]) -> str:
    """Keep only the lines of the families in ``names`` (and their ``_total``/``_bucket``/... samples).

    The result parses to the same values for those families as the whole text, at a fraction of the cost.
    """
    bases = {n.removesuffix("_total") for n in names} | set(names)
    wanted = {base + suffix for base in bases for suffix in _SAMPLE_SUFFIXES}
    kept = []
    for line in text.splitlines():
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("TYPE", "HELP", "UNIT") and parts[2] in wanted:
                kept.append(line)
            continue
        end = len(line)
        for stop in ("{", " ", "\t"):
            index = line.find(stop)
            if 0 <= index < end:
                end = index
        if line[:end] in wanted:
            kept.append(line)
    kept.append("")
    return "\n".join(kept)


def _merge_family(values: Sequence[FamilyValue | None]) -> FamilyValue | None:
    """Add up one family over the entry pods of one replica (``None`` if any lacks it or types differ)."""
    if not values or any(v is None for v in values):
        return None
    first = values[0]
    if isinstance(first, Scalar):
        scalars = [v for v in values if isinstance(v, Scalar) and v.kind == first.kind]
        if len(scalars) != len(values):
            return None
        return Scalar(first.kind, math.fsum(s.value for s in scalars))
    if isinstance(first, Histogram):
        histograms = [v for v in values if isinstance(v, Histogram) and v.bounds == first.bounds]
        if len(histograms) != len(values):
            return None
        return merge_histograms(histograms)
    return None


# -- HTTP --------------------------------------------------------------------------------------------------------


class Scraper(Protocol):
    """What :func:`collect` uses of a scraper (:class:`PodScraper`; tests pass a fake)."""

    async def fetch_all(
        self, requests: Sequence[tuple[K, str, Collection[str]]], *, deadline: float
    ) -> dict[K, Scrape | str]:
        """Scrape many pages (see :meth:`PodScraper.fetch_all`)."""
        ...

    async def query(self, server_url: str, query: str, *, timeout: float) -> float | str:
        """Run one Prometheus instant query (see :meth:`PodScraper.query`)."""
        ...


class PodScraper:
    """Fetches and parses ``/metrics`` pages and runs Prometheus queries, over one shared connection pool.

    Args:
        timeout: Seconds per pod scrape (Kthena: 3).
        concurrency: Scrapes of one call to :meth:`fetch_all` in flight at once.
        max_body: Largest accepted body in bytes.
        connector_limit: Connections open at once over all callers (0: unlimited).
        wall_clock: Wall-clock source for scrape timestamps.
    """

    def __init__(
        self,
        *,
        timeout: float = 3.0,
        concurrency: int = 32,
        max_body: int = 16 << 20,
        connector_limit: int = 1024,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if timeout <= 0 or concurrency < 1:
            raise ValueError("timeout must be > 0 and concurrency >= 1")
        self.timeout = timeout
        self.concurrency = concurrency
        self.max_body = max_body
        self._connector_limit = connector_limit
        self._wall = wall_clock
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        """The shared session (created on first use, inside the running event loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connector_limit, limit_per_host=0, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None),
                headers={"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1", "User-Agent": "kthena-py-autoscaler"},
            )
        return self._session

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _read(self, resp: aiohttp.ClientResponse) -> bytes:
        length = resp.content_length
        if length is not None and length > self.max_body:
            raise ValueError(f"body of {length} bytes exceeds {self.max_body}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_chunked(1 << 16):
            size += len(chunk)
            if size > self.max_body:
                raise ValueError(f"body exceeds {self.max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def fetch(self, url: str, names: Collection[str]) -> Scrape:
        """Scrape one page and parse the families in ``names``.

        Raises:
            TimeoutError: No complete answer within the timeout.
            aiohttp.ClientError: Transport failure.
            ValueError: Non-2xx answer, oversized body or unparsable text (including ``ExpositionError``).
        """
        async with asyncio.timeout(self.timeout), self.session().get(url) as resp:
            if not 200 <= resp.status <= 299:
                raise ValueError(f"HTTP {resp.status}")
            body = await self._read(resp)
            charset = resp.charset or "utf-8"
        text = body.decode(charset, errors="replace")
        families = parse_exposition(filter_exposition(text, names), names)
        return Scrape(self._wall(), families)

    async def fetch_all(
        self, requests: Sequence[tuple[K, str, Collection[str]]], *, deadline: float
    ) -> dict[K, Scrape | str]:
        """Scrape many pages concurrently (bounded), each within the timeout, all within ``deadline`` seconds.

        Args:
            requests: ``(key, url, family names)`` triples.
            deadline: Seconds after which unfinished scrapes are abandoned.

        Returns:
            Per key, the scrape or the error text.
        """
        if not requests:
            return {}
        gate = asyncio.Semaphore(self.concurrency)
        results: dict[K, Scrape | str] = {}

        async def one(key: K, url: str, names: Collection[str]) -> None:
            async with gate:
                try:
                    results[key] = await self.fetch(url, names)
                except TimeoutError:
                    results[key] = f"{url}: timed out after {self.timeout:g}s"
                except ExpositionError as err:
                    results[key] = f"{url}: {err}"
                except (aiohttp.ClientError, OSError, ValueError, UnicodeError) as err:
                    results[key] = f"{url}: {type(err).__name__}: {err}"

        tasks = [asyncio.ensure_future(one(key, url, names)) for key, url, names in requests]
        _, pending = await asyncio.wait(tasks, timeout=deadline)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for key, url, _ in requests:
            results.setdefault(key, f"{url}: collection deadline of {deadline:g}s exceeded")
        return results

    async def query(self, server_url: str, query: str, *, timeout: float) -> float | str:
        """Run one Prometheus instant query; return its value or the error text."""
        try:
            return await instant_query(self.session(), server_url, query, at=self._wall(), timeout=timeout)
        except PrometheusError as err:
            return str(err)


# -- collection --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    """One ModelServing (or one role of it) whose metrics feed a scaling unit.

    Attributes:
        namespace: Namespace of the ModelServing and its pods.
        name: ModelServing name.
        role: The role for a disaggregated target (``None``: the whole ModelServing).
        replicas: Its current replicas (weights of utilization-like Prometheus metrics).
        pods: Candidate pods (those labelled with the ModelServing's name, from the cache).
        sources: ``metricSources`` by metric key.
    """

    namespace: str
    name: str
    role: str | None
    replicas: int
    pods: Sequence[KubeObject]
    sources: Mapping[str, MetricSource]

    @property
    def key(self) -> str:
        """``namespace/name[/role]``."""
        base = f"{self.namespace}/{self.name}"
        return base if self.role is None else f"{base}/{self.role}"


@dataclass(frozen=True)
class MetricReport:
    """What collection found for one metric.

    Attributes:
        name: Metric key.
        kind: ``pods``, ``prometheus`` or ``none`` (no usable source).
        sample: The window sample (``None``: no data this pass).
        detail: Human-readable summary (values, pod counts, errors).
        error: Why data is missing or incomplete (``None``: complete).
    """

    name: str
    kind: Literal["pods", "prometheus", "none"]
    sample: MetricSample | None
    detail: str
    error: str | None = None


@dataclass(frozen=True)
class Collected:
    """The outcome of one collection.

    Attributes:
        samples: Window samples by metric key (``None``: no source or a failed query; a pod sample with nobody
            reporting is kept, so the window reads "no data" rather than an older pass's value).
        reports: One report per metric, in spec order (``sample`` is ``None`` whenever there is no usable data).
        pod_errors: Failed pod scrapes.
        query_errors: Failed Prometheus queries.
        memory: Previous scrapes for the next pass.
    """

    samples: Mapping[str, MetricSample | None]
    reports: tuple[MetricReport, ...]
    pod_errors: int = 0
    query_errors: int = 0
    memory: ScrapeMemory = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        """Metrics without usable data this pass."""
        return [r.name for r in self.reports if r.sample is None]


@dataclass
class _Unit:
    key: str
    ready: bool
    members: list[tuple[str, str]]  # (pod uid, ip)


@dataclass
class _Group:
    backend: Backend
    uri: str
    port: int
    selector: Mapping[str, Any] | None
    names: set[str] = field(default_factory=set)
    units: list[_Unit] = field(default_factory=list)
    error: str | None = None


def _units(backend: Backend, pods: Sequence[KubeObject]) -> list[_Unit]:
    label = ROLE_ID_LABEL if backend.role is not None else GROUP_LABEL
    members: dict[str, list[tuple[str, str, bool]]] = {}
    for pod in pods:
        state, ip = pod_state(pod)
        if state == "ignored":
            continue
        uid = uid_of(pod) or str(meta(pod).get("name", ""))
        unit = labels_of(pod).get(label) or f"pod:{uid}"
        members.setdefault(unit, []).append((uid, ip, state == "ready"))
    return [
        _Unit(f"{backend.namespace}/{backend.name}/{key}", all(r for _, _, r in group), [(u, ip) for u, ip, _ in group])
        for key, group in sorted(members.items())
    ]


def _aggregate_external(name: str, values: Sequence[tuple[tuple[str, str], float, int]]) -> float:
    if len(values) == 1:
        return values[0][1]
    if is_ratio_metric(name):
        weight = sum(replicas for _, _, replicas in values)
        if weight <= 0:
            return math.fsum(v for _, v, _ in values) / len(values)
        return math.fsum(v * replicas for _, v, replicas in values) / weight
    distinct = {query: value for query, value, _ in values}
    return math.fsum(distinct.values())


def _fmt(value: float) -> str:
    return f"{value:.6g}"


async def collect(
    scraper: Scraper,
    backends: Sequence[Backend],
    metrics: Sequence[MetricTarget],
    memory: ScrapeMemory,
    *,
    deadline: float = 10.0,
    query_timeout: float = 3.0,
) -> Collected:
    """Collect one pass of every metric of one scaling unit over its backends.

    Args:
        scraper: The HTTP side.
        backends: The ModelServings (or roles) whose metrics feed the unit (one, or several for a heterogeneous
            target).
        metrics: The unit's metric targets.
        memory: The previous pass's scrape memory (counters and histograms need it).
        deadline: Seconds for all scrapes of the pass.
        query_timeout: Seconds per Prometheus query.

    Returns:
        Samples, per-metric reports, error counts and the new scrape memory.
    """
    groups: dict[tuple[int, str, int, str], _Group] = {}
    pod_family: dict[tuple[str, int], tuple[tuple[int, str, int, str], str]] = {}
    prom: dict[tuple[str, int], tuple[str, str]] = {}
    trouble: dict[str, str] = {}
    kinds: dict[str, Literal["pods", "prometheus", "none"]] = {}
    for metric in metrics:
        found: set[str] = set()
        for index, backend in enumerate(backends):
            source = backend.sources.get(metric.name)
            if source is None or (source.pod is None) == (source.prometheus is None):
                trouble.setdefault(metric.name, f"no usable metricSources entry for {metric.name} on {backend.key}")
                continue
            if source.pod is not None:
                pod = source.pod
                selector = pod.label_selector
                gkey = (index, pod.uri, pod.port, json.dumps(selector, sort_keys=True))
                group = groups.setdefault(gkey, _Group(backend, pod.uri, pod.port, selector))
                family = pod.name or metric.name
                group.names.add(family)
                pod_family[(metric.name, index)] = (gkey, family)
                found.add("pods")
            elif source.prometheus is not None:
                prom[(metric.name, index)] = (source.prometheus.server_url, source.prometheus.query)
                found.add("prometheus")
        if len(found) > 1:
            trouble[metric.name] = f"{metric.name} mixes pod and prometheus sources across targets"
        kinds[metric.name] = "none" if metric.name in trouble else ("pods" if found == {"pods"} else "prometheus")

    requests: list[tuple[tuple[tuple[int, str, int, str], str], str, Collection[str]]] = []
    for gkey, group in groups.items():
        try:
            chosen = select_pods(group.backend.pods, group.backend.name, group.backend.role, group.selector)
        except ValueError as err:
            group.error = f"labelSelector of {group.backend.key}: {err}"
            continue
        group.units = _units(group.backend, chosen)
        for unit in group.units:
            if unit.ready:
                for uid, ip in unit.members:
                    requests.append(((gkey, uid), scrape_url(ip, group.port, group.uri), frozenset(group.names)))
    queries = sorted({q for (name, _), q in prom.items() if kinds.get(name) == "prometheus"})

    async def run_queries() -> dict[tuple[str, str], float | str]:
        answers = await asyncio.gather(*(scraper.query(s, q, timeout=query_timeout) for s, q in queries))
        return dict(zip(queries, answers, strict=True))

    scrapes, answers = await asyncio.gather(scraper.fetch_all(requests, deadline=deadline), run_queries())
    pod_errors = sum(1 for r in scrapes.values() if isinstance(r, str))
    query_errors = sum(1 for a in answers.values() if isinstance(a, str))

    new_memory: ScrapeMemory = {}
    samples: dict[str, MetricSample | None] = {}
    reports: list[MetricReport] = []
    for metric in metrics:
        name = metric.name
        kind = kinds[name]
        if kind == "none":
            samples[name] = None
            reports.append(MetricReport(name, "none", None, "no source", trouble[name]))
            continue
        if kind == "prometheus":
            values: list[tuple[tuple[str, str], float, int]] = []
            errors = []
            for index, backend in enumerate(backends):
                query = prom[(name, index)]
                answer = answers[query]
                if isinstance(answer, str):
                    errors.append(f"{backend.key}: {answer}")
                else:
                    values.append((query, answer, backend.replicas))
            if errors:
                samples[name] = None
                reports.append(MetricReport(name, "prometheus", None, "query failed", "; ".join(errors)))
                continue
            value = _aggregate_external(name, values)
            samples[name] = external_sample(value)
            reports.append(MetricReport(name, "prometheus", samples[name], f"{name}={_fmt(value)}"))
            continue
        ready: dict[str, Scrape | None] = {}
        previous: dict[str, Scrape] = {}
        unready = 0
        problems: list[str] = []
        for index in range(len(backends)):
            gkey, family = pod_family[(name, index)]
            group = groups[gkey]
            if group.error is not None:
                problems.append(group.error)
                continue
            for unit in group.units:
                members = frozenset(uid for uid, _ in unit.members)
                old = memory.get((name, unit.key))
                if old is not None and old[0] == members:
                    previous[unit.key] = old[1]
                    new_memory[(name, unit.key)] = old
                if not unit.ready:
                    unready += 1
                    continue
                results = [scrapes[(gkey, uid)] for uid, _ in unit.members]
                failed = [r for r in results if isinstance(r, str)]
                if failed:
                    ready[unit.key] = None
                    problems.extend(failed)
                    continue
                got = [r for r in results if isinstance(r, Scrape)]
                merged = _merge_family([find_family(s.families, family) for s in got])
                scrape = Scrape(max(s.time for s in got), {} if merged is None else {name: merged})
                ready[unit.key] = scrape
                if merged is None:
                    problems.append(f"{unit.key}: family {family} absent or of mixed types")
                else:
                    new_memory[(name, unit.key)] = (members, scrape)
        if any(groups[pod_family[(name, i)][0]].error is not None for i in range(len(backends))):
            samples[name] = None
            reports.append(MetricReport(name, "pods", None, "selector error", "; ".join(sorted(set(problems)))))
            continue
        sample = pod_sample(name, ready, previous, unready)
        reporting, missing = (0, 0) if isinstance(sample, ExternalSample) else (sample.reporting, sample.missing)
        usable = reporting > 0
        samples[name] = sample  # with nobody reporting, the window reads "no data" (not an older pass's value)
        detail = f"{reporting} reporting, {missing} missing, {unready} unready replicas"
        if not ready and not unready:
            problems.append("no entry pods selected")
        error = "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
        reports.append(MetricReport(name, "pods", sample if usable else None, detail, error or None))
    return Collected(samples, tuple(reports), pod_errors, query_errors, new_memory)
