"""The AutoscalingPolicy status: conditions, per-target scaling state, and the rule for writing it.

Status layout (API reference): ``observedGeneration``; ``conditions`` (``metav1.Condition``); exactly one of
``homogeneousStatus``, ``heterogeneousStatus[]`` and ``disaggregatedStatus`` (``roles[]``, ``ratioStatus``,
``ratioAdjusted``), each entry with ``currentReplicas`` (seen by the pass, before it scaled), ``desiredReplicas``
(decided by the pass; for roles, before the ratio repair), ``mode`` (``Stable`` or ``Panic``) and
``lastScaleTime`` (when the pass last changed that target).

Conditions and their reasons:

* ``Ready``: ``True``/``Reconciled``; ``False`` with ``InvalidSpec``, ``TargetNotFound``, ``TargetInvalid`` or
  ``ScaleFailed`` (the message names the target, the sizes and the API server's answer; every refused scale
  write also records a ``FailedRescale`` Warning Event, which the recorder coalesces).
* ``TargetFound``: ``True``/``TargetFound``; ``False`` with ``TargetNotFound`` or ``TargetInvalid`` (a kind or
  group that is not ModelServing, a role missing from the ModelServing).
* ``MetricsAvailable``: ``True`` with ``AllMetricsAvailable`` (or ``FixedReplicas`` when nothing needs metrics);
  ``True``/``SomeMetricsMissing`` when at least one metric of every unit has data; ``False``/``NoMetrics``
  when a unit has none (it then holds its replica count).
* ``RatioConstraintViolated`` (disaggregated targets with a ratio constraint; Kthena documents it but never sets
  it): ``False``/``RatioSatisfied``, or ``True``/``RatioUnsatisfiable`` when no pair within the roles' bounds
  satisfies the constraint.

Guarantees:

* ``lastTransitionTime`` only moves when a condition's status changes; messages never carry metric values, so
  a steady policy has a steady status.
* The status is written (merge patch of the ``status`` subresource, carrying the policy's UID) only when it
  differs from the cached one (:meth:`~kthena_py.runtime.statuswrite.StatusWriter.replace`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject
from kthena_py.runtime.statuswrite import StatusWriter
from kthena_py.vocab.conditions import METRICS_AVAILABLE, RATIO_VIOLATED, READY, REASON_SCALE_FAILED, TARGET_FOUND
from kthena_py.vocab.times import format_time

from ..resources import AUTOSCALINGPOLICIES

__all__ = [
    "FAILED_RESCALE",
    "METRICS_AVAILABLE",
    "RATIO_VIOLATED",
    "READY",
    "SCALE_FAILED",
    "TARGET_FOUND",
    "ConditionUpdate",
    "build_status",
    "condition_of",
    "merge_conditions",
    "problem_status",
    "rfc3339",
    "scaling_entry",
    "write_status",
]

FAILED_RESCALE = "FailedRescale"
"""Warning Event reason of every refused scale write (HorizontalPodAutoscaler's name), with the server's message."""
SCALE_FAILED = REASON_SCALE_FAILED
_NEGATIVE = frozenset({RATIO_VIOLATED})
_TARGET_FIELDS = ("homogeneousStatus", "heterogeneousStatus", "disaggregatedStatus")
_MAX_MESSAGE = 2048


def rfc3339(seconds: float) -> str:
    """Format a Unix time as ``metav1.Time`` (second precision, UTC)."""
    return format_time(seconds)


@dataclass(frozen=True)
class ConditionUpdate:
    """The wanted state of one condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


def problem_status(type_: str) -> str:
    """The status that signals a problem for a condition type (``True`` for negative-polarity types)."""
    return "True" if type_ in _NEGATIVE else "False"


def condition_of(status: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    """Return the condition ``type_`` of a status, if any."""
    for condition in (status or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == type_:
            return condition
    return None


def merge_conditions(
    old: Sequence[Mapping[str, Any]], updates: Sequence[ConditionUpdate], generation: int, now: str
) -> list[dict[str, Any]]:
    """Apply ``updates`` to the conditions ``old`` (others kept, order stable, new ones appended).

    Args:
        old: Current conditions.
        updates: Wanted states.
        generation: ``metadata.generation`` observed.
        now: Transition time for conditions whose status changes.
    """
    wanted = {u.type: u for u in updates}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for condition in old:
        type_ = str(condition.get("type", ""))
        update = wanted.get(type_)
        seen.add(type_)
        if update is None:
            out.append(dict(condition))
            continue
        changed = condition.get("status") != update.status
        out.append(
            {
                "type": type_,
                "status": update.status,
                "observedGeneration": generation,
                "lastTransitionTime": now if changed else condition.get("lastTransitionTime") or now,
                "reason": update.reason,
                "message": update.message[:_MAX_MESSAGE],
            }
        )
    for update in updates:
        if update.type not in seen:
            out.append(
                {
                    "type": update.type,
                    "status": update.status,
                    "observedGeneration": generation,
                    "lastTransitionTime": now,
                    "reason": update.reason,
                    "message": update.message[:_MAX_MESSAGE],
                }
            )
    return out


def scaling_entry(
    name: str | None,
    current: int,
    desired: int,
    mode: str,
    *,
    previous: Mapping[str, Any] | None,
    scaled_at: str | None,
) -> dict[str, Any]:
    """Build one ``TargetScalingStatus``.

    Args:
        name: Unit name (``None`` for the homogeneous status).
        current: Replicas seen before the pass scaled.
        desired: Replicas decided (for a role: before the ratio repair).
        mode: ``Stable`` or ``Panic``.
        previous: The unit's previous entry (its ``lastScaleTime`` is kept).
        scaled_at: The time of this pass if it changed the unit, else ``None``.
    """
    entry: dict[str, Any] = {}
    if name is not None:
        entry["name"] = name
    entry.update({"currentReplicas": current, "desiredReplicas": desired, "mode": mode})
    last = scaled_at or (previous or {}).get("lastScaleTime")
    if last:
        entry["lastScaleTime"] = last
    return entry


def build_status(
    old: Mapping[str, Any] | None,
    *,
    generation: int,
    conditions: Sequence[ConditionUpdate],
    now: str,
    target: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Return the new status.

    Args:
        old: The cached status.
        generation: ``metadata.generation``.
        conditions: Condition updates.
        now: Current time (RFC 3339) for transitions.
        target: At most one of ``homogeneousStatus``/``heterogeneousStatus``/``disaggregatedStatus`` (the others
            are dropped); ``None`` keeps the old target fields.
    """
    old = old or {}
    status: dict[str, Any] = {"observedGeneration": generation}
    status["conditions"] = merge_conditions(old.get("conditions") or [], conditions, generation, now)
    fields = target if target is not None else {k: old[k] for k in _TARGET_FIELDS if k in old}
    status.update({k: v for k, v in fields.items() if k in _TARGET_FIELDS and v is not None})
    return status


async def write_status(client: KubeApi, obj: KubeObject, status: Mapping[str, Any], field_manager: str) -> bool:
    """Write ``status`` if it differs from the cached object's; return whether a write happened.

    Raises:
        ApiError: The write failed (other than the policy being gone).
    """
    return (await StatusWriter(client, AUTOSCALINGPOLICIES, field_manager).replace(obj, status)).written
