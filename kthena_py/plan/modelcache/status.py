"""A ModelCache's status and the Events of its changes, derived from the units' decisions (pure).

Phase (first match): **Ready** when at least one unit is ready (node-local: one node is enough);
**Failed** when the storage is unavailable or the newest attempt of a unit failed and none runs;
**Downloading** when a download pod runs; **Pending** otherwise (nothing staged and nothing running yet:
waiting for a ModelServing under ``prefetch: false``, for the claim, or for the download pod to start).

Conditions (``observedGeneration`` on each, ``lastTransitionTime`` kept while the status of a type stays):

* ``Ready``: True/``Cached`` when Ready; else False with the phase's reason (``Pending``, ``Downloading``, or the
  failure's reason).
* ``Progressing``: True while a download runs, starts, or a retry is scheduled; False when nothing more will
  happen by itself (Ready, a permanent failure, an unavailable storage, waiting for a ModelServing).
* ``Degraded``: True with ``IntegrityCheckFailed`` / ``DownloadFailed`` (the newest failure not yet overcome,
  its message from the pod's termination message) or ``StorageUnavailable``; False/``NoFailure`` otherwise.

Files, digests, size and revision come from the ready unit's result; when its pod is gone they are kept from the
previous status of the same fingerprint. ``progress`` is set only while Downloading.
The model's metadata (``gguf``, ``modelConfig``, see :mod:`.metadata`) follows the same rule as the files.

Events (comparing the previous status with the new one, so a restart on a converged cache records nothing):
Normal ``Downloading`` when the phase becomes Downloading; Normal ``Cached`` when it becomes Ready (and when
more nodes of a node-local cache become ready); Warning ``<Degraded reason>`` when Degraded becomes True or its
message changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import (
    PHASE_DOWNLOADING,
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_READY,
    DownloadProgress,
    ModelCache,
    ModelCachePhase,
)
from kthena_py.vocab.conditions import (
    DEGRADED,
    PROGRESSING,
    READY,
    REASON_ATTESTATION_FAILED,
    REASON_CACHE_PENDING,
    REASON_CACHE_READY,
    REASON_DOWNLOADING,
    REASON_NO_FAILURE,
    REASON_STORAGE_UNAVAILABLE,
)
from kthena_py.vocab.times import format_time

from .attestation import AttestationInputs, attestation_condition, attestation_events, check_attestation, held_message
from .metadata import STATUS_KEYS as METADATA_KEYS
from .metadata import metadata_status
from .result import human_size
from .units import UnitDecision

__all__ = ["Event", "StatusInputs", "cache_events", "cache_status", "combine_progress"]


@dataclass(frozen=True)
class Event:
    """An Event to record about the cache."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class StatusInputs:
    """What the status is derived from (besides the cache).

    Attributes:
        fingerprint: The fingerprint of the current spec.
        path: ``status.path``.
        units: The units' decisions (one for shared storage, one per node for node-local).
        node_local: Whether the cache is node-local (``status.nodes`` is set).
        storage_problem: Why the storage is unavailable, or ``None``.
        waiting: Why nothing is staged yet although nothing failed (``prefetch: false``), or ``None``.
        progress: The scraped progress of running download Jobs, by Job name.
        created_job: The name of a download Job created by this pass, if any.
        attestation: The attestation settings, reference and document (:mod:`.attestation`), or ``None``.
    """

    fingerprint: str
    path: str
    units: Sequence[UnitDecision]
    node_local: bool = False
    storage_problem: str | None = None
    waiting: str | None = None
    progress: Mapping[str, DownloadProgress] | None = None
    created_job: str | None = None
    attestation: AttestationInputs | None = None


def combine_progress(reports: Sequence[DownloadProgress]) -> DownloadProgress | None:
    """One progress for several downloads (node-local): sums, ``percent`` of the sums, the longest ETA."""
    if not reports:
        return None
    if len(reports) == 1:
        return reports[0]
    done = sum(r.bytes_done for r in reports)
    totals = [r.bytes_total for r in reports]
    total = sum(t for t in totals if t is not None) if all(t is not None for t in totals) else None
    files_totals = [r.files_total for r in reports]
    etas = [r.eta_seconds for r in reports if r.eta_seconds is not None]
    return DownloadProgress(
        bytes_done=done,
        bytes_total=total,
        files_done=sum(r.files_done for r in reports),
        files_total=sum(t for t in files_totals if t is not None) if all(t is not None for t in files_totals) else None,
        percent=f"{min(100, done * 100 // total)}%" if total else None,
        eta_seconds=max(etas) if etas else None,
    )


def _phase(inputs: StatusInputs) -> ModelCachePhase:
    states = {u.state for u in inputs.units}
    if "ready" in states:
        return PHASE_READY
    if inputs.storage_problem is not None:
        return PHASE_FAILED
    if "running" in states:
        return PHASE_DOWNLOADING
    if states & {"starting", "create"}:
        return PHASE_PENDING
    if states & {"retry-wait", "failed"}:
        return PHASE_FAILED
    return PHASE_PENDING


def _condition(
    previous: Mapping[str, Mapping[str, Any]], kind: str, status: bool, reason: str, message: str, gen: int, now: str
) -> dict[str, Any]:
    value = "True" if status else "False"
    before = previous.get(kind)
    since = str(before["lastTransitionTime"]) if before and before.get("status") == value else now
    return {
        "type": kind,
        "status": value,
        "observedGeneration": gen,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def _failures(inputs: StatusInputs) -> list[UnitDecision]:
    return [u for u in inputs.units if u.failure is not None and u.state != "ready"]


def _degraded(inputs: StatusInputs) -> tuple[str, str] | None:
    if inputs.storage_problem is not None:
        return REASON_STORAGE_UNAVAILABLE, inputs.storage_problem
    failing = _failures(inputs)
    if not failing:
        return None
    first = failing[0].failure
    assert first is not None
    if not inputs.node_local:
        return first.reason, first.message
    nodes = ", ".join(str(u.node) for u in failing)
    return first.reason, f"on node(s) {nodes}: {first.message}"


def _progressing(inputs: StatusInputs, phase: ModelCachePhase) -> tuple[bool, str, str]:
    states = [u.state for u in inputs.units]
    if "running" in states:
        return True, REASON_DOWNLOADING, f"downloading into {inputs.path}"
    if "starting" in states or "create" in states:
        name = inputs.created_job or next((u.job.name for u in inputs.units if u.job and u.state == "starting"), "")
        return True, REASON_CACHE_PENDING, f"waiting for the download pod of Job {name} to start"
    if inputs.storage_problem is not None:
        return False, REASON_STORAGE_UNAVAILABLE, inputs.storage_problem
    waits = [u for u in inputs.units if u.state == "retry-wait" and u.retry_at is not None]
    if waits:
        when = min(u.retry_at for u in waits if u.retry_at is not None)
        return True, REASON_CACHE_PENDING, f"the download failed; next attempt at {format_time(when)}"
    failed = [u for u in inputs.units if u.state == "failed" and u.failure is not None]
    if failed and failed[0].failure is not None:
        return False, failed[0].failure.reason, "not retried (the source cannot be downloaded): fix the spec"
    if phase == PHASE_READY:
        return False, REASON_CACHE_READY, f"staged at {inputs.path}"
    return False, REASON_CACHE_PENDING, inputs.waiting or "nothing to do"


def cache_status(cache: ModelCache, inputs: StatusInputs, now: float) -> dict[str, Any]:
    """The status the cache should have (JSON, as written to the status subresource)."""
    previous = to_dict(cache.status) if cache.status is not None else {}
    same_spec = previous.get("fingerprint") == inputs.fingerprint
    phase = _phase(inputs)
    stamp = format_time(now)
    gen = cache.generation
    conditions_before = {c["type"]: c for c in previous.get("conditions") or []}
    status: dict[str, Any] = {"phase": phase, "path": inputs.path, "fingerprint": inputs.fingerprint}
    ready_units = [u for u in inputs.units if u.state == "ready"]
    result = next((u.result for u in ready_units if u.result is not None), None)
    if result is not None:
        status["sizeBytes"] = result.size_bytes if result.size_bytes is not None else sum(f.size for f in result.files)
        status["size"] = human_size(status["sizeBytes"])
        if result.files:
            status["files"] = [to_dict(f) for f in result.files]
        if result.sha256:
            status["sha256"] = result.sha256
        if result.revision:
            status["revision"] = result.revision
        status.update(metadata_status(result.gguf, result.model_config))
    elif ready_units and same_spec:
        for key in ("size", "sizeBytes", "files", "sha256", "revision", *METADATA_KEYS):
            if key in previous:
                status[key] = previous[key]
    # Attestation (issue 26, see .attestation): an enforced one that does not verify holds the cache from Ready.
    check = None
    if inputs.attestation is not None:
        staged = {f["name"]: f["sha256"] for f in status.get("files") or []} if ready_units else None
        check = check_attestation(inputs.attestation, staged, status.get("sha256"), now)
        if check is not None and check.holds:
            phase = status["phase"] = PHASE_FAILED
    if phase == PHASE_DOWNLOADING and inputs.progress:
        running = [inputs.progress[u.job.name] for u in inputs.units if u.job and u.job.name in inputs.progress]
        progress = combine_progress([r for r in running if r is not None])
        if progress is not None:
            status["progress"] = to_dict(progress)
    if inputs.node_local:
        status["nodes"] = sorted(str(u.node) for u in ready_units)
    newest = [u.job for u in inputs.units if u.job is not None and u.state != "create"]
    job_name = inputs.created_job or (max(newest, key=lambda j: (j.created_at, j.name)).name if newest else None)
    if job_name:
        status["jobName"] = job_name
    status["observedGeneration"] = gen
    ready_reason = {PHASE_READY: REASON_CACHE_READY, PHASE_DOWNLOADING: REASON_DOWNLOADING}.get(
        phase, REASON_CACHE_PENDING
    )
    degraded = _degraded(inputs)
    if check is not None and check.holds:
        degraded = (REASON_ATTESTATION_FAILED, held_message(check))
    if phase == PHASE_FAILED and degraded is not None:
        ready_reason = degraded[0]
    ready_message = {
        PHASE_READY: f"{len(status.get('files') or [])} files ({status.get('size', 'size unknown')}) at {inputs.path}",
        PHASE_DOWNLOADING: f"downloading into {inputs.path}",
    }.get(phase, degraded[1] if phase == PHASE_FAILED and degraded else inputs.waiting or "not staged yet")
    if inputs.node_local and phase == PHASE_READY:
        ready_message = f"ready on {len(ready_units)} node(s): " + ", ".join(status["nodes"])
    progressing = _progressing(inputs, phase)
    if check is not None and check.holds and not progressing[0]:
        progressing = (False, REASON_ATTESTATION_FAILED, held_message(check))
    status["conditions"] = [
        _condition(conditions_before, READY, phase == PHASE_READY, ready_reason, ready_message, gen, stamp),
        _condition(conditions_before, PROGRESSING, *progressing, gen, stamp),
        _condition(
            conditions_before,
            DEGRADED,
            degraded is not None,
            degraded[0] if degraded else REASON_NO_FAILURE,
            degraded[1] if degraded else "",
            gen,
            stamp,
        ),
    ]
    if check is not None:
        status["conditions"].append(attestation_condition(conditions_before, check, gen, stamp))
    return status


def _condition_of(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def cache_events(previous: Mapping[str, Any], status: Mapping[str, Any], source: str) -> list[Event]:
    """The Events of the change from ``previous`` to ``status`` (see the module docstring)."""
    events: list[Event] = []
    before, after = previous.get("phase"), status.get("phase")
    if after == PHASE_DOWNLOADING and before != PHASE_DOWNLOADING:
        events.append(Event("Normal", REASON_DOWNLOADING, f"downloading {source} into {status.get('path')}"))
    if after == PHASE_READY and before != PHASE_READY:
        size = status.get("size", "size unknown")
        events.append(
            Event("Normal", REASON_CACHE_READY, f"{source} is staged and verified at {status.get('path')} ({size})")
        )
    elif after == PHASE_READY and "nodes" in status:
        added = sorted(set(status.get("nodes") or []) - set(previous.get("nodes") or []))
        if added:
            events.append(Event("Normal", REASON_CACHE_READY, f"ready on node(s) {', '.join(added)}"))
    old, new = _condition_of(previous, DEGRADED), _condition_of(status, DEGRADED)
    if new.get("status") == "True" and (
        old.get("status") != "True"
        or old.get("reason") != new.get("reason")
        or old.get("message") != new.get("message")
    ):
        events.append(Event("Warning", str(new.get("reason")), str(new.get("message"))))
    events += [Event(*event) for event in attestation_events(previous, status)]
    return events
