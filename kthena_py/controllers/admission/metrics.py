"""Prometheus metrics of the admission webhooks' checks across objects (in ``kthena_py.runtime.metrics.REGISTRY``).

Guarantees: ``kthena_admission_pool_guard_total{kind,result}`` counts each ModelPool or AutoscalingPolicy write the
pool guard looked at once, with ``result`` one of :data:`RESULTS`: ``admitted`` (no conflict), ``refused`` (a
ModelServing in two pools, or an AutoscalingPolicy on a member), ``unavailable`` (the neighbours could not be
listed: the write was refused). Writes that add no reference (an unrelated update) list nothing and are not
counted. (controller-runtime's ``controller_runtime_webhook_requests_total`` counts HTTP answers, which are 200
for a denial too.)
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter

from kthena_py.runtime.metrics import REGISTRY

__all__ = ["POOL_GUARD", "RESULTS"]

RESULTS: Final = ("admitted", "refused", "unavailable")

POOL_GUARD: Final = Counter(
    "kthena_admission_pool_guard_total",
    "ModelPool and AutoscalingPolicy writes checked against the namespace's pools and policies, by result.",
    ("kind", "result"),
    registry=REGISTRY,
)
