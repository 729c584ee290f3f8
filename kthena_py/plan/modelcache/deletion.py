"""Plan the deletion of a ModelCache: remove its files, then its finalizer, never later than a bound (pure).

A deleting cache (``deletionTimestamp`` set, finalizer :data:`~kthena_py.vocab.labels.MODEL_CACHE_FINALIZER`
still on it) goes through, at each reconcile:

1. Its download Jobs that still run are deleted (nothing more is written into the storage).
2. While a ModelServing of the namespace names the cache, nothing is removed: a Warning ``ModelCacheInUse``
   says which ModelServings (their pods may still read the files).
3. The storage decides the cleanup: a ``volumeClaimTemplate`` claim is the cache's own and goes with it (no
   cleanup Job); an existing claim gets one cleanup Job (``kthena-py download --remove``) for the model
   directory, and one for each re-staged copy (``refreshPolicy: OnChange``, :mod:`.refresh`) that its download
   or cleanup Jobs or ``status.servedDirectory`` name (a copy being retired, :mod:`.retire`, keeps its Jobs until
   its directory is removed, and its cleanup Job has the name used here); a node-local cache gets one per node
   that exists and matches the selector, ran a download (one that left the selector too: it keeps its download
   Jobs, see :mod:`.plan`) or already has a cleanup Job.
4. The finalizer is removed when every cleanup Job succeeded (Normal ``CleanupSucceeded``), or **at the latest**
   when :attr:`~.plan.PlanSettings.cleanup_timeout` has passed since ``deletionTimestamp``, when a cleanup Job
   failed, or when the storage is gone (the claim is missing, no node is left): then a Warning
   ``CleanupAbandoned`` names what is left behind. The finalizer therefore never sticks: its removal depends
   only on the clock and the objects, never on the cleanup succeeding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelcache import ModelCache
from kthena_py.vocab.labels import MODEL_CACHE_CONTENT

from .naming import cleanup_job_name, fingerprint
from .plan import Create, Delete, Observed, PlanSettings
from .refresh import restage_fingerprint, restaged_tokens, served_directory
from .render import VOLCANO, cache_path, cleanup_job, podgroup
from .status import Event
from .views import CLEANUP, DOWNLOAD, NodeView

__all__ = ["ABANDONED", "CLEANED", "IN_USE", "DeletionPlan", "plan_deletion"]

IN_USE = "ModelCacheInUse"
ABANDONED = "CleanupAbandoned"
CLEANED = "CleanupSucceeded"
_IN_USE_RECHECK = 30.0


@dataclass(frozen=True)
class DeletionPlan:
    """The outcome of :func:`plan_deletion`."""

    creates: tuple[Create, ...]
    deletes: tuple[Delete, ...]
    remove_finalizer: bool
    events: tuple[Event, ...]
    requeue_after: float | None


def _seconds(value: float) -> str:
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes}m{seconds}s"


def _targets(cache: ModelCache, observed: Observed) -> tuple[list[NodeView], list[str]]:
    """Node-local: the nodes to clean, and the nodes that had the files but are gone."""
    node_local = cache.spec.storage.node_local
    assert node_local is not None
    existing = {n.name: n for n in observed.nodes}
    had = {str(j.node) for j in observed.jobs if j.kind in (DOWNLOAD, CLEANUP) and j.node}
    wanted = {n.name for n in observed.nodes if n.matches(node_local.node_selector)} | had
    return [existing[n] for n in sorted(wanted) if n in existing], sorted(n for n in had if n not in existing)


def plan_deletion(
    cache: ModelCache, observed: Observed, settings: PlanSettings, now: float, deleted_at: float
) -> DeletionPlan:
    """Plan one step of deleting ``cache`` (see the module docstring).

    Args:
        cache: The cache, with ``deletionTimestamp`` set.
        observed: Its Jobs (with pods), its claim, the nodes and the ModelServings naming it.
        settings: The planner settings (``cleanup_timeout``, Job rendering).
        now: The current time (epoch seconds).
        deleted_at: ``deletionTimestamp`` (epoch seconds).
    """
    fp = fingerprint(cache.spec)
    deadline = deleted_at + settings.cleanup_timeout
    path = cache_path(cache)
    stops = tuple(
        Delete(j.name, j.uid, "the cache is being deleted")
        for j in observed.jobs
        if j.kind == DOWNLOAD and j.state == "active"
    )

    def done(event: Event | None) -> DeletionPlan:
        return DeletionPlan((), stops, True, (event,) if event else (), None)

    def abandon(why: str, left: str) -> DeletionPlan:
        return done(Event("Warning", ABANDONED, f"{why}; left behind: {left}"))

    storage = cache.spec.storage
    if storage.volume_claim_template is not None:
        return done(None)  # the claim is owned by the cache: the garbage collector removes it with the files
    if now >= deadline:
        return abandon(f"cleanup did not finish within {_seconds(settings.cleanup_timeout)}", path)
    if observed.in_use_by:
        names = ", ".join(sorted(observed.in_use_by))
        message = (
            f"still named by ModelServing(s) {names}: the files stay until none does "
            f"(the finalizer goes by {_seconds(settings.cleanup_timeout)} after deletion at the latest)"
        )
        return DeletionPlan(
            (), stops, False, (Event("Warning", IN_USE, message),), min(_IN_USE_RECHECK, deadline - now)
        )
    nodes: list[NodeView | None]
    gone: list[str] = []
    if storage.persistent_volume_claim is not None:
        if observed.claim is None or observed.claim.deleting:
            name = storage.persistent_volume_claim.claim_name
            return abandon(
                f"persistentVolumeClaim {name} is gone", f"{path} (on its volume, if the volume is retained)"
            )
        nodes = [None]
    else:
        targets, gone = _targets(cache, observed)
        if not targets:
            return abandon("no node is left to clean", f"{path} on node(s) {', '.join(gone) or 'none known'}")
        nodes = list(targets)
    cleanups = {j.name: j for j in observed.jobs if j.kind == CLEANUP}
    creates: list[Create] = []
    pending = 0
    failed: list[str] = []
    # refresh: re-staged copies (OnChange, claim storage) are removed beside the first directory
    copies = [("", fp)] + [(t, restage_fingerprint(fp, t)) for t in restaged_tokens(cache, fp, observed.jobs)]
    for node, (token, key) in [(n, c) for n in nodes for c in (copies if n is None else copies[:1])]:
        name = cleanup_job_name(cache.name, key, node.name if node else None)
        job = cleanups.get(name)
        if job is None:
            directory = served_directory(cache, token)
            body: dict[str, Any] = cleanup_job(cache, name, fp, settings.job, node, directory)
            if token:  # the record of this copy, once its download Jobs are gone
                for labels in (body["metadata"]["labels"], body["spec"]["template"]["metadata"]["labels"]):
                    labels[MODEL_CACHE_CONTENT] = token
            if settings.job.scheduler_name == VOLCANO:
                creates.append(Create("PodGroup", podgroup(cache, body), f"the PodGroup of Job {name}"))
            creates.append(Create("Job", body, f"remove {directory}"))
            pending += 1
        elif job.state == "active":
            pending += 1
        elif job.state == "failed":
            failed.append(node.name if node else path)
    if failed:
        return abandon(
            "the cleanup Job failed", f"{path}" + (f" on node(s) {', '.join(failed)}" if nodes != [None] else "")
        )
    if pending:
        return DeletionPlan(tuple(creates), stops, False, (), deadline - now)
    if gone:
        return abandon(
            "the files were removed from every node that is left", f"{path} on gone node(s) {', '.join(gone)}"
        )
    return done(Event("Normal", CLEANED, f"removed {path}"))
