"""Typed views of the cluster objects a ModelCache plan reads: Jobs with their pods, claims, nodes (pure).

Guarantees: every view is built from the objects alone (no I/O, no clock) and never raises on a malformed or
partial object (a missing field reads as unknown). A Job's state is the job controller's verdict: its
``Complete`` / ``Failed`` condition, or the ``SuccessCriteriaMet`` / ``FailureTarget`` it writes first (or its
succeeded pods, counted or not yet, reaching the completions when no condition is written yet); anything else is
``active``. A Job's pod is its newest pod, preferring one that
terminated with a message (that is where the result is); the termination message of its first container is
the pod's ``message``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kthena_py.vocab.conditions import READY
from kthena_py.vocab.labels import (
    MODEL_CACHE_ATTEMPT,
    MODEL_CACHE_CONTENT,
    MODEL_CACHE_FINGERPRINT,
    MODEL_CACHE_JOB_KIND,
    MODEL_CACHE_NODE,
)
from kthena_py.vocab.owners import owner_uids
from kthena_py.vocab.times import parse_time

__all__ = [
    "CLEANUP",
    "DOWNLOAD",
    "ClaimView",
    "JobKind",
    "JobState",
    "JobView",
    "NodeView",
    "PodView",
    "annotations_of",
    "claim_view",
    "job_view",
    "labels_of",
    "meta",
    "name_of",
    "node_view",
    "pod_view",
    "uid_of",
]

JobState = Literal["active", "succeeded", "failed"]
JobKind = Literal["download", "cleanup"]
DOWNLOAD: JobKind = "download"
CLEANUP: JobKind = "cleanup"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True)
class PodView:
    """The parts of a Job's pod a plan reads.

    Attributes:
        name: The pod's name.
        phase: ``Pending``, ``Running``, ``Succeeded``, ``Failed`` (or ``""``).
        ip: The pod's IP once it has one.
        message: The termination message of its container, once it terminated.
        exit_reason: The container's terminated reason (``Error``, ``OOMKilled``, ...).
        exit_code: The container's exit code, once it terminated.
        waiting_reason: Why the container waits (``ImagePullBackOff``, ...), while it does.
    """

    name: str
    phase: str = ""
    ip: str | None = None
    message: str | None = None
    exit_reason: str | None = None
    exit_code: int | None = None
    waiting_reason: str | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class JobView:
    """A download or cleanup Job of a cache."""

    name: str
    uid: str
    kind: JobKind
    fingerprint: str
    node: str | None
    attempt: int
    state: JobState
    created_at: float
    finished_at: float | None
    owners: tuple[str, ...] = ()
    pod: PodView | None = None
    failure_message: str = ""
    """The message of the Job's ``Failed`` condition (e.g. the backoff limit was reached)."""
    content: str = ""
    """The re-staged content token (label :data:`~kthena_py.vocab.labels.MODEL_CACHE_CONTENT`); ``""``: first copy."""

    @property
    def last_time(self) -> float:
        """When the Job finished (or was created, when that is unknown)."""
        return self.finished_at if self.finished_at is not None else self.created_at


@dataclass(frozen=True)
class ClaimView:
    """A PersistentVolumeClaim: its phase, whether it is going, and its owners."""

    name: str
    phase: str
    deleting: bool
    owners: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeView:
    """A node: its name, ``kubernetes.io/hostname``, labels and readiness."""

    name: str
    hostname: str
    labels: Mapping[str, str]
    ready: bool

    def matches(self, selector: Mapping[str, str]) -> bool:
        """Whether every label of ``selector`` is on the node."""
        return all(self.labels.get(k) == v for k, v in selector.items())


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` (empty when absent)."""
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` (empty when absent)."""
    return str(meta(obj).get("name") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    """``metadata.uid`` (empty when absent)."""
    return str(meta(obj).get("uid") or "")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """A copy of ``metadata.labels``."""
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """A copy of ``metadata.annotations``."""
    return dict(meta(obj).get("annotations") or {})


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (obj.get("status") or {}).get("conditions") or []
    return [c for c in found if isinstance(c, Mapping)]


def _true(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == kind and c.get("status") == "True"), None)


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return default


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """The view of one pod."""
    status = pod.get("status") or {}
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, Mapping)]
    state = (statuses[0].get("state") or {}) if statuses else {}
    last = (statuses[0].get("lastState") or {}) if statuses else {}
    terminated = state.get("terminated") or last.get("terminated") or {}
    waiting = state.get("waiting") or {}
    return PodView(
        name=name_of(pod),
        phase=str(status.get("phase") or ""),
        ip=status.get("podIP") or None,
        message=terminated.get("message") or None,
        exit_reason=terminated.get("reason") or None,
        exit_code=terminated.get("exitCode") if isinstance(terminated.get("exitCode"), int) else None,
        waiting_reason=waiting.get("reason") or None,
        created_at=parse_time(meta(pod).get("creationTimestamp")) or 0.0,
    )


def _pick_pod(pods: Iterable[PodView]) -> PodView | None:
    ordered = sorted(pods, key=lambda p: (p.message is not None or p.phase in ("Running", "Pending"), p.created_at))
    return ordered[-1] if ordered else None


def _succeeded_count(status: Mapping[str, Any]) -> int:
    """Succeeded pods, counted or not yet (``uncountedTerminatedPods``: the controller has seen them finish)."""
    uncounted = (status.get("uncountedTerminatedPods") or {}).get("succeeded") or []
    return _int(status.get("succeeded")) + (len(uncounted) if isinstance(uncounted, list) else 0)


def job_view(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = ()) -> JobView:
    """The view of one Job and its pods (those whose ``controller-uid``/owner is the Job).

    The job controller decides before it finishes: ``SuccessCriteriaMet`` / ``FailureTarget`` (written while the
    pods' finalizers are removed, before ``Complete`` / ``Failed``) and succeeded pods it has not counted yet
    (``uncountedTerminatedPods``) already are its verdict.
    """
    labels, annotations = labels_of(job), annotations_of(job)
    status = job.get("status") or {}
    spec = job.get("spec") or {}
    complete = _true(job, "Complete") or _true(job, "SuccessCriteriaMet")
    failed = _true(job, "Failed") or _true(job, "FailureTarget")
    state: JobState = "active"
    finished: float | None = None
    if complete is not None or (_succeeded_count(status) >= max(1, _int(spec.get("completions"), 1))):
        state = "succeeded"
        finished = parse_time(status.get("completionTime")) or parse_time((complete or {}).get("lastTransitionTime"))
    elif failed is not None:
        state = "failed"
        finished = parse_time(failed.get("lastTransitionTime"))
    kind: JobKind = CLEANUP if labels.get(MODEL_CACHE_JOB_KIND) == CLEANUP else DOWNLOAD
    job_uid = uid_of(job)
    mine = [pod_view(p) for p in pods if job_uid and job_uid in owner_uids(p)]
    return JobView(
        name=name_of(job),
        uid=job_uid,
        kind=kind,
        fingerprint=labels.get(MODEL_CACHE_FINGERPRINT, ""),
        node=annotations.get(MODEL_CACHE_NODE) or None,
        attempt=_int(labels.get(MODEL_CACHE_ATTEMPT)),
        state=state,
        created_at=parse_time(meta(job).get("creationTimestamp")) or 0.0,
        finished_at=finished,
        owners=tuple(owner_uids(job)),
        pod=_pick_pod(mine),
        failure_message=str((failed or {}).get("message") or "") if state == "failed" else "",
        content=labels.get(MODEL_CACHE_CONTENT, ""),
    )


def claim_view(claim: Mapping[str, Any]) -> ClaimView:
    """The view of one PersistentVolumeClaim."""
    return ClaimView(
        name=name_of(claim),
        phase=str((claim.get("status") or {}).get("phase") or ""),
        deleting=bool(meta(claim).get("deletionTimestamp")),
        owners=tuple(owner_uids(claim)),
    )


def node_view(node: Mapping[str, Any]) -> NodeView:
    """The view of one Node: ready when its ``Ready`` condition is True and it is not cordoned.

    A cordoned node keeps its files, but gets no new download.
    """
    labels = labels_of(node)
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    return NodeView(
        name=name_of(node),
        hostname=labels.get(HOSTNAME_LABEL, name_of(node)),
        labels=labels,
        ready=_true(node, READY) is not None and not cordoned,
    )
