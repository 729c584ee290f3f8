"""Prometheus metrics of the adapter reconciler, registered in :data:`kthena_py.runtime.metrics.REGISTRY`.

Guarantees: ``kthena_adapter_calls_total{namespace,modelserving,call,result}`` counts every load and unload sent
(``call`` = ``load``/``unload``, ``result`` = ``ok``/``failed``) and every adoption (``call`` = ``adopt``, an
adapter found loaded without its label, so labelled without a load); ``kthena_adapter_load_seconds`` has one
sample per load sent, answered or not; ``kthena_adapter_pods{namespace,modelserving,state}`` is the number of Ready
entry pods with the whole set loaded (``loaded``) and without (``pending``), and a ModelServing's series are
removed when it goes or drops its adapters (:func:`forget`); ``kthena_adapter_loads_in_flight`` is the number of
loads waiting for an answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from kthena_py.runtime.metrics import REGISTRY, label_sets

__all__ = ["CALLS", "IN_FLIGHT", "LOAD_SECONDS", "PODS", "forget", "forget_namespaces", "set_pods"]

CALLS: Final = Counter(
    "kthena_adapter_calls_total",
    "LoRA adapter loads and unloads sent to pods (and adoptions: found loaded, labelled without a load), by result.",
    ("namespace", "modelserving", "call", "result"),
    registry=REGISTRY,
)
LOAD_SECONDS: Final = Histogram(
    "kthena_adapter_load_seconds",
    "Time from sending a LoRA adapter load to its answer (the sidecar downloads first).",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
PODS: Final = Gauge(
    "kthena_adapter_pods",
    "Ready entry pods of a ModelServing with its whole LoRA adapter set loaded (loaded) and without (pending).",
    ("namespace", "modelserving", "state"),
    registry=REGISTRY,
)
IN_FLIGHT: Final = Gauge(
    "kthena_adapter_loads_in_flight",
    "LoRA adapter loads sent and not yet answered.",
    registry=REGISTRY,
)


def set_pods(namespace: str, name: str, loaded: int, pending: int) -> None:
    """Export the pod counts of one ModelServing."""
    PODS.labels(namespace, name, "loaded").set(loaded)
    PODS.labels(namespace, name, "pending").set(pending)


def forget(namespace: str, name: str) -> None:
    """Remove the pod counts of one ModelServing."""
    for state in ("loaded", "pending"):
        with contextlib.suppress(KeyError):
            PODS.remove(namespace, name, state)


def forget_namespaces(leaving: Callable[[str], bool]) -> None:
    """Remove the pod counts of the ModelServings in the namespaces ``leaving`` accepts."""
    for namespace, name in sorted({(labels["namespace"], labels["modelserving"]) for labels in label_sets(PODS)}):
        if leaving(namespace):
            forget(namespace, name)
