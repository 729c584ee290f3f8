"""Metrics for the hottest paths: plain numbers updated without a lock, read by Prometheus when it scrapes.

prometheus-client's ``Counter``, ``Gauge`` and ``Histogram`` take a lock and check their argument on every update;
a watch stream counts two of them per event, every request three (its count, its latency, its wait for a
connection) and every reconcile about eight (the queue's adds, depth and durations, the reconcile's count, time and
active workers). :class:`Tally` (a counter), :class:`TallyGauge` and :class:`TallyHistogram` keep each series in
plain attributes instead (``bench/hot_paths.py`` prices both ways).

Guarantees:

* Exact: every update is in the next scrape; nothing is batched or sampled.
* Exposed as prometheus-client would expose the same metric (a counter's ``_total`` sample; a gauge's value; a
  histogram's cumulative ``_bucket`` samples with ``le`` labels formatted as prometheus-client formats them, its
  ``_count`` and ``_sum``), with the same name, labels and help, through ``collect``; the registry that registers
  one reads it at scrape time.
* Safe for one writing thread (the event loop) and any number of scraping threads: an update is one or two
  attribute or list-slot updates under the interpreter lock, and a scrape copies the series in one step
  (``dict.copy``) and each histogram's buckets in one step (``list.copy``) before reading them. A scrape from another
  thread may see a histogram observation in its bucket and not yet in its ``_sum`` (one sample's worth, until the
  next scrape); the event loop's own ``/metrics`` handler never does.
* Counter increments must not be negative (as with a ``Counter``); unlike one, this is not checked on the hot path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar, cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

__all__ = ["Tally", "TallyChild", "TallyGauge", "TallyGaugeChild", "TallyHistogram", "TallyHistogramChild"]

_bucket_label = cast(Callable[[float], str], floatToGoString)
"""A bucket bound as prometheus-client writes it in ``le`` (``+Inf``, ``0.005``, ``1e-08``)."""

_Child = TypeVar("_Child")


class _Family(Collector, Generic[_Child]):
    """A metric family's series by label values: what the three kinds share.

    Args:
        registry: Registered in it when given (as prometheus-client's ``registry=``); else register it yourself.
    """

    def __init__(
        self, name: str, documentation: str, labelnames: tuple[str, ...], registry: CollectorRegistry | None = None
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = labelnames
        self._children: dict[tuple[str, ...], _Child] = {}
        if registry is not None:
            registry.register(self)

    def _new_child(self) -> _Child:
        raise NotImplementedError

    def _empty(self) -> Metric:
        """The family without samples."""
        raise NotImplementedError

    def labels(self, *labelvalues: str) -> _Child:
        """The series of these label values (created at zero on first use), to keep and update."""
        child = self._children.get(labelvalues)
        if child is None:
            if len(labelvalues) != len(self._labelnames):
                raise ValueError(f"expected {len(self._labelnames)} label values, got {labelvalues!r}")
            child = self._children[labelvalues] = self._new_child()
        return child

    def remove(self, *labelvalues: str) -> None:
        """Stop exporting the series of these label values (nothing happens if there is none)."""
        self._children.pop(labelvalues, None)

    def _series(self) -> list[tuple[list[str], _Child]]:
        # dict.copy() takes the series in one step; list(items()) builds a tuple per series, and an allocation can
        # run the garbage collector, whose finalizers may hand the interpreter to the writing thread mid-walk.
        return [(list(labelvalues), child) for labelvalues, child in self._children.copy().items()]

    def describe(self) -> Iterator[Metric]:
        """The family without samples, for the registry's name check at registration."""
        yield self._empty()


class TallyChild:
    """The count of one series of a :class:`Tally`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (not negative) to the count."""
        self.value += amount


_Value = TypeVar("_Value", bound=TallyChild)


class _ValueFamily(_Family[_Value]):
    """A family whose series each hold one number (counters and gauges)."""

    def _empty(self) -> CounterMetricFamily | GaugeMetricFamily:
        raise NotImplementedError

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """The family with every series' number as it is now."""
        family = self._empty()
        for labelvalues, child in self._series():
            family.add_metric(labelvalues, child.value)
        yield family


class Tally(_ValueFamily[TallyChild]):
    """A lock-free Prometheus counter family (module docstring); ``name`` ends in ``_total``."""

    def __init__(
        self, name: str, documentation: str, labelnames: tuple[str, ...], registry: CollectorRegistry | None = None
    ) -> None:
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends in _total: {name!r}")
        super().__init__(name.removesuffix("_total"), documentation, labelnames, registry)

    def _new_child(self) -> TallyChild:
        return TallyChild()

    def _empty(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)


class TallyGaugeChild(TallyChild):
    """The value of one series of a :class:`TallyGauge` (its ``inc`` takes any sign)."""

    __slots__ = ()

    def set(self, value: float) -> None:
        """Make the value ``value``."""
        self.value = float(value)

    def dec(self, amount: float = 1.0) -> None:
        """Subtract ``amount``."""
        self.value -= amount


class TallyGauge(_ValueFamily[TallyGaugeChild]):
    """A lock-free Prometheus gauge family (module docstring)."""

    def _new_child(self) -> TallyGaugeChild:
        return TallyGaugeChild()

    def _empty(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self._name, self._documentation, labels=self._labelnames)


class TallyHistogramChild:
    """The buckets and sum of one series of a :class:`TallyHistogram`."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        """Observations per bucket, not cumulative: ``counts[i]`` holds those in ``(bounds[i-1], bounds[i]]``."""
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper bound holds it, and add it to the sum."""
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value


class TallyHistogram(_Family[TallyHistogramChild]):
    """A lock-free Prometheus histogram family (module docstring).

    Args:
        buckets: The upper bounds, ascending; ``+Inf`` is added when missing, as prometheus-client does.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...],
        buckets: Sequence[float],
        registry: CollectorRegistry | None = None,
    ) -> None:
        bounds = tuple(float(b) for b in buckets)
        if list(bounds) != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ValueError(f"buckets must be ascending and distinct: {buckets!r}")
        if not bounds or bounds[-1] != float("inf"):
            bounds = (*bounds, float("inf"))
        self._bounds = bounds
        self._les = tuple(_bucket_label(b) for b in bounds)
        super().__init__(name, documentation, labelnames, registry)

    def _new_child(self) -> TallyHistogramChild:
        return TallyHistogramChild(self._bounds)

    def _empty(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """The family with every series' cumulative buckets, count and sum as they are now."""
        family = self._empty()
        for labelvalues, child in self._series():
            running = 0.0
            buckets: list[tuple[str, float]] = []
            for le, n in zip(self._les, child.counts.copy(), strict=True):
                running += n
                buckets.append((le, running))
            family.add_metric(labelvalues, buckets, child.sum)
        yield family
