"""Counters for the hottest paths: plain numbers bumped without a lock, read by Prometheus when it scrapes.

prometheus-client's ``Counter`` takes a lock and checks its argument on every increment; a watch stream counts two
of them per event (about 1 % of a profile's samples at 500 ModelServings; 490 against 89 ns an event by
``bench/hot_paths.py``). A :class:`Tally` keeps each series' count in a plain attribute instead.

Guarantees:

* Exact: every :meth:`TallyChild.inc` is in the next scrape; nothing is batched or sampled.
* Exposed as a Prometheus counter (``<name>`` with its ``_total`` sample, same labels and help as a ``Counter``
  would have), through :meth:`Tally.collect`; the registry that registers it reads it at scrape time.
* Safe for one writing thread (the event loop) and any number of scraping threads: an increment is one attribute
  update under the interpreter lock, and a scrape copies the series in one step (``dict.copy``) before reading
  them.
* Increments must not be negative (as with a ``Counter``); unlike one, this is not checked on the hot path.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["Tally", "TallyChild"]


class TallyChild:
    """The count of one series of a :class:`Tally`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (not negative) to the count."""
        self.value += amount


class Tally(Collector):
    """A lock-free Prometheus counter family (module docstring); ``name`` ends in ``_total``."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]) -> None:
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends in _total: {name!r}")
        self._family = name.removesuffix("_total")
        self._documentation = documentation
        self._labelnames = labelnames
        self._children: dict[tuple[str, ...], TallyChild] = {}

    def labels(self, *labelvalues: str) -> TallyChild:
        """The series of these label values (created at 0 on first use), to keep and bump."""
        if len(labelvalues) != len(self._labelnames):
            raise ValueError(f"expected {len(self._labelnames)} label values, got {labelvalues!r}")
        child = self._children.get(labelvalues)
        if child is None:
            child = self._children[labelvalues] = TallyChild()
        return child

    def collect(self) -> Iterator[CounterMetricFamily]:
        """The family with every series' count as it is now."""
        family = CounterMetricFamily(self._family, self._documentation, labels=self._labelnames)
        # dict.copy() takes the series in one step; list(items()) builds a tuple per series, and an allocation can
        # run the garbage collector, whose finalizers may hand the interpreter to the writing thread mid-walk.
        for labelvalues, child in self._children.copy().items():
            family.add_metric(list(labelvalues), child.value)
        yield family

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The family without samples, for the registry's name check at registration."""
        yield CounterMetricFamily(self._family, self._documentation, labels=self._labelnames)
