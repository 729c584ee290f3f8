"""Prometheus metrics of the ModelCache controller, registered in :data:`kthena_py.runtime.metrics.REGISTRY`.

Guarantees: ``kthena_modelcache_phase`` is 1 for the cache's current phase and 0 for the other three, and a
deleted cache's series are removed (:func:`forget`), so the gauge counts caches per phase with ``sum by
(phase)``; the download histogram gets one sample per cache that becomes Ready (from its Job's start to its
end, as the Job reports them), never one per reconcile; ``kthena_modelcache_model_info`` has one series per cache
whose status says what the model is (:func:`set_model` replaces the old series when the model changes);
``kthena_modelcache_retirements_total`` counts once per superseded copy retired (or per failed removal), with
its Event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final, get_args

from prometheus_client import Counter, Gauge, Histogram

from kthena_py.api.modelcache import ModelCachePhase
from kthena_py.runtime.metrics import REGISTRY, label_sets

__all__ = [
    "ATTESTATION_VERIFIED",
    "BYTES",
    "DOWNLOAD_SECONDS",
    "JOB_WRITES",
    "MODEL_INFO",
    "PHASE",
    "RETIREMENTS",
    "REVALIDATIONS",
    "forget",
    "forget_namespaces",
    "set_model",
    "set_phase",
]

PHASES: tuple[str, ...] = get_args(ModelCachePhase)

PHASE: Final = Gauge(
    "kthena_modelcache_phase",
    "1 for the phase each ModelCache is in (Pending, Downloading, Ready, Failed), 0 for the others.",
    ("namespace", "name", "phase"),
    registry=REGISTRY,
)
BYTES: Final = Gauge(
    "kthena_modelcache_bytes",
    "Bytes a Ready ModelCache holds (status.sizeBytes).",
    ("namespace", "name"),
    registry=REGISTRY,
)
REVALIDATIONS: Final = Counter(
    "kthena_modelcache_revalidations_total",
    "Revalidation probes of ModelCache sources, by outcome (succeeded, failed, unsupported).",
    ("outcome",),
    registry=REGISTRY,
)
RETIREMENTS: Final = Counter(
    "kthena_modelcache_retirements_total",
    "Superseded copies of OnChange ModelCaches, by outcome: retired (directory removed, Jobs deleted) or failed "
    "(the cleanup Job failed and is retried).",
    ("outcome",),
    registry=REGISTRY,
)
DOWNLOAD_SECONDS: Final = Histogram(
    "kthena_modelcache_download_seconds",
    "Seconds from a download Job's creation to its completion, for each ModelCache that became Ready.",
    buckets=(5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400),
    registry=REGISTRY,
)
JOB_WRITES: Final = Counter(
    "kthena_modelcache_child_writes_total",
    "Writes of ModelCache children: kind (Job, PodGroup, PersistentVolumeClaim), action (create, delete) and "
    "result (success, error).",
    ("kind", "action", "result"),
    registry=REGISTRY,
)
ATTESTATION_VERIFIED: Final = Gauge(
    "kthena_modelcache_attestation_verified",
    "1 when a ModelCache's attestation verified (AttestationVerified True), 0 when it did not; no series while "
    "nothing is staged or no attestation is checked.",
    ("namespace", "name"),
    registry=REGISTRY,
)

MODEL_INFO: Final = Gauge(
    "kthena_modelcache_model_info",
    "1 for what each ModelCache's model is, from status.gguf (else status.modelConfig, whose dtype stands for the "
    "quantization).",
    ("namespace", "name", "architecture", "quantization", "context_length"),
    registry=REGISTRY,
)
_MODEL_SERIES: dict[tuple[str, str], tuple[str, str, str]] = {}


def set_model(namespace: str, name: str, labels: tuple[str, str, str] | None) -> None:
    """Record what the cache's model is (``None``: not known), replacing the series of a previous model."""
    before = _MODEL_SERIES.pop((namespace, name), None)
    if before is not None and before != labels:
        with contextlib.suppress(KeyError):
            MODEL_INFO.remove(namespace, name, *before)
    if labels is not None:
        _MODEL_SERIES[(namespace, name)] = labels
        MODEL_INFO.labels(namespace, name, *labels).set(1)


def set_phase(namespace: str, name: str, phase: str) -> None:
    """Record ``phase`` as the cache's current phase."""
    for candidate in PHASES:
        PHASE.labels(namespace, name, candidate).set(1 if candidate == phase else 0)


def forget(namespace: str, name: str) -> None:
    """Remove a deleted cache's series."""
    for candidate in PHASES:
        with contextlib.suppress(KeyError):
            PHASE.remove(namespace, name, candidate)
    with contextlib.suppress(KeyError):
        BYTES.remove(namespace, name)
    with contextlib.suppress(KeyError):
        ATTESTATION_VERIFIED.remove(namespace, name)
    set_model(namespace, name, None)


def forget_namespaces(leaving: Callable[[str], bool]) -> None:
    """Remove the series of every cache in the namespaces ``leaving`` accepts (another replica reconciles them)."""
    gauges = (PHASE, BYTES, ATTESTATION_VERIFIED)
    named = {(labels["namespace"], labels["name"]) for gauge in gauges for labels in label_sets(gauge)}
    for namespace, name in sorted(named | set(_MODEL_SERIES)):
        if leaving(namespace):
            forget(namespace, name)
