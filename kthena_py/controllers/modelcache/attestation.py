"""What the ModelCache controller reports about attestations besides the status: a metric and a log line.

Guarantees: ``kthena_modelcache_attestation_verified`` follows the ``AttestationVerified`` condition the plan
wrote (1 True, 0 False, no series when Unknown or absent); one structured log line is written when the
condition's status or reason changes, never on a reconcile that changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import structlog

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import ModelCache
from kthena_py.vocab.conditions import ATTESTATION_VERIFIED

from . import metrics

__all__ = ["report_attestation"]

log = structlog.get_logger("kthena_py.modelcache")


def _condition(status: Mapping[str, Any]) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ATTESTATION_VERIFIED), {})


def report_attestation(mc: ModelCache, status: Mapping[str, Any]) -> None:
    """Update the metric and log a change of the cache's ``AttestationVerified`` condition."""
    new = _condition(status)
    value = {"True": 1.0, "False": 0.0}.get(str(new.get("status")))
    if value is None:
        with contextlib.suppress(KeyError):
            metrics.ATTESTATION_VERIFIED.remove(mc.namespace, mc.name)
    else:
        metrics.ATTESTATION_VERIFIED.labels(mc.namespace, mc.name).set(value)
    old = _condition(to_dict(mc.status) if mc.status is not None else {})
    if new and (old.get("status"), old.get("reason")) != (new.get("status"), new.get("reason")):
        (log.info if new.get("status") != "False" else log.warning)(
            "modelcache attestation",
            cache=f"{mc.namespace}/{mc.name}",
            verified=new.get("status"),
            reason=new.get("reason"),
            message=new.get("message"),
        )
