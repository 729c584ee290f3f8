"""The ModelBooster status: Kthena's conditions, without its flapping and with a ``Failed`` that clears.

Conditions (types and reasons are Kthena's, modelbooster.md section 2):

* ``Initialized``: ``True``/``ModelCreating`` "ModelBooster initialized", from the first reconcile on.
* ``Active``: ``True``/``ModelAvailable`` "ModelBooster is ready" while the booster's ModelServing has
  ``Available=True``; otherwise ``False``/``ModelProcessing`` "ModelBooster not ready yet". It is computed,
  not reset on every pass, so it does not flap.
* ``Failed``: ``True``/``ModelAbnormal`` with the error while the booster cannot be expanded or a child cannot
  be written; once that passes it becomes ``False``/``ModelReconciled`` (Kthena never clears it). A booster
  that never failed has no ``Failed`` condition, as in Kthena.
* ``Prefetch`` (ours, only with the prefetch opt-in): ``True``/``ModelCacheRendered`` while the ModelServing is
  gated on the booster's ModelCache; ``False``/``PrefetchUnsupported`` with the reason while the booster cannot
  be mapped to one (its pods keep the per-pod downloader). Without the opt-in the condition is removed.

Guarantees: ``lastTransitionTime`` moves only when a condition's status changes; other condition types are
kept; the result is a pure function of its arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.vocab.conditions import (
    ACTIVE,
    FAILED,
    INITIALIZED,
    PREFETCH,
    REASON_MODEL_ABNORMAL,
    REASON_MODEL_AVAILABLE,
    REASON_MODEL_CREATING,
    REASON_MODEL_PROCESSING,
    REASON_MODEL_RECONCILED,
    REASON_PREFETCH_RENDERED,
    REASON_PREFETCH_UNSUPPORTED,
)

from .prefetch import PrefetchDecision

__all__ = ["ACTIVE", "FAILED", "INITIALIZED", "PREFETCH", "booster_status", "prefetch_condition"]

_MAX_MESSAGE = 32768


def _condition(type_: str, status: bool, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "observedGeneration": generation,
        "reason": reason,
        "message": message[:_MAX_MESSAGE],
    }


def prefetch_condition(prefetch: PrefetchDecision, modelserving: str, generation: int) -> dict[str, Any] | None:
    """The ``Prefetch`` condition of a decision (``None``: no opt-in, no condition)."""
    if not prefetch.requested:
        return None
    if prefetch.problem is not None:
        message = f"{prefetch.problem}; the pods keep the per-pod downloader"
        return _condition(PREFETCH, False, REASON_PREFETCH_UNSUPPORTED, message, generation)
    message = f"ModelServing {modelserving} is gated on ModelCache {prefetch.name}; no pod runs a downloader"
    return _condition(PREFETCH, True, REASON_PREFETCH_RENDERED, message, generation)


def booster_status(
    previous: Mapping[str, Any] | None,
    *,
    generation: int,
    observed_generation: int | None,
    available: bool,
    failure: str | None,
    now: str,
    prefetch: tuple[PrefetchDecision, str] | None = None,
) -> dict[str, Any]:
    """Compute the booster's status.

    Args:
        previous: The current ``status`` (may be ``None``).
        generation: The booster's ``metadata.generation`` (each condition's ``observedGeneration``).
        observed_generation: ``status.observedGeneration`` to write (``None`` keeps the previous value).
        available: Whether the booster's ModelServing is ``Available=True``.
        failure: Why the booster failed in this pass, or ``None``.
        now: The transition time (RFC 3339) for conditions whose status changes.
        prefetch: The prefetch decision and the ModelServing's name (``None``: keep the ``Prefetch`` condition
            as it is, e.g. when the booster could not be expanded).
    """
    previous = previous or {}
    old = [c for c in previous.get("conditions") or [] if isinstance(c, Mapping)]
    wanted = [
        _condition(INITIALIZED, True, REASON_MODEL_CREATING, "ModelBooster initialized", generation),
        _condition(ACTIVE, True, REASON_MODEL_AVAILABLE, "ModelBooster is ready", generation)
        if available and failure is None
        else _condition(ACTIVE, False, REASON_MODEL_PROCESSING, "ModelBooster not ready yet", generation),
    ]
    if failure is not None:
        wanted.append(_condition(FAILED, True, REASON_MODEL_ABNORMAL, failure, generation))
    elif any(c.get("type") == FAILED for c in old):
        wanted.append(
            _condition(FAILED, False, REASON_MODEL_RECONCILED, "ModelBooster children are reconciled", generation)
        )
    dropped: set[str] = set()
    if prefetch is not None:
        rendered = prefetch_condition(prefetch[0], prefetch[1], generation)
        if rendered is None:
            dropped.add(PREFETCH)
        else:
            wanted.append(rendered)
    by_type = {c["type"]: c for c in wanted}
    conditions: list[dict[str, Any]] = []
    for condition in old:
        if condition.get("type") in dropped:
            continue
        update = by_type.pop(str(condition.get("type")), None)
        if update is None:
            conditions.append(dict(condition))
            continue
        same = condition.get("status") == update["status"]
        conditions.append(
            {**update, "lastTransitionTime": (condition.get("lastTransitionTime") or now) if same else now}
        )
    conditions.extend({**c, "lastTransitionTime": now} for c in wanted if c["type"] in by_type)
    status: dict[str, Any] = {}
    value = observed_generation if observed_generation is not None else previous.get("observedGeneration")
    if value is not None:
        status["observedGeneration"] = value
    status["conditions"] = [_ordered(c) for c in conditions]
    return status


def _ordered(condition: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")
    return {k: condition[k] for k in keys if condition.get(k) is not None}
