"""The activator's Prometheus metrics, in the process registry the probe server exposes.

Guarantees: every series carries ``namespace`` and ``modelserving``; the names are the contract with the
deployment and the autoscaler (``kthena_activator_*``):

* ``kthena_activator_requests_held`` (gauge): requests waiting for a Ready backend now.
* ``kthena_activator_requests_in_flight`` (gauge): requests forwarded and not finished.
* ``kthena_activator_requests_total{code}``: finished requests by the status the client got (``499``: the
  client went away first).
* ``kthena_activator_hold_seconds`` (histogram): how long held requests waited (served or not).
* ``kthena_activator_scale_writes_total{result}``: scale writes 0 -> 1 by outcome: ``written``, ``conflict``
  (someone else changed it first), ``error``.
* ``kthena_activator_state_writes_total{result}``: writes of the state annotation ``kubectl get ms`` shows, by
  outcome: ``written``, ``conflict`` (a stale read; the next change is looked at again), ``error``.
* ``kthena_activator_demand_writes_total{pool, result}``: demand records written on a ModelPool for its member
  ``modelserving``, by outcome: ``written``, ``gone`` (the pool no longer exists), ``error``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from kthena_py.runtime.metrics import REGISTRY

__all__ = [
    "DEMAND_WRITES",
    "HOLD_SECONDS",
    "REQUESTS_HELD",
    "REQUESTS_IN_FLIGHT",
    "REQUESTS_TOTAL",
    "SCALE_WRITES",
    "STATE_WRITES",
]

_LABELS = ("namespace", "modelserving")

REQUESTS_HELD = Gauge(
    "kthena_activator_requests_held",
    "Requests held while their ModelServing has no Ready backend, or waiting to retry after a failed attempt.",
    _LABELS,
    registry=REGISTRY,
)
REQUESTS_IN_FLIGHT = Gauge(
    "kthena_activator_requests_in_flight",
    "Requests forwarded to a backend and not finished.",
    _LABELS,
    registry=REGISTRY,
)
REQUESTS_TOTAL = Counter(
    "kthena_activator_requests_total",
    "Requests answered, by the status the client got.",
    (*_LABELS, "code"),
    registry=REGISTRY,
)
HOLD_SECONDS = Histogram(
    "kthena_activator_hold_seconds",
    "Seconds held requests waited for a Ready backend.",
    _LABELS,
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
SCALE_WRITES = Counter(
    "kthena_activator_scale_writes_total",
    "Scale writes 0 -> 1 by outcome.",
    (*_LABELS, "result"),
    registry=REGISTRY,
)
STATE_WRITES = Counter(
    "kthena_activator_state_writes_total",
    "Writes of the ModelServing annotation that says the activator will wake it, by outcome.",
    (*_LABELS, "result"),
    registry=REGISTRY,
)
DEMAND_WRITES = Counter(
    "kthena_activator_demand_writes_total",
    "Demand records written on a ModelPool for one of its members, by outcome.",
    (*_LABELS, "pool", "result"),
    registry=REGISTRY,
)
