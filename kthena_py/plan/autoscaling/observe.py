"""Turn one pass of scrapes into per-metric samples (the input of the sliding windows).

Guarantees:

* Pure: the caller passes the current scrapes, the previous scrapes (a cache it keeps between passes, keyed
  by pod UID) and the count of unready pods; nothing here reads a clock.
* Per metric family type:

  - **gauge** (and untyped): the sample total is the sum over the ready pods that reported it;
  - **counter**: each pod contributes its per-second rate since its previous scrape (resets handled as in
    Prometheus); the sample carries the interval as its averaging weight, so the window average is the rate
    over the whole window;
  - **histogram**: each pod contributes its bucket increase since its previous scrape; the increases are merged
    over pods (never a sum of per-pod quantiles) and the quantile is taken later, over the window's increase.

* A ready pod that could not be scraped, lacks the family, exposes it with another type or layout, or (for
  counters and histograms) has no previous scrape is counted as *missing*. Missing and unready pods are
  resolved by the recommendation with the Kubernetes HPA rules, not here.
* Losing the previous-scrape cache (a restart) makes every counter and histogram pod *missing* for exactly one
  pass; gauges are unaffected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kthena_py.plan.autoscaling.promtext import (
    FamilyValue,
    Histogram,
    Scalar,
    counter_increase,
    find_family,
    histogram_increase,
    merge_histograms,
)
from kthena_py.plan.autoscaling.window import ExternalSample, HistogramSample, MetricSample, PodSample

__all__ = ["Scrape", "external_sample", "pod_sample"]


@dataclass(frozen=True)
class Scrape:
    """One pod's parsed scrape.

    Attributes:
        time: When it was taken (seconds, any epoch; passed in by the caller).
        families: The result of :func:`~kthena_py.plan.autoscaling.promtext.parse_exposition`.
    """

    time: float
    families: Mapping[str, FamilyValue]


def _kind_of(name: str, scrapes: Mapping[str, Scrape | None]) -> str | None:
    for scrape in scrapes.values():
        if scrape is None:
            continue
        family = find_family(scrape.families, name)
        if isinstance(family, Scalar):
            return family.kind
        if isinstance(family, Histogram):
            return "histogram"
    return None


def pod_sample(
    name: str,
    ready: Mapping[str, Scrape | None],
    previous: Mapping[str, Scrape],
    unready: int = 0,
) -> MetricSample:
    """Reduce one metric over the ready pods of a target to a window sample.

    Args:
        name: The family name to read (the pod source's ``name``, defaulting to the metric key).
        ready: Ready pods by UID, with their scrape of this pass (``None`` when the scrape failed).
        previous: Earlier scrapes by UID (the cache); only consulted for counters and histograms.
        unready: Pods of the target that exist but are not ready (not scraped).

    Returns:
        A :class:`PodSample` (gauges, counters) or :class:`HistogramSample`. When no pod reported, the sample has
        ``reporting == 0`` (the recommendation then ignores the metric).
    """
    kind = _kind_of(name, ready)
    missing = 0
    if kind == "histogram":
        increases: list[Histogram] = []
        for uid, scrape in ready.items():
            family = None if scrape is None else find_family(scrape.families, name)
            before = previous.get(uid)
            old = None if before is None else find_family(before.families, name)
            if not isinstance(family, Histogram) or not isinstance(old, Histogram) or before is None:
                missing += 1
                continue
            if scrape is None or scrape.time <= before.time:
                missing += 1
                continue
            increase = histogram_increase(old, family)
            if increases and increase.bounds != increases[0].bounds:
                missing += 1
                continue
            increases.append(increase)
        merged = merge_histograms(increases)
        buckets = () if merged is None else merged.buckets
        return HistogramSample(buckets=buckets, reporting=len(increases), missing=missing, unready=unready)

    total: list[float] = []
    intervals: list[float] = []
    for uid, scrape in ready.items():
        family = None if scrape is None else find_family(scrape.families, name)
        if scrape is None or not isinstance(family, Scalar) or family.kind != kind or not math.isfinite(family.value):
            missing += 1
            continue
        if kind == "gauge":
            total.append(family.value)
            continue
        before = previous.get(uid)
        old = None if before is None else find_family(before.families, name)
        if before is None or not isinstance(old, Scalar) or old.kind != "counter" or scrape.time <= before.time:
            missing += 1
            continue
        elapsed = scrape.time - before.time
        total.append(counter_increase(old.value, family.value) / elapsed)
        intervals.append(elapsed)
    weight = math.fsum(intervals) / len(intervals) if intervals else 1.0
    return PodSample(total=math.fsum(total), reporting=len(total), missing=missing, unready=unready, weight=weight)


def external_sample(value: float | None) -> ExternalSample | None:
    """Wrap the value of a Prometheus instant query (``None`` or non-finite: no sample this pass)."""
    if value is None or not math.isfinite(value):
        return None
    return ExternalSample(value)
