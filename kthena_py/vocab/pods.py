"""Pod phases, readiness and termination, read from a pod held as a plain JSON dict.

Guarantees: every predicate is total (absent or malformed ``status``, ``conditions`` or ``metadata`` read as
"no"), never mutates its argument, and reads only the fields its docstring names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from .conditions import POD_READY

__all__ = [
    "CRASH_LOOP",
    "IMAGE_PULL_REASONS",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_SUCCEEDED",
    "TERMINAL_PHASES",
    "is_ready",
    "is_terminating",
    "phase_of",
    "ready_condition",
    "running_and_ready",
]

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
TERMINAL_PHASES = (PHASE_FAILED, PHASE_SUCCEEDED)

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
"""Container waiting reasons of an image that cannot be pulled (the kubelet's)."""
CRASH_LOOP = "CrashLoopBackOff"
"""The container waiting reason of a container that keeps exiting (the kubelet's)."""


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # JSON objects are dicts: the exact type check spares the abstract-class check of almost every call.
    return type(value) is dict or isinstance(value, Mapping)


def _status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if _is_mapping(status) else {}


def phase_of(pod: Mapping[str, Any]) -> Any:
    """Return ``status.phase`` (``None`` when absent)."""
    return _status(pod).get("phase")


def ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Return the first ``Ready`` condition of ``status.conditions``, if any."""
    for condition in _status(pod).get("conditions") or []:
        if _is_mapping(condition) and condition.get("type") == POD_READY:
            return condition
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    """Return whether some condition ``Ready`` has status ``"True"``."""
    return any(
        _is_mapping(c) and c.get("type") == POD_READY and c.get("status") == "True"
        for c in _status(pod).get("conditions") or []
    )


def running_and_ready(pod: Mapping[str, Any]) -> bool:
    """Return whether the phase is ``Running`` and the pod is Ready (termination is not looked at)."""
    return phase_of(pod) == PHASE_RUNNING and is_ready(pod)


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """Return whether ``metadata.deletionTimestamp`` is set."""
    metadata = obj.get("metadata")
    return _is_mapping(metadata) and bool(metadata.get("deletionTimestamp"))
