"""Retire superseded copies of an ``OnChange`` cache while it lives: remove their directories, then their Jobs (pure).

After a re-staging (:mod:`.refresh`) the cache serves ``<model_dir>-<token>``; the copy it served before, and any
re-staging the source moved past, are *superseded*: neither served nor being staged. Each copy is known only by
its Jobs (label :data:`~kthena_py.vocab.labels.MODEL_CACHE_CONTENT`, ``""`` for the first staging), so:

**The record is never lost.** A superseded copy's download Jobs are kept until its cleanup Job (``kthena-py
download --remove``, the name the deletion uses for that copy, :func:`~.naming.cleanup_job_name`) has
*succeeded*; only then are they deleted, and the cleanup Job after them. At every moment some Job names the copy
while its directory may still hold files, so a manager killed at any point (or the cache's deletion,
:mod:`.deletion`, which finds the same cleanup Job by name) still knows the directory. Every step is read from the
Jobs, their labels and the cache's status; nothing else is remembered, and a converged cache plans no write.

**When a copy may be removed** (:func:`retirement_blocker`, claim storage only):

1. none of its download Jobs is still running (a running pod writes into the directory; it finishes on its own,
   bounded by the Job's backoff limit, and is never deleted while it is the copy's record);
2. the status the ModelServings read (the cache's stored status) already names the served copy, and the served
   copy's download finished at least :data:`GRACE` seconds ago, so no ModelServing reconcile still planning from
   the status before the switch can create a pod onto the old copy;
3. no pod of the namespace mounts the cache's claim at that directory (:func:`mounts_directory`: a ``subPath``
   equal to it, inside it or above it, no ``subPath`` at all, or a ``subPathExpr`` that cannot be read; pods that
   terminated and the ModelCache's own Job pods do not count);
4. every ModelServing naming the cache has finished its rollout (:class:`Rollout`: generation observed,
   ``UpdateInProgress`` absent or ``False``/``RolloutComplete``, revisions and counters agree). A rollout stopped
   at its partition is *not* finished: the partition-protected pods stay on the old revision and would be
   recreated onto the old copy.

**What happens** (:func:`plan_retirement`): a blocked copy waits (looked at again after :data:`RECHECK`; pods are
not watched by the cache's controller); an unblocked one gets its cleanup Job; a succeeded cleanup deletes the
copy's Jobs with a Normal ``Retired`` Event; a failed cleanup (while the download Jobs still hold the record) is
deleted after the backoff so the next pass creates it again, with a Warning ``RetirementFailed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelcache import ModelCache
from kthena_py.vocab.conditions import REASON_RETIRED, REASON_RETIREMENT_FAILED
from kthena_py.vocab.labels import MODEL_CACHE_CONTENT, MODEL_CACHE_NAME

from .naming import cleanup_job_name
from .refresh import restage_fingerprint, served_directory
from .render import JobSettings, cleanup_job, uses_claim
from .status import Event
from .units import Backoff, retry_delay
from .views import CLEANUP, JobView, labels_of, name_of

__all__ = [
    "GRACE",
    "RECHECK",
    "RETIRE_WHY",
    "PodMount",
    "RetirePlan",
    "Rollout",
    "mounts_directory",
    "plan_retirement",
    "pod_mounts",
    "retirement_blocker",
]

GRACE = 30.0
"""Seconds after the served copy's download finished before an older copy may be removed."""
RECHECK = 15.0
"""Seconds between looks while a superseded copy waits for its pods or rollouts."""
RETIRE_WHY = "retire a superseded copy"
"""The ``why`` of a retirement's cleanup Job (the reconciler confirms those with a live pod list)."""
_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodMount:
    """One mount of a claim by a pod: ``sub_path`` ``""`` mounts the whole claim, ``None`` is a ``subPathExpr``."""

    pod: str
    claim: str
    sub_path: str | None


@dataclass(frozen=True)
class Rollout:
    """A ModelServing naming the cache, and whether its rollout has finished (see the module docstring)."""

    name: str
    finished: bool
    message: str = ""


def pod_mounts(pod: Mapping[str, Any]) -> tuple[PodMount, ...]:
    """The claim mounts of a pod that may read files: none for a terminated pod or a ModelCache Job's pod."""
    if labels_of(pod).get(MODEL_CACHE_NAME) or (pod.get("status") or {}).get("phase") in _TERMINAL:
        return ()
    spec = pod.get("spec") or {}
    claims = {
        str(v.get("name")): str(v["persistentVolumeClaim"].get("claimName") or "")
        for v in spec.get("volumes") or []
        if isinstance(v, Mapping) and isinstance(v.get("persistentVolumeClaim"), Mapping)
    }
    found = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for mount in (container or {}).get("volumeMounts") or []:
            claim = claims.get(str(mount.get("name")))
            if claim is None:
                continue
            sub = None if mount.get("subPathExpr") else str(mount.get("subPath") or "").strip("/")
            found.append(PodMount(name_of(pod), claim, sub))
    return tuple(found)


def mounts_directory(mount: PodMount, claim: str, directory: str) -> bool:
    """Whether ``mount`` may see ``directory`` of ``claim`` (unreadable ``subPathExpr`` and whole claims do)."""
    if mount.claim != claim:
        return False
    sub = mount.sub_path
    if sub is None or sub == "":
        return True
    return sub == directory or sub.startswith(directory + "/") or directory.startswith(sub + "/")


def retirement_blocker(
    directory: str, claim: str, mounts: Sequence[PodMount], rollouts: Sequence[Rollout]
) -> str | None:
    """Why ``directory`` of ``claim`` may not be removed now because of pods or rollouts (``None``: it may)."""
    pods = sorted({m.pod for m in mounts if mounts_directory(m, claim, directory)})
    if pods:
        return f"pod(s) {', '.join(pods[:5])}{' ...' if len(pods) > 5 else ''} mount it"
    rolling = sorted(r.name for r in rollouts if not r.finished)
    if rolling:
        return f"ModelServing(s) {', '.join(rolling)} have not finished their rollout"
    return None


@dataclass(frozen=True)
class RetirePlan:
    """The outcome of :func:`plan_retirement`."""

    creates: tuple[dict[str, Any], ...] = ()
    """Cleanup Jobs to create (``why``: :data:`RETIRE_WHY`)."""
    deletes: tuple[tuple[JobView, str], ...] = ()
    """Jobs to delete, in order (a copy's download Jobs before its cleanup Job), with why."""
    events: tuple[Event, ...] = ()
    waiting: tuple[str, ...] = ()
    """Per waiting copy, what it waits for (logged by the controller)."""
    recheck_at: float | None = None


def _cleanup_name(cache: ModelCache, fp: str, token: str) -> str:
    return cleanup_job_name(cache.name, restage_fingerprint(fp, token) if token else fp)


def _switch_settled(cache: ModelCache, fp: str, served_token: str, served: Sequence[JobView], now: float) -> str | None:
    status = cache.status.served_directory if cache.status is not None else None
    stored = status.directory if status is not None and status.fingerprint == fp else ""
    wanted = served_directory(cache, served_token) if served_token else ""
    if stored != wanted:
        return "the cache's status does not name the served copy yet"
    done = [j.last_time for j in served if j.state == "succeeded"]
    if done and now < max(done) + GRACE:
        return f"the served copy was staged less than {int(GRACE)}s ago"
    return None


def plan_retirement(
    cache: ModelCache,
    fp: str,
    served_token: str,
    served: Sequence[JobView],
    superseded: Sequence[JobView],
    jobs: Sequence[JobView],
    mounts: Sequence[PodMount],
    rollouts: Sequence[Rollout],
    settings: JobSettings,
    backoff: Backoff,
    now: float,
    *,
    may_create: bool = True,
) -> RetirePlan:
    """Plan one step of retiring the superseded copies (see the module docstring).

    Args:
        cache: The cache (its ``status`` is the stored one).
        fp: The current spec's fingerprint.
        served_token: The served copy's content token (``""``: the first staging).
        served: The served copy's download Jobs.
        superseded: Download Jobs of fingerprint ``fp`` of copies neither served nor being staged.
        jobs: All the cache's Jobs (its cleanup Jobs are found here).
        mounts: Claim mounts of the namespace's pods (:func:`pod_mounts`).
        rollouts: The ModelServings naming the cache.
        settings: How Jobs are rendered.
        backoff: The delay before a failed cleanup is tried again (its base).
        now: The current time.
        may_create: Whether a Job may be created now (the storage is usable).
    """
    claim = uses_claim(cache)
    cleanups = {j.name: j for j in jobs if j.kind == CLEANUP and j.fingerprint == fp}
    by_copy: dict[str, list[JobView]] = {}
    for job in superseded:
        if job.content != served_token:
            by_copy.setdefault(job.content, []).append(job)
    # A copy whose download Jobs are gone but whose cleanup Job is left (a crash between the deletes).
    for job in cleanups.values():
        if job.content != served_token and job.state == "succeeded":
            by_copy.setdefault(job.content, [])
    if claim is None or not by_copy:
        return RetirePlan()
    settled = _switch_settled(cache, fp, served_token, served, now)
    creates: list[dict[str, Any]] = []
    deletes: list[tuple[JobView, str]] = []
    events: list[Event] = []
    waiting: list[str] = []
    rechecks: list[float] = []
    for token in sorted(by_copy):
        downloads = by_copy[token]
        directory = served_directory(cache, token)
        cleanup = cleanups.get(_cleanup_name(cache, fp, token))
        if any(j.state == "active" for j in downloads):
            waiting.append(f"{directory}: its download still runs")
            continue  # the Job's completion wakes the cache
        if cleanup is None:
            blocker = settled or retirement_blocker(directory, claim, mounts, rollouts)
            if blocker is not None:
                waiting.append(f"{directory}: {blocker}")
                rechecks.append(now + RECHECK)
            elif may_create:
                body = cleanup_job(cache, _cleanup_name(cache, fp, token), fp, settings, None, directory)
                if token:  # the copy's record, beside its download Jobs
                    for labels in (body["metadata"]["labels"], body["spec"]["template"]["metadata"]["labels"]):
                        labels[MODEL_CACHE_CONTENT] = token
                creates.append(body)
        elif cleanup.state == "succeeded":
            deletes += [(j, "its copy was retired") for j in downloads]
            deletes.append((cleanup, "its copy was retired"))
            if downloads:
                events.append(Event("Normal", REASON_RETIRED, f"removed the superseded copy {directory}"))
        elif cleanup.state == "failed" and downloads:
            due = cleanup.last_time + retry_delay(1, backoff)
            if now >= due:
                deletes.append((cleanup, "retry the removal"))
                message = f"removing the superseded copy {directory} failed (Job {cleanup.name}); trying again"
                events.append(Event("Warning", REASON_RETIREMENT_FAILED, message))
            else:
                waiting.append(f"{directory}: its removal failed, retried at {due:.0f}")
                rechecks.append(due)
        elif cleanup.state == "active":
            waiting.append(f"{directory}: being removed (Job {cleanup.name})")
    return RetirePlan(
        tuple(creates), tuple(deletes), tuple(events), tuple(waiting), min(rechecks) if rechecks else None
    )
