"""Prometheus metrics of the ModelPool controller, registered in :data:`kthena_py.runtime.metrics.REGISTRY`.

Guarantees: ``kthena_modelpool_swaps_total{namespace,pool,result}`` counts each swap once when it ends
(``completed`` or ``abandoned``) and each deferral once when it starts (``deferred``), never once per
reconcile; ``kthena_modelpool_swap_seconds{step}`` gets one sample per step of each completed swap
(``draining``: start to the victim's scale-down, ``releasing``: until its pods were gone, ``loading``: until the
target was Ready, ``total``); a swap into a free slot has only ``loading`` and ``total``.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Histogram

from kthena_py.plan.modelpool.swap import CompletedSwap
from kthena_py.runtime.metrics import REGISTRY

__all__ = ["SWAPS", "SWAP_SECONDS", "observe_swap"]

SWAPS: Final = Counter(
    "kthena_modelpool_swaps_total",
    "ModelPool swaps by how they ended (completed, abandoned) and deferrals when they started (deferred).",
    ["namespace", "pool", "result"],
    registry=REGISTRY,
)
SWAP_SECONDS: Final = Histogram(
    "kthena_modelpool_swap_seconds",
    "Seconds each step of a completed ModelPool swap took (draining, releasing, loading, total).",
    ["step"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200),
    registry=REGISTRY,
)


def observe_swap(done: CompletedSwap) -> None:
    """Record the steps of a completed swap."""
    if done.drained is not None:
        SWAP_SECONDS.labels("draining").observe(max(0.0, done.drained - done.started))
        if done.released is not None:
            SWAP_SECONDS.labels("releasing").observe(max(0.0, done.released - done.drained))
    start_loading = done.released if done.released is not None else done.started
    SWAP_SECONDS.labels("loading").observe(max(0.0, done.ready - start_loading))
    SWAP_SECONDS.labels("total").observe(done.duration)
