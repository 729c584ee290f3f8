"""Time-keyed state of one scaling unit: metric sample windows and the scaling history.

Everything is keyed by timestamps the caller passes in (seconds, any epoch); nothing reads a clock.

Guarantees:

* :class:`MetricWindow` holds one entry per pass. A window of length ``L`` read at ``now`` covers the half-open
  interval ``(now - L, now]``. Readings:

  - external (Prometheus) metrics: the mean of the values in the window;
  - per-pod metrics: the weighted mean of the per-pass **totals** (weights: 1 for gauges, the scrape interval
    for counter rates, so a counter reads as its rate over the window), divided by the number of pods reporting
    in the newest pass. Averaging totals, not per-pod values, keeps a scale-up in the middle of the window from
    inflating the next recommendation;
  - histograms: the quantile of the bucket increases added up over the window (newest bucket layout only).

  The pod counts (reporting, missing, unready) always come from the newest pass: they describe the pods now.
* :class:`ScalingHistory` keeps the recommendations (for the stabilization windows), the replica counts applied
  (for the rate limits) and the end of panic mode. It is compacted on every :meth:`ScalingHistory.record`:
  entries older than the behaviour's horizon go, recommendations that can never again be a window's maximum
  or minimum go, and repeated replica counts go. The compaction never changes any answer, and the history of a
  30-minute horizon at a 15 s period stays within a few hundred bytes in the usual case.
* :class:`WindowState` (both parts) round-trips through :meth:`WindowState.to_dict` / :meth:`WindowState.from_dict`
  as plain JSON data, so a controller can persist it in an annotation or the policy status. The intended split
  (see the package docstring): persist ``history`` (small, level-based: the next pass only needs the stored
  value), keep ``metrics`` in memory as a cache. Losing the cache means the windows restart from the next
  pass (stable and panic averages then cover only the passes since); losing the history is handled by
  :func:`~kthena_py.plan.autoscaling.decide.decide` by seeding it with the current replica count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kthena_py.plan.autoscaling.promtext import Histogram, histogram_quantile

__all__ = [
    "ExternalReading",
    "ExternalSample",
    "HistogramSample",
    "MetricSample",
    "MetricWindow",
    "PodReading",
    "PodSample",
    "Reading",
    "ScalingHistory",
    "WindowEntry",
    "WindowState",
]


@dataclass(frozen=True)
class PodSample:
    """One pass of a per-pod metric (gauge value or counter rate).

    Attributes:
        total: Sum over the reporting pods.
        reporting: Ready pods that reported the metric.
        missing: Ready pods without a value.
        unready: Pods that exist but are not ready.
        weight: Averaging weight in the window (1 for gauges; the scrape interval for counter rates).
    """

    total: float
    reporting: int
    missing: int = 0
    unready: int = 0
    weight: float = 1.0


@dataclass(frozen=True)
class HistogramSample:
    """One pass of a histogram metric: the bucket increases since the previous pass, merged over pods."""

    buckets: tuple[tuple[float, float], ...]
    reporting: int
    missing: int = 0
    unready: int = 0


@dataclass(frozen=True)
class ExternalSample:
    """One pass of an external (Prometheus) metric: the query's value, a total for the whole target."""

    value: float


MetricSample = PodSample | HistogramSample | ExternalSample


@dataclass(frozen=True)
class PodReading:
    """A per-pod metric over a window.

    Attributes:
        average: Value per reporting pod (for histograms: the quantile).
        reporting: Pods reporting in the newest pass.
        missing: Ready pods without a value in the newest pass.
        unready: Not-ready pods in the newest pass.
    """

    average: float
    reporting: int
    missing: int
    unready: int


@dataclass(frozen=True)
class ExternalReading:
    """An external metric over a window (the mean of its values)."""

    value: float


Reading = PodReading | ExternalReading


@dataclass(frozen=True)
class WindowEntry:
    """The samples of one pass."""

    time: float
    samples: tuple[tuple[str, MetricSample], ...]

    def get(self, name: str) -> MetricSample | None:
        """Return the sample of ``name`` in this pass, if any."""
        for key, sample in self.samples:
            if key == name:
                return sample
        return None


def _pod_reading(samples: Sequence[PodSample]) -> PodReading | None:
    latest = samples[-1]
    if latest.reporting <= 0:
        return None
    usable = [s for s in samples if s.reporting > 0 and s.weight > 0]
    weight = math.fsum(s.weight for s in usable)
    if weight <= 0:
        return None
    mean_total = math.fsum(s.total * s.weight for s in usable) / weight
    return PodReading(mean_total / latest.reporting, latest.reporting, latest.missing, latest.unready)


def _histogram_reading(samples: Sequence[HistogramSample], quantile: float) -> PodReading | None:
    latest = samples[-1]
    if latest.reporting <= 0 or not latest.buckets:
        return None
    layout = tuple(bound for bound, _ in latest.buckets)
    usable = [s for s in samples if tuple(bound for bound, _ in s.buckets) == layout]
    buckets = tuple((bound, math.fsum(s.buckets[i][1] for s in usable)) for i, bound in enumerate(layout))
    value = histogram_quantile(quantile, Histogram(buckets))
    if value is None:
        return None
    return PodReading(value, latest.reporting, latest.missing, latest.unready)


@dataclass(frozen=True)
class MetricWindow:
    """Per-pass metric samples, oldest first (the in-memory cache part of :class:`WindowState`)."""

    entries: tuple[WindowEntry, ...] = ()

    def add(self, time: float, samples: Mapping[str, MetricSample | None]) -> MetricWindow:
        """Return a window with the samples of the pass at ``time`` (replacing an entry at the same time)."""
        entry = WindowEntry(time, tuple(sorted((k, v) for k, v in samples.items() if v is not None)))
        kept = [e for e in self.entries if e.time != time]
        kept.append(entry)
        kept.sort(key=lambda e: e.time)
        return MetricWindow(tuple(kept))

    def prune(self, now: float, keep: float) -> MetricWindow:
        """Drop entries that no window of length <= ``keep`` read at ``now`` can see."""
        return MetricWindow(tuple(e for e in self.entries if now - keep < e.time <= now))

    def reading(self, name: str, now: float, length: float, quantile: float = 0.95) -> Reading | None:
        """Return the reading of ``name`` over ``(now - length, now]`` (``None``: no usable data).

        Args:
            name: Metric key.
            now: End of the window.
            length: Window length in seconds.
            quantile: Quantile taken from histogram metrics.
        """
        samples = [s for e in self.entries if now - length < e.time <= now if (s := e.get(name)) is not None]
        if not samples:
            return None
        latest = samples[-1]
        if isinstance(latest, ExternalSample):
            values = [s.value for s in samples if isinstance(s, ExternalSample)]
            return ExternalReading(math.fsum(values) / len(values))
        if isinstance(latest, PodSample):
            return _pod_reading([s for s in samples if isinstance(s, PodSample)])
        return _histogram_reading([s for s in samples if isinstance(s, HistogramSample)], quantile)


def _compact_recommendations(entries: Sequence[tuple[float, int]]) -> tuple[tuple[float, int], ...]:
    """Keep the entries that are a strict maximum or minimum of their suffix (the only possible answers)."""
    kept: list[tuple[float, int]] = []
    later_max = -math.inf
    later_min = math.inf
    for time, value in reversed(entries):
        if value > later_max or value < later_min:
            kept.append((time, value))
        later_max = max(later_max, value)
        later_min = min(later_min, value)
    kept.reverse()
    return tuple(kept)


@dataclass(frozen=True)
class ScalingHistory:
    """Recommendations, applied replica counts and panic state (the persisted part of :class:`WindowState`).

    Attributes:
        recommendations: ``(time, recommended replicas)`` of past passes, oldest first.
        replicas: ``(time, replicas applied)`` change points, oldest first; a value is in effect from its time
            until the next entry.
        panic_until: End of panic mode (``None``: never entered).
    """

    recommendations: tuple[tuple[float, int], ...] = ()
    replicas: tuple[tuple[float, int], ...] = ()
    panic_until: float | None = None

    @property
    def empty(self) -> bool:
        """True when nothing was ever recorded (a fresh policy, or a lost history)."""
        return not self.recommendations and not self.replicas

    def recommendations_within(self, now: float, window: float) -> list[int]:
        """Recommendations recorded in ``(now - window, now]``."""
        return [value for time, value in self.recommendations if now - window < time <= now]

    def replicas_in_effect(self, now: float, period: float) -> list[int]:
        """Replica counts in effect at any instant of ``[now - period, now]`` according to the history."""
        start = now - period
        values = [value for time, value in self.replicas if start <= time <= now]
        before = [value for time, value in self.replicas if time < start]
        if before:
            values.append(before[-1])
        return values

    def record(self, now: float, recommendation: int | None, replicas: int, horizon: float) -> ScalingHistory:
        """Return the history after a pass at ``now``, compacted to what a ``horizon``-long lookback needs.

        Args:
            now: Time of the pass (a second record at the same time replaces the applied count and adds to
                the recommendations).
            recommendation: The pass's recommendation (``None``: nothing to add).
            replicas: The replica count applied by the pass.
            horizon: Longest lookback (seconds) any query will use.
        """
        recs = [(t, v) for t, v in self.recommendations if now - horizon < t <= now]
        if recommendation is not None:
            recs.append((now, recommendation))
        applied = [(t, v) for t, v in self.replicas if t < now]
        applied.append((now, replicas))
        start = now - horizon
        first = max((i for i, (t, _) in enumerate(applied) if t < start), default=0)
        compacted: list[tuple[float, int]] = []
        for time, value in applied[first:]:
            if not compacted or compacted[-1][1] != value:
                compacted.append((time, value))
        return ScalingHistory(_compact_recommendations(recs), tuple(compacted), self.panic_until)

    def with_panic_until(self, panic_until: float | None) -> ScalingHistory:
        """Return a copy with another panic end."""
        return replace(self, panic_until=panic_until)


def _bound_out(bound: float) -> float | str:
    return "+Inf" if math.isinf(bound) else bound


def _sample_out(sample: MetricSample) -> dict[str, Any]:
    if isinstance(sample, ExternalSample):
        return {"kind": "external", "value": sample.value}
    if isinstance(sample, PodSample):
        return {
            "kind": "pods",
            "total": sample.total,
            "reporting": sample.reporting,
            "missing": sample.missing,
            "unready": sample.unready,
            "weight": sample.weight,
        }
    return {
        "kind": "histogram",
        "buckets": [[_bound_out(b), c] for b, c in sample.buckets],
        "reporting": sample.reporting,
        "missing": sample.missing,
        "unready": sample.unready,
    }


def _sample_in(data: Mapping[str, Any]) -> MetricSample:
    kind = data["kind"]
    if kind == "external":
        return ExternalSample(float(data["value"]))
    counts = (int(data["reporting"]), int(data["missing"]), int(data["unready"]))
    if kind == "pods":
        return PodSample(float(data["total"]), *counts, weight=float(data["weight"]))
    if kind == "histogram":
        buckets = tuple((float("inf") if b == "+Inf" else float(b), float(c)) for b, c in data["buckets"])
        return HistogramSample(buckets, *counts)
    raise ValueError(f"unknown sample kind {kind!r}")


def _pairs(data: Iterable[Any]) -> tuple[tuple[float, int], ...]:
    return tuple((float(t), int(v)) for t, v in data)


@dataclass(frozen=True)
class WindowState:
    """All time-keyed state of one scaling unit: metric windows (a cache) and the scaling history (persisted)."""

    metrics: MetricWindow = MetricWindow()
    history: ScalingHistory = ScalingHistory()

    def to_dict(self, *, include_metrics: bool = True) -> dict[str, Any]:
        """Return plain JSON data (``+Inf`` bucket bounds are the string ``"+Inf"``).

        Args:
            include_metrics: Also serialise the metric windows (they are usually kept in memory only).
        """
        history: dict[str, Any] = {
            "recommendations": [[t, v] for t, v in self.history.recommendations],
            "replicas": [[t, v] for t, v in self.history.replicas],
            "panicUntil": self.history.panic_until,
        }
        data: dict[str, Any] = {"version": 1, "history": history}
        if include_metrics:
            data["metrics"] = [
                {"time": e.time, "samples": {name: _sample_out(s) for name, s in e.samples}}
                for e in self.metrics.entries
            ]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowState:
        """Rebuild a state written by :meth:`to_dict`.

        Raises:
            ValueError: If the data is malformed (a controller then starts from ``WindowState()``).
        """
        try:
            if data.get("version") != 1:
                raise ValueError(f"unsupported window state version {data.get('version')!r}")
            raw = data["history"]
            panic = raw.get("panicUntil")
            history = ScalingHistory(
                _pairs(raw.get("recommendations", ())),
                _pairs(raw.get("replicas", ())),
                None if panic is None else float(panic),
            )
            entries = tuple(
                WindowEntry(
                    float(e["time"]),
                    tuple(sorted((str(k), _sample_in(v)) for k, v in e["samples"].items())),
                )
                for e in data.get("metrics", ())
            )
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise ValueError(f"malformed window state: {err}") from err
        return cls(MetricWindow(tuple(sorted(entries, key=lambda e: e.time))), history)
