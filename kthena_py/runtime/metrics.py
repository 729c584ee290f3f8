"""The controller-manager's Prometheus metrics, named as client-go and controller-runtime name them.

Guarantees:

* Every metric lives in the one module-level `REGISTRY` (not prometheus_client's global
  default registry), together with the process, platform and GC collectors, so a /metrics
  handler serving `REGISTRY` exposes exactly these series.
* Metrics are module-level singletons, created once at import; using them from several
  controllers or queues only adds label values.
* Work queue metrics carry the labels ``name`` and ``controller``, both the controller's
  name by default (as controller-runtime v0.20+ does):
  ``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_retries_total``,
  ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``.
  The last two are computed from the live queues at scrape time (a queue that has been
  garbage-collected disappears from them).
* Controller metrics carry the label ``controller``: ``controller_runtime_reconcile_total``
  (plus ``result`` in success|error|requeue|requeue_after),
  ``controller_runtime_reconcile_errors_total``,
  ``controller_runtime_terminal_reconcile_errors_total``,
  ``controller_runtime_reconcile_panics_total``, ``controller_runtime_reconcile_time_seconds``,
  ``controller_runtime_max_concurrent_reconciles`` and ``controller_runtime_active_workers``;
  and ``leader_election_master_status{name}`` is 1 while this process leads.

Importing this module turns off prometheus_client's ``*_created`` series process-wide
(client-go does not expose them).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from kthena_py.kube.metrics import (
    REST_CLIENT_LATENCY,
    REST_CLIENT_REQUESTS,
    REST_CLIENT_WAIT,
    WATCH_BYTES,
    WATCH_EVENTS,
)
from kthena_py.kube.tally import Tally, TallyGauge, TallyHistogram

if TYPE_CHECKING:
    from kthena_py.runtime.workqueue import InProgressSource

__all__ = [
    "ACTIVE_WORKERS",
    "LEADER_ELECTION_MASTER_STATUS",
    "MAX_CONCURRENT_RECONCILES",
    "RECONCILE_ERRORS",
    "RECONCILE_PANICS",
    "RECONCILE_RESULTS",
    "RECONCILE_TIME",
    "RECONCILE_TOTAL",
    "REGISTRY",
    "RESULT_ERROR",
    "RESULT_REQUEUE",
    "RESULT_REQUEUE_AFTER",
    "RESULT_SUCCESS",
    "TERMINAL_RECONCILE_ERRORS",
    "WORKQUEUE_ADDS",
    "WORKQUEUE_DEPTH",
    "WORKQUEUE_DURATION_BUCKETS",
    "WORKQUEUE_QUEUE_DURATION",
    "WORKQUEUE_RETRIES",
    "WORKQUEUE_WORK_DURATION",
    "PrometheusQueueMetrics",
    "init_controller_metrics",
    "label_sets",
]

disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client

REGISTRY: Final = CollectorRegistry()
"""The registry every runtime metric is registered in; serve this one on /metrics."""

ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)  # python_gc_*: collections by generation, what they found and freed

# -- work queues -----------------------------------------------------------------------

_QUEUE_LABELS: Final = ("name", "controller")

WORKQUEUE_DURATION_BUCKETS: Final = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)
"""Histogram buckets of the work queue durations: 10 ns to 1000 s, a factor 10 apart."""

# Updated several times per reconcile: lock-free (kthena_py.kube.tally) rather than prometheus-client metrics.
WORKQUEUE_DEPTH: Final = TallyGauge(
    "workqueue_depth", "Current depth of the work queue.", _QUEUE_LABELS, registry=REGISTRY
)
WORKQUEUE_ADDS: Final = Tally(
    "workqueue_adds_total",
    "Total number of adds handled by the work queue.",
    _QUEUE_LABELS,
    registry=REGISTRY,
)
WORKQUEUE_QUEUE_DURATION: Final = TallyHistogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in the work queue before being requested.",
    _QUEUE_LABELS,
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION: Final = TallyHistogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from the work queue takes.",
    _QUEUE_LABELS,
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_RETRIES: Final = Tally(
    "workqueue_retries_total",
    "Total number of retries handled by the work queue.",
    _QUEUE_LABELS,
    registry=REGISTRY,
)

_UNFINISHED_NAME: Final = "workqueue_unfinished_work_seconds"
_UNFINISHED_HELP: Final = (
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads."
)
_LONGEST_NAME: Final = "workqueue_longest_running_processor_seconds"
_LONGEST_HELP: Final = "How many seconds the longest running processor of the work queue has been running."


class _InProgressCollector:
    """Computes the in-progress gauges from the live queues at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[tuple[str, str], weakref.ref[InProgressSource]] = {}

    def track(self, labels: tuple[str, str], source: InProgressSource) -> None:
        """Reports `source` under `labels` from now on (replacing any earlier source)."""
        with self._lock:
            self._sources[labels] = weakref.ref(source)

    def describe(self) -> Iterable[Metric]:
        """Returns the (empty) families, so the registry knows the names without collecting."""
        return [
            GaugeMetricFamily(_UNFINISHED_NAME, _UNFINISHED_HELP, labels=_QUEUE_LABELS),
            GaugeMetricFamily(_LONGEST_NAME, _LONGEST_HELP, labels=_QUEUE_LABELS),
        ]

    def collect(self) -> Iterable[Metric]:
        """Returns both gauges, one sample per live queue."""
        unfinished = GaugeMetricFamily(_UNFINISHED_NAME, _UNFINISHED_HELP, labels=_QUEUE_LABELS)
        longest = GaugeMetricFamily(_LONGEST_NAME, _LONGEST_HELP, labels=_QUEUE_LABELS)
        with self._lock:
            items = list(self._sources.items())
        for labels, ref in items:
            source = ref()
            if source is None:
                with self._lock:
                    if self._sources.get(labels) is ref:
                        del self._sources[labels]
                continue
            unfinished.add_metric(labels, source.unfinished_work_seconds())
            longest.add_metric(labels, source.longest_running_processor_seconds())
        return [unfinished, longest]


_IN_PROGRESS: Final = _InProgressCollector()
REGISTRY.register(_IN_PROGRESS)
# The client layer's request metrics (rest_client_*), counted for every API call the process makes.
REGISTRY.register(REST_CLIENT_REQUESTS)
REGISTRY.register(REST_CLIENT_LATENCY)
REGISTRY.register(REST_CLIENT_WAIT)
# What every watch stream received (bytes and events by resource).
REGISTRY.register(WATCH_BYTES)
REGISTRY.register(WATCH_EVENTS)


class PrometheusQueueMetrics:
    """A `kthena_py.runtime.workqueue.QueueMetrics` that records into `REGISTRY`.

    Creating it initialises the queue's series (at 0), so they show before the first add.

    Args:
        name: The queue's name (the ``name`` label); normally the controller's name.
        controller: The ``controller`` label (default: `name`).
    """

    def __init__(self, name: str, controller: str | None = None) -> None:
        self.labels: tuple[str, str] = (name, controller if controller is not None else name)
        self._depth = WORKQUEUE_DEPTH.labels(*self.labels)
        self._adds = WORKQUEUE_ADDS.labels(*self.labels)
        self._queue_duration = WORKQUEUE_QUEUE_DURATION.labels(*self.labels)
        self._work_duration = WORKQUEUE_WORK_DURATION.labels(*self.labels)
        self._retries = WORKQUEUE_RETRIES.labels(*self.labels)

    def add(self) -> None:
        """Counts an add."""
        self._adds.inc()

    def depth(self, n: int) -> None:
        """Sets the depth gauge.

        Args:
            n: The queue's current depth.
        """
        self._depth.set(n)

    def get(self, queued_seconds: float) -> None:
        """Observes how long a key waited in the queue.

        Args:
            queued_seconds: The wait, in seconds.
        """
        self._queue_duration.observe(queued_seconds)

    def done(self, work_seconds: float) -> None:
        """Observes how long a key was processed.

        Args:
            work_seconds: The processing time, in seconds.
        """
        self._work_duration.observe(work_seconds)

    def retry(self) -> None:
        """Counts a retry (a delayed or rate-limited add)."""
        self._retries.inc()

    def observe_in_progress(self, source: InProgressSource) -> None:
        """Reports `source`'s in-progress work under this queue's labels at each scrape.

        Args:
            source: The queue (held through a weak reference).
        """
        _IN_PROGRESS.track(self.labels, source)


# -- controllers -----------------------------------------------------------------------

RESULT_SUCCESS: Final = "success"
RESULT_ERROR: Final = "error"
RESULT_REQUEUE: Final = "requeue"
RESULT_REQUEUE_AFTER: Final = "requeue_after"
RECONCILE_RESULTS: Final = (RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE, RESULT_REQUEUE_AFTER)
"""The values of the ``result`` label of `RECONCILE_TOTAL`."""

RECONCILE_TOTAL: Final = Tally(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller.",
    ("controller", "result"),
    registry=REGISTRY,
)
RECONCILE_ERRORS: Final = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller.",
    ("controller",),
    registry=REGISTRY,
)
TERMINAL_RECONCILE_ERRORS: Final = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller.",
    ("controller",),
    registry=REGISTRY,
)
RECONCILE_PANICS: Final = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics (unexpected exceptions) per controller.",
    ("controller",),
    registry=REGISTRY,
)
RECONCILE_TIME: Final = TallyHistogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller.",
    ("controller",),
    buckets=(
        *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9),
        *(1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0),
        *(10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0),
    ),
    registry=REGISTRY,
)
MAX_CONCURRENT_RECONCILES: Final = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller.",
    ("controller",),
    registry=REGISTRY,
)
ACTIVE_WORKERS: Final = TallyGauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller.",
    ("controller",),
    registry=REGISTRY,
)
SHARD_FILTERED: Final = Counter(
    "kthena_shard_filtered_requests_total",
    "Requests a sharded replica dropped because their namespace is another replica's (filtered on this side: when "
    "the change came, or when a worker would have taken it).",
    ("controller", "stage"),
    registry=REGISTRY,
)
SETTLING_KEYS: Final = TallyGauge(
    "kthena_controller_settling_keys",
    "Keys whose reconcile ended and whose settle wait (the cache showing its writes) holds them, without a worker.",
    ("controller",),
    registry=REGISTRY,
)
LEADER_ELECTION_MASTER_STATUS: Final = Gauge(
    "leader_election_master_status",
    "Whether this process is the leader (1) or not (0) of the lease called 'name'.",
    ("name",),
    registry=REGISTRY,
)


def init_controller_metrics(controller: str, max_concurrent_reconciles: int) -> None:
    """Initialises a controller's series, so they show (at 0) before its first reconcile.

    Args:
        controller: The controller's name (the ``controller`` label).
        max_concurrent_reconciles: The controller's number of workers.
    """
    for result in RECONCILE_RESULTS:
        RECONCILE_TOTAL.labels(controller, result)
    RECONCILE_ERRORS.labels(controller)
    TERMINAL_RECONCILE_ERRORS.labels(controller)
    RECONCILE_PANICS.labels(controller)
    RECONCILE_TIME.labels(controller)
    MAX_CONCURRENT_RECONCILES.labels(controller).set(max_concurrent_reconciles)
    ACTIVE_WORKERS.labels(controller).set(0)
    SETTLING_KEYS.labels(controller).set(0)


def label_sets(gauge: Gauge | TallyGauge) -> list[dict[str, str]]:
    """The label values of every series ``gauge`` exports now (read through its public ``collect``)."""
    return [dict(sample.labels) for family in gauge.collect() for sample in family.samples]
