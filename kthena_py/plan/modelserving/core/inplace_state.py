"""The per-pod record of an in-place update: the annotation ``modelserving.volcano.sh/inplace-update-state``.

An in-place update keeps its state on the pods it patches, written in the same patch as the new images and
labels, so a restarted manager knows exactly which pods were patched, when, from and to which revision, and how
many container restarts the update itself explains. Nothing about an in-place update lives anywhere else.

Guarantees:

* :func:`parse_state` is total: a missing, malformed or foreign record (another pod's UID, an unknown version)
  reads as ``None``, never raises.
* Phases: ``Patched`` (images patched, not yet verified), ``Done`` (verified Ready on the target image),
  ``Failed`` (not verified within ``progressDeadlineSeconds``; recovery handles the pod by ``recoveryPolicy``).
* :func:`excused_restarts`: restarts the update explains and recovery must ignore. While ``Patched`` that is
  every restart since the patch (the kubelet restarts a container whose image changed); once ``Done`` the
  restarts between the patch and the verification; once ``Failed`` none of the window (the pod is replaced
  anyway). Restarts explained by earlier in-place updates of the same pod are carried along, so a pod updated
  in place several times never looks crashed because of its updates, and a real crash after an update still
  counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kthena_py.vocab.labels import SERVING_INPLACE_UPDATE_STATE
from kthena_py.vocab.times import format_time, parse_time

__all__ = [
    "ANNOTATION_INPLACE_STATE",
    "PHASE_DONE",
    "PHASE_FAILED",
    "PHASE_PATCHED",
    "STATE_VERSION",
    "InPlaceState",
    "container_restarts",
    "excused_restarts",
    "parse_state",
]

ANNOTATION_INPLACE_STATE = SERVING_INPLACE_UPDATE_STATE
STATE_VERSION = "v1"
Phase = Literal["Patched", "Done", "Failed"]
PHASE_PATCHED: Phase = "Patched"
PHASE_DONE: Phase = "Done"
PHASE_FAILED: Phase = "Failed"
_PHASES = (PHASE_PATCHED, PHASE_DONE, PHASE_FAILED)


def _format(now: float) -> str:
    return format_time(now)


def _parse_time(value: Any) -> float | None:
    return parse_time(value)


def container_restarts(status: Any) -> dict[str, int]:
    """``restartCount`` by container name (regular and init containers) of a pod ``status``."""
    out: dict[str, int] = {}
    if not isinstance(status, dict):
        return out
    for key in ("containerStatuses", "initContainerStatuses"):
        for item in status.get(key) or []:
            if not isinstance(item, dict):
                continue
            name, count = item.get("name"), item.get("restartCount")
            if isinstance(name, str) and isinstance(count, int) and not isinstance(count, bool):
                out[name] = count
    return out


@dataclass(frozen=True)
class InPlaceState:
    """One pod's in-place update record."""

    pod_uid: str
    source_revision: str
    target_revision: str
    phase: Phase
    patched_at: float
    baseline_restarts: Mapping[str, int] = field(default_factory=dict)
    """Restart counts by container when the pod was patched."""
    verified_restarts: Mapping[str, int] | None = None
    """Restart counts by container when the pod was verified (``Done`` only)."""
    excused_before: int = 0
    """Restarts explained by earlier in-place updates of this pod."""
    reason: str = ""
    """Why the update failed (``Failed`` only)."""

    def to_json(self) -> str:
        """The annotation value (compact, sorted keys: equal states give equal strings)."""
        doc: dict[str, Any] = {
            "version": STATE_VERSION,
            "podUID": self.pod_uid,
            "sourceRevision": self.source_revision,
            "targetRevision": self.target_revision,
            "phase": self.phase,
            "patchedAt": _format(self.patched_at),
            "baselineRestarts": dict(sorted(self.baseline_restarts.items())),
        }
        if self.verified_restarts is not None:
            doc["verifiedRestarts"] = dict(sorted(self.verified_restarts.items()))
        if self.excused_before:
            doc["excusedBefore"] = self.excused_before
        if self.reason:
            doc["reason"] = self.reason
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def done(self, restarts: Mapping[str, int]) -> InPlaceState:
        """This state, verified with the given restart counts."""
        return replace(self, phase=PHASE_DONE, verified_restarts=dict(restarts))

    def failed(self, reason: str) -> InPlaceState:
        """This state, failed for ``reason``."""
        return replace(self, phase=PHASE_FAILED, reason=reason)


def _counts(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    out: dict[str, int] = {}
    for key, count in value.items():
        if not isinstance(key, str) or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return None
        out[key] = count
    return out


def parse_state(annotations: Any, pod_uid: str) -> InPlaceState | None:
    """Read the record from a pod's annotations (``None`` when absent, malformed or not this pod's)."""
    if not isinstance(annotations, dict):
        return None
    raw = annotations.get(ANNOTATION_INPLACE_STATE)
    if not isinstance(raw, str):
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
        return None
    uid, source, target, phase = (doc.get(k) for k in ("podUID", "sourceRevision", "targetRevision", "phase"))
    patched_at = _parse_time(doc.get("patchedAt"))
    baseline = _counts(doc.get("baselineRestarts", {}))
    verified = _counts(doc["verifiedRestarts"]) if "verifiedRestarts" in doc else None
    excused = doc.get("excusedBefore", 0)
    reason = doc.get("reason", "")
    if (
        not isinstance(uid, str)
        or (pod_uid and uid != pod_uid)
        or not isinstance(source, str)
        or not isinstance(target, str)
        or phase not in _PHASES
        or patched_at is None
        or baseline is None
        or ("verifiedRestarts" in doc and verified is None)
        or not isinstance(excused, int)
        or isinstance(excused, bool)
        or excused < 0
        or not isinstance(reason, str)
    ):
        return None
    return InPlaceState(uid, source, target, phase, patched_at, baseline, verified, excused, reason)


def excused_restarts(state: InPlaceState | None, current: Mapping[str, int]) -> int:
    """Restarts of a pod that in-place updates explain (see the module docstring); never above the total."""
    total = sum(current.values())
    if state is None:
        return 0
    window = 0
    if state.phase == PHASE_PATCHED:
        window = sum(max(0, count - state.baseline_restarts.get(name, 0)) for name, count in current.items())
    elif state.phase == PHASE_DONE and state.verified_restarts is not None:
        window = sum(
            max(0, count - state.baseline_restarts.get(name, 0)) for name, count in state.verified_restarts.items()
        )
    return min(total, state.excused_before + window)
