"""Revalidation and re-staging of a ModelCache whose source is remote (pure: ``now`` and the probe are passed in).

**Cadence.** A cache is probed only when it is Ready, its source is remote (:func:`kthena_py.sourceid.remote_source`:
http(s), Hugging Face, S3, ModelScope; never ``pvc://`` or a local path) and ``spec.revalidationInterval`` is not
``0s`` (unset: :data:`DEFAULT_INTERVAL`). It is due at ``base + interval + jitter``, where ``base`` is
``status.lastRevalidated`` (else the time the cache became Ready) and ``jitter`` is a fixed fraction (below
:data:`JITTER_FRACTION`) of the interval derived from the cache's UID (:func:`jitter`), so caches created
together spread their probes out and a restarted manager computes the same times. :func:`next_due` never lies
before ``base + interval``.

**What a probe says** (:class:`Probe`, made by the controller): the source's identity now, or why it could not
tell (``error``: the request failed; ``unsupported``: this manager cannot probe this kind of source).

**Status** (:func:`plan_refresh`): ``upstream`` and ``lastRevalidated`` change only when a probe ran (a restart
on a converged cache writes nothing); ``sourceETag``/``sourceContentLength``/``sourceLastModified`` are the
served copy's identity, from its download result (kept from the previous status while its pod is gone). The
``SourceDrifted`` condition (absent for a source that is not remote, and until the first probe):

* ``False``/``SourceUnchanged``: the source still has the served identity;
* ``True``/``SourceChanged`` (``IfNotPresent``, or ``OnChange`` on node-local storage): the message names the
  served and the new identity; nothing else happens, the cache keeps serving;
* ``True``/``Restaging`` (``OnChange``): the new content is being staged beside the served copy;
* ``Unknown``/``RevalidationFailed``: the probe failed, or the identities cannot be compared; the served
  identity and ``upstream`` stay as they were, and a re-staging follows ``upstream`` (a failed probe neither
  starts nor aborts one); ``Unknown``/``RevalidationUnsupported``: see :class:`Probe`.

A Warning Event is recorded once per transition into True or Unknown (not on every probe), a Normal one when a
re-staged copy starts to be served.

**Re-staging** (``OnChange``, claim storage): when ``upstream`` differs from the served identity, a download Job
stages the new content into ``<model_dir>-<token>`` (:func:`kthena_py.sourceid.identity_token` of ``upstream``;
a Hugging Face source is pinned to the new commit). Its Jobs carry the spec's fingerprint and the label
:data:`~kthena_py.vocab.labels.MODEL_CACHE_CONTENT`; their names are derived from the fingerprint and the token,
so a restarted manager finds them. The served copy is the one of the newest succeeded download Job of the
spec (:func:`split_staging`), so the switch happens only once the re-staging Job succeeded (every file verified,
the completion marker written); then ``status.servedDirectory`` names it and the serving gate mounts it.
Jobs of any other content (an older copy, a re-staging the source has moved past) are ``stale``: their copies are
retired by :mod:`.retire` (the directory removed once no pod mounts it, then the Jobs deleted). So is a copy of
the wanted content that succeeded before the served copy (the source went back to it while it was not yet
retired): it is retired first, then staged again, so a new download never races its removal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelcache import PHASE_READY, REFRESH_ON_CHANGE, ModelCache, model_dir
from kthena_py.sourceid import SourceIdentity, identity_token, remote_source, same_content
from kthena_py.vocab.conditions import (
    READY,
    REASON_RESTAGING,
    REASON_REVALIDATION_FAILED,
    REASON_REVALIDATION_UNSUPPORTED,
    REASON_SOURCE_CHANGED,
    REASON_SOURCE_UNCHANGED,
    SOURCE_DRIFTED,
)
from kthena_py.vocab.times import format_time, parse_time

from .naming import FINGERPRINT_LENGTH, download_job_name
from .render import JobSettings, Restage, download_job
from .status import Event
from .units import Backoff, UnitDecision, decide_unit
from .views import JobView

__all__ = [
    "DEFAULT_INTERVAL",
    "JITTER_FRACTION",
    "Probe",
    "RefreshPlan",
    "Staging",
    "due",
    "interval_of",
    "jitter",
    "next_due",
    "plan_refresh",
    "restage_fingerprint",
    "restaged_tokens",
    "served_copy",
    "served_directory",
    "split_staging",
    "staged_identity",
]

DEFAULT_INTERVAL = 3600.0
"""Seconds between revalidations when ``spec.revalidationInterval`` is unset."""
JITTER_FRACTION = 0.1
"""The jitter is below this fraction of the interval."""
_STATUS_IDENTITY = {"etag": "sourceETag", "contentLength": "sourceContentLength", "lastModified": "sourceLastModified"}


@dataclass(frozen=True)
class Probe:
    """What one revalidation found (made by the controller's prober).

    Attributes:
        at: When it ran (seconds since the epoch).
        identity: The source's identity now, when the probe succeeded.
        error: Why the probe failed (``RevalidationFailed``).
        unsupported: Why this manager cannot probe the source (``RevalidationUnsupported``).
    """

    at: float
    identity: SourceIdentity | None = None
    error: str | None = None
    unsupported: str | None = None


def interval_of(cache: ModelCache) -> float:
    """Seconds between revalidations (0: off)."""
    interval = cache.spec.revalidation_interval
    return DEFAULT_INTERVAL if interval is None else max(0.0, interval.seconds)


def jitter(uid: str, interval: float) -> float:
    """The cache's fixed delay added to each interval: in ``[0, JITTER_FRACTION * interval)``, from its UID."""
    fraction = int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16) / 2**32
    return fraction * JITTER_FRACTION * interval


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def next_due(cache: ModelCache, status: Mapping[str, Any]) -> float | None:
    """When the cache with ``status`` is next due for a probe (``None``: never, see the module docstring)."""
    interval = interval_of(cache)
    if interval <= 0 or remote_source(cache.spec.source) is None or status.get("phase") != PHASE_READY:
        return None
    base = parse_time(status.get("lastRevalidated"))
    if base is None:
        base = parse_time(_condition(status, READY).get("lastTransitionTime"))
    if base is None:
        return None
    return base + interval + jitter(cache.uid or cache.name, interval)


def due(cache: ModelCache, now: float) -> bool:
    """Whether the cache (its current status) is due for a probe at ``now``."""
    status = cache.status.model_dump(by_alias=True, exclude_none=True, mode="json") if cache.status else {}
    when = next_due(cache, status)
    return when is not None and now >= when


def restage_fingerprint(fp: str, token: str) -> str:
    """The fingerprint-like key of a re-staging's Job names: the spec's fingerprint and the content token."""
    return hashlib.sha256(f"{fp}:{token}".encode()).hexdigest()[:FINGERPRINT_LENGTH]


def served_directory(cache: ModelCache, token: str) -> str:
    """The directory of the copy with content token ``token`` (``""``: the first staging, Kthena's name)."""
    first = model_dir(cache.spec.source, cache.spec.revision)
    return f"{first}-{token}" if token else first


def served_copy(cache: ModelCache, fp: str, token: str) -> tuple[str, Restage | None]:
    """How to (re)create a Job of the served copy ``token``: its name key and its re-staging (``None``: the first).

    A re-staged copy whose Jobs are gone is staged again into its own directory under its own Job names (a hub
    source pinned to the revision the status recorded for it), never into the first staging's directory.
    """
    if not token:
        return fp, None
    remote = remote_source(cache.spec.source)
    pin = cache.status.revision if cache.status is not None and remote is not None and remote.kind == "hf" else None
    return restage_fingerprint(fp, token), Restage(served_directory(cache, token), token, pin)


@dataclass(frozen=True)
class Staging:
    """The download Jobs of the current spec, split by the copy they stage.

    Attributes:
        token: The content token of the served copy (``""``: the first staging's directory).
        served: The served copy's Jobs (its unit's whole history).
        others: Jobs of other copies (a re-staging in progress, or superseded copies).
    """

    token: str
    served: tuple[JobView, ...]
    others: tuple[JobView, ...]


def split_staging(
    cache: ModelCache, fp: str, jobs: Sequence[JobView], servable: Callable[[JobView], bool] | None = None
) -> Staging:
    """Split the spec's download Jobs (all of fingerprint ``fp``) by copy; see the module docstring.

    The served copy is that of the newest succeeded Job ``servable`` accepts (all, when it is ``None``; under an
    enforced attestation only copies whose staged files verify, so a re-staged copy the signed statement does not
    cover is never switched to and the verified copy keeps serving); with none, the one
    ``status.servedDirectory`` names for this fingerprint; else the first staging.
    """
    succeeded = [j for j in jobs if j.state == "succeeded"]
    if servable is not None:
        accepted = [j for j in succeeded if servable(j)]
        # The first staging is judged by the status (it is Failed when it does not verify); only re-staged
        # copies need the predicate to be served.
        succeeded = accepted or [j for j in succeeded if not j.content]
    if succeeded:
        token = max(succeeded, key=lambda j: (j.last_time, j.created_at, j.name)).content
    else:
        token = ""
        served = cache.status.served_directory if cache.status is not None else None
        if served is not None and served.fingerprint == fp:
            first = model_dir(cache.spec.source, cache.spec.revision)
            if served.directory.startswith(first + "-"):
                token = served.directory[len(first) + 1 :]
    return Staging(
        token,
        tuple(j for j in jobs if j.content == token),
        tuple(j for j in jobs if j.content != token),
    )


def restaged_tokens(cache: ModelCache, fp: str, jobs: Sequence[JobView]) -> list[str]:
    """The content tokens of the re-staged copies the cache may have on its storage (for its deletion's cleanup).

    Those its download and cleanup Jobs of fingerprint ``fp`` name (label
    :data:`~kthena_py.vocab.labels.MODEL_CACHE_CONTENT`), and the one ``status.servedDirectory`` names for ``fp``.
    """
    tokens = {j.content for j in jobs if j.fingerprint == fp and j.content}
    served = cache.status.served_directory if cache.status is not None else None
    first = model_dir(cache.spec.source, cache.spec.revision)
    if served is not None and served.fingerprint == fp and served.directory.startswith(first + "-"):
        tokens.add(served.directory[len(first) + 1 :])
    return sorted(tokens)


def staged_identity(
    units: Sequence[UnitDecision], previous: Mapping[str, Any], same_copy: bool
) -> SourceIdentity | None:
    """The served copy's identity: its ready unit's result, else the previous status's (same spec and copy)."""
    for unit in units:
        if unit.state == "ready" and unit.result is not None and unit.result.identity is not None:
            return unit.result.identity
    if not same_copy:
        return None
    return SourceIdentity.from_json({key: previous.get(field) for key, field in _STATUS_IDENTITY.items()})


@dataclass(frozen=True)
class RefreshPlan:
    """What :func:`plan_refresh` adds to a cache's plan."""

    status: dict[str, Any]
    """Status fields to set (``sourceETag``..., ``upstream``, ``lastRevalidated``, ``servedDirectory``)."""
    drop: tuple[str, ...]
    """Status fields to leave out."""
    condition: dict[str, Any] | None
    creates: tuple[dict[str, Any], ...]
    """Re-staging Jobs to create."""
    stale: tuple[JobView, ...]
    """Jobs of copies neither served nor being staged: to delete."""
    events: tuple[Event, ...]
    next_check: float | None
    """When to look again (the next probe, or the re-staging's retry)."""
    restaging_job: str | None = None
    staging_token: str | None = None
    """The content token being staged (``None``: none); its old failed attempts are in ``stale`` too."""


def _drift_condition(
    previous: Mapping[str, Any], status: str, reason: str, message: str, gen: int, stamp: str
) -> dict[str, Any]:
    before = _condition(previous, SOURCE_DRIFTED)
    since = str(before["lastTransitionTime"]) if before.get("status") == status and before else stamp
    return {
        "type": SOURCE_DRIFTED,
        "status": status,
        "observedGeneration": gen,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def _transition_events(previous: Mapping[str, Any], condition: Mapping[str, Any] | None) -> list[Event]:
    if condition is None or condition.get("status") == "False":
        return []
    before = _condition(previous, SOURCE_DRIFTED)
    if before.get("status") == condition.get("status") and before.get("reason") == condition.get("reason"):
        return []
    return [Event("Warning", str(condition["reason"]), str(condition["message"]))]


def plan_refresh(
    cache: ModelCache,
    fp: str,
    staging: Staging,
    units: Sequence[UnitDecision],
    status: Mapping[str, Any],
    probe: Probe | None,
    settings: JobSettings,
    backoff: Backoff,
    now: float,
    *,
    may_create: bool = True,
) -> RefreshPlan:
    """Revalidation's part of a cache's plan; ``status`` is the status planned so far (see the module docstring).

    Args:
        cache: The cache (its ``status`` is the previous one).
        fp: The current spec's fingerprint.
        staging: :func:`split_staging` of its download Jobs.
        units: The served copy's units' decisions.
        status: The new status so far (phase, conditions).
        probe: This pass's probe, or ``None`` when none ran.
        settings: How Jobs are rendered.
        backoff: Retry delays of a failed re-staging.
        now: The current time.
        may_create: Whether a Job may be created now (the storage is usable).
    """
    previous = cache.status.model_dump(by_alias=True, exclude_none=True, mode="json") if cache.status else {}
    copy = served_directory(cache, staging.token) if staging.token else ""
    same_copy = (
        previous.get("fingerprint") == fp and (previous.get("servedDirectory") or {}).get("directory", "") == copy
    )
    out: dict[str, Any] = {}
    drop: list[str] = []
    staged = staged_identity(units, previous, same_copy)
    for key, field in _STATUS_IDENTITY.items():
        value = staged.to_json().get(key) if staged is not None else None
        if value is not None:
            out[field] = value
        else:
            drop.append(field)
    if staging.token:
        out["servedDirectory"] = {"directory": served_directory(cache, staging.token), "fingerprint": fp}
    else:
        drop.append("servedDirectory")
    events: list[Event] = []
    if (
        staging.token
        and (previous.get("servedDirectory") or {}).get("directory") != out["servedDirectory"]["directory"]
    ):
        events.append(
            Event(
                "Normal",
                REASON_RESTAGING,
                f"serving the re-staged copy {out['servedDirectory']['directory']}"
                + (f" ({staged.describe()})" if staged is not None else ""),
            )
        )
    remote = remote_source(cache.spec.source)
    if remote is None:
        return RefreshPlan(out, (*drop, "upstream", "lastRevalidated"), None, (), staging.others, (), None)
    upstream = SourceIdentity.from_json(previous.get("upstream"))
    if probe is not None:
        out["lastRevalidated"] = format_time(probe.at)
        if probe.identity is not None and not probe.identity.empty:
            upstream = probe.identity
    elif "lastRevalidated" in previous:
        out["lastRevalidated"] = previous["lastRevalidated"]
    if upstream is not None:
        out["upstream"] = upstream.to_json()
    gen = cache.generation
    stamp = format_time(now)
    condition: dict[str, Any] | None = None
    same = same_content(staged, upstream) if staged is not None and upstream is not None else None
    restages = cache.spec.refresh_policy == REFRESH_ON_CHANGE and cache.spec.storage.node_local is None
    # What to stage follows the last identity the source gave, whatever the last probe said (a failed probe
    # neither starts nor aborts a re-staging).
    wanted = identity_token(upstream) if restages and same is False and upstream is not None else None
    if probe is not None and probe.unsupported is not None:
        condition = _drift_condition(
            previous, "Unknown", REASON_REVALIDATION_UNSUPPORTED, probe.unsupported, gen, stamp
        )
    elif probe is not None and probe.error is not None:
        message = f"revalidation failed: {probe.error}; the cache keeps serving what it staged"
        condition = _drift_condition(previous, "Unknown", REASON_REVALIDATION_FAILED, message, gen, stamp)
    elif probe is None and _condition(previous, SOURCE_DRIFTED).get("status") == "Unknown":
        condition = dict(_condition(previous, SOURCE_DRIFTED))  # unknown until the next probe says otherwise
    elif upstream is not None:
        if same is None:
            message = "the served copy's identity is unknown, or shares nothing comparable with the source's"
            condition = _drift_condition(previous, "Unknown", REASON_REVALIDATION_FAILED, message, gen, stamp)
        elif same:
            message = f"the source still has the served identity ({upstream.describe()})"
            condition = _drift_condition(previous, "False", REASON_SOURCE_UNCHANGED, message, gen, stamp)
        else:
            assert staged is not None
            change = f"staged: {staged.describe()}; source now: {upstream.describe()}"
            if wanted is not None:
                message = f"the source changed; staging it into {served_directory(cache, wanted)} ({change})"
                condition = _drift_condition(previous, "True", REASON_RESTAGING, message, gen, stamp)
            else:
                why = (
                    "refreshPolicy OnChange re-stages claim storage only; the cache keeps serving"
                    if cache.spec.refresh_policy == REFRESH_ON_CHANGE
                    else "the cache keeps serving what it staged (refreshPolicy IfNotPresent)"
                )
                condition = _drift_condition(
                    previous, "True", REASON_SOURCE_CHANGED, f"the source changed ({change}); {why}", gen, stamp
                )
    events += _transition_events(previous, condition)
    waits: list[float] = []
    served_ready = status.get("phase") == PHASE_READY and any(u.state == "ready" for u in units)
    restage_jobs = [j for j in staging.others if wanted is not None and j.content == wanted]
    # retire: a copy of the wanted content that succeeded before the served one (the source came back to it) is
    # superseded: it is retired first (.retire), then staged again under the same Job names.
    served_at = max((j.last_time for j in staging.served if j.state == "succeeded"), default=None)
    if served_at is not None and any(j.state == "succeeded" and j.last_time <= served_at for j in restage_jobs):
        restage_jobs, wanted_retiring = [], wanted
    else:
        wanted_retiring = None
    stale = tuple(j for j in staging.others if j not in restage_jobs)
    creates: list[dict[str, Any]] = []
    restaging_job: str | None = None
    if wanted is not None and upstream is not None and wanted_retiring is None:
        unit = decide_unit(None, restage_jobs, now, backoff)
        stale += unit.superseded
        if unit.state == "create" and unit.create_attempt is not None and may_create and served_ready:
            name = download_job_name(cache.name, restage_fingerprint(fp, wanted), None, unit.create_attempt)
            pin = upstream.etag if remote.kind == "hf" else None
            restage = Restage(served_directory(cache, wanted), wanted, pin)
            creates.append(download_job(cache, name, fp, settings, None, unit.create_attempt, restage))
            restaging_job = name
        elif unit.job is not None:
            restaging_job = unit.job.name
        if unit.retry_at is not None:
            waits.append(unit.retry_at)
        restaging = condition is not None and condition.get("reason") == REASON_RESTAGING
        if condition is not None and restaging and restaging_job is not None:
            condition["message"] += f" (Job {restaging_job})"
        if unit.failure is not None and condition is not None and restaging:
            condition["message"] += f"; the last attempt failed: {unit.failure.message}"
    when = next_due(cache, {**status, **out})
    if when is not None:
        waits.append(when)
    return RefreshPlan(
        out,
        tuple(drop),
        condition,
        tuple(creates),
        stale,
        tuple(events),
        min(waits) if waits else None,
        restaging_job,
        wanted if wanted_retiring is None else None,
    )
