"""One staging unit's decision: the shared storage, or one node of a node-local cache (pure).

A unit's download Jobs of the current fingerprint are its whole history; nothing else is remembered:

* a succeeded Job makes the unit **ready** (other Jobs of the unit are superseded and deleted);
* else an active Job is the running **attempt** (older failures are deleted, the newest failure is kept so the
  status can still say what went wrong before);
* else the newest failed Job is the last **failure**. Its attempt number (label
  :data:`~kthena_py.vocab.labels.MODEL_CACHE_ATTEMPT`) and the time it failed give the retry time:
  ``failed_at + min(cap, base * 2**attempt)``; once due, the next attempt's Job (a new, deterministic name) is
  created. A failure the downloader calls permanent (:data:`PERMANENT_REASONS`: the source scheme is not
  supported) is not retried until the spec changes (a new fingerprint, with no failures: counting restarts);
* no Job at all: attempt 0 is created.

Retries are therefore level-based and survive restarts (the attempt count and the last failure's time are read
from the Jobs), and a failure can never cause a tight loop: the earliest retry is ``base`` seconds after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from kthena_py.vocab.conditions import REASON_DOWNLOAD_FAILED, REASON_INTEGRITY_CHECK_FAILED

from .result import DownloadResult, parse_result
from .views import JobView

__all__ = ["PERMANENT_REASONS", "Backoff", "Failure", "UnitDecision", "decide_unit", "failure_of", "retry_delay"]

PERMANENT_REASONS = frozenset({"UnsupportedSource"})
"""Downloader reasons a retry cannot fix."""
_MAX_MESSAGE = 1024

UnitState = Literal["ready", "running", "starting", "retry-wait", "failed", "create"]


@dataclass(frozen=True)
class Backoff:
    """Retry delays: ``base * 2**(failures - 1)`` seconds, at most ``cap``."""

    base: float = 10.0
    cap: float = 600.0


def retry_delay(failures: int, backoff: Backoff) -> float:
    """Seconds between the ``failures``-th failure of a fingerprint and the next attempt."""
    if failures <= 0:
        return 0.0
    return float(min(backoff.cap, backoff.base * 2 ** min(failures - 1, 32)))


@dataclass(frozen=True)
class Failure:
    """Why a download Job failed, as the Degraded condition says it.

    Attributes:
        reason: ``IntegrityCheckFailed`` or ``DownloadFailed``.
        message: The downloader's words (or the log tail, or the Job's), at most 1024 characters.
        detail: The downloader's own reason (``SourceNotFound``, ...), when it gave one.
        job: The failed Job.
    """

    reason: str
    message: str
    detail: str | None
    job: str


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def failure_of(job: JobView) -> Failure:
    """The failure of a failed Job, from its pod's termination message (result JSON or log tail)."""
    pod = job.pod
    result = parse_result(pod.message if pod else None)
    if result is not None and not result.ok:
        reason = (
            REASON_INTEGRITY_CHECK_FAILED if result.reason == REASON_INTEGRITY_CHECK_FAILED else REASON_DOWNLOAD_FAILED
        )
        text = f"{result.reason}: {result.message}" if result.message else str(result.reason)
        return Failure(reason, _clip(text), result.reason, job.name)
    if pod is not None and pod.message:
        tail = pod.message.strip().splitlines()[-3:]
        exit_text = f" (exit code {pod.exit_code})" if pod.exit_code is not None else ""
        return Failure(
            REASON_DOWNLOAD_FAILED, _clip(f"download failed{exit_text}: " + " | ".join(tail)), None, job.name
        )
    why = job.failure_message or "its pod failed"
    if pod is not None and pod.exit_reason:
        why = f"{why} ({pod.exit_reason})"
    return Failure(REASON_DOWNLOAD_FAILED, _clip(f"download Job {job.name} failed: {why}"), None, job.name)


@dataclass(frozen=True)
class UnitDecision:
    """What to do for one unit and what it shows.

    Attributes:
        node: The node (node-local), else ``None``.
        state: ``ready``; ``running`` (a Job whose pod runs, or succeeded before the Job says so); ``starting``
            (a Job whose pod does not run yet); ``create`` (a Job is to be created now); ``retry-wait`` (waiting
            for the retry time); ``failed`` (a permanent failure, no retry).
        job: The Job the state is about (``None`` for ``create``).
        result: The downloader's result of a ready unit, when its pod still has it.
        failure: The newest failure not yet overcome (also while a retry runs).
        create_attempt: The attempt to create (``state == "create"``).
        retry_at: When the retry is due (``retry-wait``).
        superseded: Jobs of the unit to delete.
    """

    node: str | None
    state: UnitState
    job: JobView | None = None
    result: DownloadResult | None = None
    failure: Failure | None = None
    create_attempt: int | None = None
    retry_at: float | None = None
    superseded: tuple[JobView, ...] = field(default=())


def _newest(jobs: Sequence[JobView]) -> JobView:
    return max(jobs, key=lambda j: (j.attempt, j.created_at, j.name))


def decide_unit(node: str | None, jobs: Sequence[JobView], now: float, backoff: Backoff) -> UnitDecision:
    """Decide one unit from its download Jobs of the current fingerprint (see the module docstring)."""
    succeeded = [j for j in jobs if j.state == "succeeded"]
    active = [j for j in jobs if j.state == "active"]
    failed = [j for j in jobs if j.state == "failed"]
    if succeeded:
        done = _newest(succeeded)
        pod = done.pod
        result = parse_result(pod.message if pod else None)
        return UnitDecision(
            node,
            "ready",
            done,
            result if result is not None and result.ok else None,
            superseded=tuple(j for j in jobs if j is not done),
        )
    last_failed = _newest(failed) if failed else None
    failure = failure_of(last_failed) if last_failed is not None else None
    old_failures = tuple(j for j in failed if j is not last_failed)
    if active:
        running = _newest(active)
        extra = tuple(j for j in active if j is not running)
        # A pod that succeeded is still the download while the job controller has not counted it yet (a failed
        # one waits for the Job's own retry pod: that one is starting).
        started = running.pod is not None and running.pod.phase in ("Running", "Succeeded")
        return UnitDecision(
            node, "running" if started else "starting", running, failure=failure, superseded=extra + old_failures
        )
    if last_failed is None or failure is None:
        return UnitDecision(node, "create", create_attempt=0)
    if failure.detail in PERMANENT_REASONS:
        return UnitDecision(node, "failed", last_failed, failure=failure, superseded=old_failures)
    due = last_failed.last_time + retry_delay(last_failed.attempt + 1, backoff)
    if now >= due:
        return UnitDecision(
            node,
            "create",
            last_failed,
            failure=failure,
            create_attempt=last_failed.attempt + 1,
            superseded=old_failures,
        )
    return UnitDecision(node, "retry-wait", last_failed, failure=failure, retry_at=due, superseded=old_failures)
