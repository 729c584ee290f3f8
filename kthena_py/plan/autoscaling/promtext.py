"""Prometheus text exposition: parsing, and the three reductions the autoscaler needs.

Guarantees:

* Pure: text in, frozen values out; no clock, no I/O. Parsing uses ``prometheus_client``'s text parser.
* :func:`parse_exposition` keeps, per family, the **sum over all label sets** for counters, gauges and untyped
  families (an untyped family is read as a gauge, as Prometheus itself does), and the **merge of all series**
  for histograms (bucket counts added per upper bound; series with another bucket layout make the family
  :class:`Unsupported`). Families without samples are left out; ``# TYPE x counter`` followed by ``x_total``
  samples is read as the counter ``x``. Summaries, gauge histograms and info/state sets are
  :class:`Unsupported`: a caller treats them as a missing value for that pod only, never as a failure of the
  whole scrape.
* :func:`counter_increase` and :func:`histogram_increase` follow Prometheus' reset rule: a value that went down
  means the process restarted, so the increase is the new value itself.
* :func:`histogram_quantile` interpolates linearly inside the bucket that holds the rank, like PromQL's
  ``histogram_quantile``: the lowest bucket starts at 0 (unless its upper bound is <= 0), a rank in the ``+Inf``
  bucket returns the largest finite upper bound, and an empty histogram has no quantile (``None``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "ExpositionError",
    "FamilyValue",
    "Histogram",
    "Scalar",
    "Unsupported",
    "counter_increase",
    "find_family",
    "histogram_increase",
    "histogram_quantile",
    "merge_histograms",
    "parse_exposition",
]


class ExpositionError(ValueError):
    """The text is not valid Prometheus text exposition."""


@dataclass(frozen=True)
class Scalar:
    """A counter or gauge family reduced to one number (the sum over its label sets)."""

    kind: Literal["counter", "gauge"]
    value: float


@dataclass(frozen=True)
class Histogram:
    """A cumulative histogram.

    Attributes:
        buckets: ``(upper bound, cumulative count)`` pairs sorted by bound; the last bound is ``+Inf``.
        sum: Sum of the observations (informational).
    """

    buckets: tuple[tuple[float, float], ...]
    sum: float = 0.0

    @property
    def count(self) -> float:
        """Total number of observations (the ``+Inf`` bucket)."""
        return self.buckets[-1][1] if self.buckets else 0.0

    @property
    def bounds(self) -> tuple[float, ...]:
        """The bucket layout (upper bounds only)."""
        return tuple(bound for bound, _ in self.buckets)


@dataclass(frozen=True)
class Unsupported:
    """A family whose type the autoscaler cannot use (summary, gaugehistogram, info, stateset, ...)."""

    kind: str
    detail: str = ""


FamilyValue = Scalar | Histogram | Unsupported


def _bound(text: str) -> float:
    return float("inf") if text in ("+Inf", "Inf", "inf") else float(text)


def _histogram_of(name: str, samples: Iterable[tuple[str, Mapping[str, str], float]]) -> Histogram | Unsupported:
    series: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    sums: dict[tuple[tuple[str, str], ...], float] = {}
    for sample_name, labels, value in samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        if sample_name == name + "_bucket" and "le" in labels:
            series.setdefault(key, {})[_bound(labels["le"])] = value
        elif sample_name == name + "_sum":
            sums[key] = value
    if not series:
        return Unsupported("histogram", "no buckets")
    layouts = {tuple(sorted(buckets)) for buckets in series.values()}
    if len(layouts) != 1:
        return Unsupported("histogram", "series have different bucket layouts")
    layout = layouts.pop()
    if not layout or not math.isinf(layout[-1]):
        return Unsupported("histogram", "no +Inf bucket")
    merged = tuple((bound, math.fsum(buckets[bound] for buckets in series.values())) for bound in layout)
    return Histogram(merged, math.fsum(sums.values()))


def parse_exposition(text: str, names: Collection[str] | None = None) -> dict[str, FamilyValue]:
    """Parse Prometheus text exposition into one value per metric family.

    Args:
        text: The scraped body.
        names: Family names to keep (``None``: all). A counter ``x_total`` is found under both ``x`` and
            ``x_total``; see :func:`find_family`.

    Returns:
        A mapping from family name (as the parser reports it, ``_total`` stripped for counters) to its value.

    Raises:
        ExpositionError: If the text cannot be parsed.
    """
    wanted = None if names is None else {n.removesuffix("_total") for n in names} | set(names)
    result: dict[str, FamilyValue] = {}
    empty_counters: set[str] = set()
    try:
        for family in text_string_to_metric_families(text):
            samples = [(s.name, s.labels, float(s.value)) for s in family.samples]
            if not samples:
                if family.type == "counter":
                    empty_counters.add(family.name)
                continue
            name, kind = family.name, str(family.type)
            if kind in ("unknown", "untyped") and name.removesuffix("_total") in empty_counters:
                # "# TYPE x counter" followed by "x_total" samples: the parser splits them; join them back.
                name, kind = name.removesuffix("_total"), "counter"
            if wanted is not None and name not in wanted:
                continue
            if kind in ("counter", "gauge", "unknown", "untyped"):
                main = [v for n, _, v in samples if n in (family.name, family.name + "_total")]
                result[name] = Scalar("counter" if kind == "counter" else "gauge", math.fsum(main))
            elif kind == "histogram":
                result[name] = _histogram_of(name, samples)
            else:
                result[name] = Unsupported(kind)
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise ExpositionError(f"invalid exposition text: {err}") from err
    return result


def find_family(families: Mapping[str, FamilyValue], name: str) -> FamilyValue | None:
    """Look a family up by the name a user configured (``x_total`` also finds the counter ``x``).

    Args:
        families: The result of :func:`parse_exposition`.
        name: The configured name.

    Returns:
        The family value, or ``None`` when absent.
    """
    found = families.get(name)
    if found is None and name.endswith("_total"):
        candidate = families.get(name.removesuffix("_total"))
        if isinstance(candidate, Scalar) and candidate.kind == "counter":
            found = candidate
    return found


def counter_increase(previous: float, current: float) -> float:
    """Return how much a counter grew between two scrapes (a decrease is a reset: the increase is ``current``).

    Args:
        previous: The earlier value.
        current: The later value.

    Returns:
        The non-negative increase.
    """
    return current - previous if current >= previous else max(current, 0.0)


def histogram_increase(previous: Histogram | None, current: Histogram) -> Histogram:
    """Return the observations added between two scrapes of one pod's histogram.

    A missing earlier scrape, a lower total count or a changed bucket layout mean the process restarted in
    between, so the whole current histogram is the increase.

    Args:
        previous: The earlier scrape (``None``: unknown).
        current: The later scrape.

    Returns:
        The cumulative histogram of the new observations.
    """
    if previous is None or previous.bounds != current.bounds or current.count < previous.count:
        return current
    buckets = tuple(
        (bound, max(now - before, 0.0))
        for (bound, now), (_, before) in zip(current.buckets, previous.buckets, strict=True)
    )
    return Histogram(buckets, current.sum - previous.sum)


def merge_histograms(histograms: Iterable[Histogram]) -> Histogram | None:
    """Add histograms that share one bucket layout (``None`` when there are none).

    Raises:
        ValueError: If the layouts differ.
    """
    items = list(histograms)
    if not items:
        return None
    layout = items[0].bounds
    if any(h.bounds != layout for h in items):
        raise ValueError("cannot merge histograms with different bucket layouts")
    buckets = tuple((bound, math.fsum(h.buckets[i][1] for h in items)) for i, bound in enumerate(layout))
    return Histogram(buckets, math.fsum(h.sum for h in items))


def histogram_quantile(q: float, histogram: Histogram) -> float | None:
    """Estimate the ``q``-quantile of a cumulative histogram like PromQL's ``histogram_quantile``.

    Args:
        q: The quantile, 0 <= q <= 1.
        histogram: The histogram (typically the increase over a window, merged over pods).

    Returns:
        The estimate, or ``None`` when the histogram holds no observation or has no finite bucket.

    Raises:
        ValueError: If ``q`` is outside [0, 1].
    """
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    buckets = list(histogram.buckets)
    # Cumulative counts can only be non-decreasing; smooth out float noise the way Prometheus does.
    level = 0.0
    for i, (bound, count) in enumerate(buckets):
        level = max(level, count)
        buckets[i] = (bound, level)
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, (_, count) in enumerate(buckets) if count >= rank)
    if index == len(buckets) - 1:
        return buckets[-2][0]
    upper, count = buckets[index]
    if index == 0:
        if upper <= 0:
            return upper
        lower, below = 0.0, 0.0
    else:
        lower, below = buckets[index - 1]
    inside = count - below
    if inside <= 0:
        return upper
    return lower + (upper - lower) * ((rank - below) / inside)
