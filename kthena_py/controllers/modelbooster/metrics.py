"""Prometheus metrics of the ModelBooster controller, registered in :data:`kthena_py.runtime.metrics.REGISTRY`."""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter

from kthena_py.runtime.metrics import REGISTRY

__all__ = ["CHILD_WRITES"]

CHILD_WRITES: Final = Counter(
    "kthena_modelbooster_child_writes_total",
    "Writes of ModelBooster children: kind (ModelServing, ModelServer, ModelRoute), action (create, update, "
    "delete) and result (success, error).",
    ("kind", "action", "result"),
    registry=REGISTRY,
)
