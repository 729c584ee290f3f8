"""Plan one ModelCache: the children to create and delete, its status, its Events, when to look again (pure).

:func:`plan_cache` takes the cache, a snapshot of what exists (:class:`Observed`: its Jobs with their pods, its
claim, the nodes, whether a ModelServing names it, the scraped progress), the settings and ``now``, and
returns a :class:`CachePlan`. Rules:

* Only download Jobs of the current :func:`~.naming.fingerprint` count; Jobs of another fingerprint (the spec
  changed) are deleted, running or not, with their PodGroups.
* Storage: an existing claim must exist and not be ``Lost`` or going (else ``StorageUnavailable``, and no Job
  is started); a ``volumeClaimTemplate`` claim is created when missing (a claim of that name the cache does not
  own is ``StorageUnavailable``); a node-local cache needs at least one Ready node matching its selector.
* ``prefetch: false``: no Job until some ModelServing of the namespace names the cache (``Pending``).
* Each unit (the shared storage, or each Ready matching node) is decided by :func:`~.units.decide_unit`; a Job
  to create comes with its PodGroup first (when the scheduler is Volcano). A node that is not Ready gets no new
  Job, but keeps a finished one.
* A node that leaves a node-local selector keeps its download Jobs (a running one finishes) but is no longer a
  unit (not in ``status.nodes``, no retry): those Jobs are the only record that the node holds files, which the
  deletion's cleanup (:mod:`.deletion`) needs. Running or failed Jobs on nodes that no longer exist are deleted;
  a succeeded one stays, so that the deletion can name the node its files were left on.
* ``requeue_after``: the soonest retry, and :attr:`PlanSettings.progress_interval` while a download runs or
  starts (progress is scraped, not watched), and the next revalidation; while a referenced attestation does not
  verify, its recheck interval (:func:`~.attestation.recheck_after`: the ConfigMap is not watched).
* Revalidation and ``OnChange`` re-staging (:mod:`.refresh`): the download Jobs of the spec are split by the
  copy they stage; the served copy's Jobs are the units' history; the refresh planner adds the source identity
  fields, ``SourceDrifted``, re-staging Jobs (with their PodGroups); Jobs of other copies are retired
  (:mod:`.retire`: their directory removed once no pod mounts it, their Jobs deleted after that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import DownloadProgress, ModelCache
from kthena_py.attestation import ENFORCE, effective_mode

from .attestation import (
    AttestationDocument,
    AttestationInputs,
    AttestationSettings,
    check_attestation,
    recheck_after,
)
from .naming import download_job_name, fingerprint
from .refresh import Probe, plan_refresh, served_copy, served_directory, split_staging
from .render import VOLCANO, JobSettings, cache_path, claim, download_job, podgroup, uses_claim
from .result import parse_result
from .retire import RETIRE_WHY, PodMount, Rollout, plan_retirement
from .status import Event, StatusInputs, cache_events, cache_status
from .units import Backoff, UnitDecision, decide_unit
from .views import DOWNLOAD, ClaimView, JobView, NodeView

__all__ = ["CachePlan", "Create", "Delete", "Observed", "PlanSettings", "plan_cache", "storage_problem"]

ChildKind = Literal["Job", "PodGroup", "PersistentVolumeClaim"]


@dataclass(frozen=True)
class PlanSettings:
    """The planner's settings (the controller's, see ``controllers.modelcache.Settings``).

    Attributes:
        job: How Jobs are rendered (image, scheduler, progress port, backoff limit).
        backoff: Retry delays after failed download Jobs.
        progress_interval: Seconds between looks while a download runs (progress scrape).
        cleanup_timeout: Seconds after ``deletionTimestamp`` after which the finalizer goes regardless.
        attestation: The manager's attestation mode and trusted keys (:mod:`.attestation`).
    """

    job: JobSettings = field(default_factory=JobSettings)
    backoff: Backoff = field(default_factory=Backoff)
    progress_interval: float = 5.0
    cleanup_timeout: float = 300.0
    attestation: AttestationSettings = field(default_factory=AttestationSettings)


@dataclass(frozen=True)
class Observed:
    """What exists, as the controller found it.

    Attributes:
        jobs: The cache's Jobs (owned by it), any kind and fingerprint, with their pods.
        claim: The cache's claim (existing or created), ``None`` when missing or the storage is node-local.
        nodes: Every node (node-local caches; deletion).
        requested: Some ModelServing of the namespace names the cache.
        in_use_by: The ModelServings naming the cache (deletion waits for them).
        progress: Scraped progress of running download Jobs, by Job name.
        attestation: The referenced attestation envelope, read live (``None`` when the cache references none).
    """

    jobs: tuple[JobView, ...] = ()
    claim: ClaimView | None = None
    nodes: tuple[NodeView, ...] = ()
    requested: bool = False
    in_use_by: tuple[str, ...] = ()
    progress: Mapping[str, DownloadProgress] = field(default_factory=dict)
    attestation: AttestationDocument | None = None
    probe: Probe | None = None
    """This pass's revalidation of the source (:mod:`.refresh`), when one ran."""
    mounts: tuple[PodMount, ...] = ()
    """Claim mounts of the namespace's pods (:mod:`.retire`), when the cache has a copy to retire."""
    rollouts: tuple[Rollout, ...] = ()
    """The ModelServings naming the cache and whether their rollout finished (:mod:`.retire`)."""


@dataclass(frozen=True)
class Create:
    """An object to create (``body`` is complete)."""

    kind: ChildKind
    body: dict[str, Any]
    why: str

    @property
    def name(self) -> str:
        """The object's name."""
        return str(self.body["metadata"]["name"])


@dataclass(frozen=True)
class Delete:
    """A Job (and its PodGroup of the same name) to delete, by name and UID."""

    name: str
    uid: str
    why: str


@dataclass(frozen=True)
class CachePlan:
    """The outcome of :func:`plan_cache`."""

    fingerprint: str
    creates: tuple[Create, ...]
    deletes: tuple[Delete, ...]
    status: dict[str, Any]
    events: tuple[Event, ...]
    requeue_after: float | None
    retiring: tuple[str, ...] = ()
    """Superseded copies waiting to be retired, and what for (:mod:`.retire`; logged by the controller)."""


def storage_problem(cache: ModelCache, claim_seen: ClaimView | None, nodes: tuple[NodeView, ...]) -> str | None:
    """Why the cache's storage cannot be used now, or ``None``."""
    storage = cache.spec.storage
    if storage.persistent_volume_claim is not None:
        name = storage.persistent_volume_claim.claim_name
        if claim_seen is None:
            return f"persistentVolumeClaim {name} not found"
        if claim_seen.deleting:
            return f"persistentVolumeClaim {name} is being deleted"
        if claim_seen.phase == "Lost":
            return f"persistentVolumeClaim {name} lost its volume"
        return None
    if storage.volume_claim_template is not None:
        if claim_seen is not None and cache.uid not in claim_seen.owners:
            return f"persistentVolumeClaim {claim_seen.name} exists and is not owned by this ModelCache"
        if claim_seen is not None and (claim_seen.deleting or claim_seen.phase == "Lost"):
            return f"persistentVolumeClaim {claim_seen.name} is being deleted or lost its volume"
        return None
    node_local = storage.node_local
    assert node_local is not None
    if not any(n.ready and n.matches(node_local.node_selector) for n in nodes):
        selector = ",".join(f"{k}={v}" for k, v in sorted(node_local.node_selector.items()))
        return f"no Ready node matches nodeLocal.nodeSelector {selector}"
    return None


def _units(
    cache: ModelCache, current: list[JobView], observed: Observed, now: float, settings: PlanSettings
) -> tuple[list[UnitDecision], list[JobView], dict[str, NodeView]]:
    node_local = cache.spec.storage.node_local
    if node_local is None:
        return [decide_unit(None, current, now, settings.backoff)], [], {}
    matching = {n.name: n for n in observed.nodes if n.matches(node_local.node_selector)}
    existing = {n.name for n in observed.nodes}
    # One that left the selector keeps its Jobs; a gone node keeps only its succeeded one (where files are left).
    on_gone_nodes = [j for j in current if j.node not in existing and j.state != "succeeded"]
    by_node: dict[str, list[JobView]] = {}
    for job in current:
        if job.node in matching:
            by_node.setdefault(str(job.node), []).append(job)
    units = []
    for name in sorted(matching):
        jobs = by_node.get(name, [])
        if not jobs and not matching[name].ready:
            continue  # no download onto a node that is not Ready
        decision = decide_unit(name, jobs, now, settings.backoff)
        if decision.state == "create" and not matching[name].ready:
            decision = UnitDecision(
                name, "retry-wait" if decision.failure else "starting", decision.job, failure=decision.failure
            )
        units.append(decision)
    return units, on_gone_nodes, matching


def _servable(attestation: AttestationInputs, now: float) -> Callable[[JobView], bool] | None:
    """Which succeeded download Jobs' copies may serve: under an enforced attestation, those whose files verify."""

    def verified(job: JobView) -> bool:
        result = parse_result(job.pod.message if job.pod else None)
        if result is None or not result.ok:
            return False
        check = check_attestation(attestation, {f.name: f.sha256 for f in result.files}, result.sha256, now)
        return check is None or not check.holds

    reference = attestation.reference
    mode = effective_mode(attestation.settings.mode, reference.policy if reference else None, reference is not None)
    return verified if mode == ENFORCE else None


def plan_cache(cache: ModelCache, observed: Observed, settings: PlanSettings, now: float) -> CachePlan:
    """Plan one live (not deleting) cache; see the module docstring."""
    fp = fingerprint(cache.spec)
    downloads = [j for j in observed.jobs if j.kind == DOWNLOAD]
    attestation = AttestationInputs(settings.attestation, cache.spec.attestation, observed.attestation)
    staging = split_staging(  # refresh: by copy; an enforced attestation decides which copies may serve
        cache, fp, [j for j in downloads if j.fingerprint == fp], _servable(attestation, now)
    )
    current = list(staging.served)
    deletes = [Delete(j.name, j.uid, "the spec changed") for j in downloads if j.fingerprint != fp]
    creates: list[Create] = []
    problem = storage_problem(cache, observed.claim, observed.nodes)
    if problem is None and cache.spec.storage.volume_claim_template is not None and observed.claim is None:
        creates.append(Create("PersistentVolumeClaim", claim(cache), "the cache's claim"))
    waiting = None
    if not cache.spec.prefetch and not observed.requested and not current:
        waiting = "prefetch is false: waiting for a ModelServing to name this cache (annotation on the ModelServing)"
    units: list[UnitDecision] = []
    matching: dict[str, NodeView] = {}
    if waiting is None:
        units, on_gone_nodes, matching = _units(cache, current, observed, now, settings)
        deletes += [Delete(j.name, j.uid, "its node is gone") for j in on_gone_nodes]
        for unit in units:
            deletes += [Delete(j.name, j.uid, "superseded") for j in unit.superseded]
    created_job = None
    if problem is None and waiting is None:
        for unit in units:
            if unit.state != "create" or unit.create_attempt is None:
                continue
            node = matching.get(str(unit.node)) if unit.node is not None else None
            key, again = served_copy(cache, fp, staging.token)  # refresh: the served copy may be a re-staged one
            name = download_job_name(cache.name, key, node.name if node else None, unit.create_attempt)
            job = download_job(cache, name, fp, settings.job, node, unit.create_attempt, again)
            if settings.job.scheduler_name == VOLCANO:
                creates.append(Create("PodGroup", podgroup(cache, job), f"the PodGroup of Job {name}"))
            creates.append(
                Create("Job", job, f"attempt {unit.create_attempt}" + (f" on node {node.name}" if node else ""))
            )
            created_job = created_job or name
    elif problem is not None:
        # No new Job while the storage is unavailable: a "create" unit shows as not started.
        units = [
            UnitDecision(u.node, "retry-wait", u.job, failure=u.failure) if u.state == "create" else u for u in units
        ]
    path = cache_path(cache)
    if staging.token:  # refresh: a re-staged copy is served
        path = path.rsplit("/", 1)[0] + "/" + served_directory(cache, staging.token)
    inputs = StatusInputs(
        fingerprint=fp,
        path=path,
        units=units,
        node_local=cache.spec.storage.node_local is not None,
        storage_problem=problem,
        waiting=waiting,
        progress=observed.progress,
        created_job=created_job,
        attestation=attestation,
    )
    status = cache_status(cache, inputs, now)
    previous = to_dict(cache.status) if cache.status is not None else {}
    events = tuple(cache_events(previous, status, cache.spec.source))
    # refresh: revalidation, SourceDrifted, OnChange re-staging (see .refresh)
    refresh = plan_refresh(
        cache,
        fp,
        staging,
        units,
        status,
        observed.probe,
        settings.job,
        settings.backoff,
        now,
        may_create=problem is None and waiting is None,
    )
    status = {k: v for k, v in {**status, **refresh.status}.items() if k not in refresh.drop}
    if refresh.condition is not None:
        status["conditions"] = [*status["conditions"], refresh.condition]
    for job in refresh.creates:
        if settings.job.scheduler_name == VOLCANO:
            creates.append(Create("PodGroup", podgroup(cache, job), f"the PodGroup of Job {job['metadata']['name']}"))
        creates.append(Create("Job", job, "re-staging the changed source"))
    # retire: superseded copies keep their Jobs until their directory is removed (see .retire)
    retiring = [j for j in refresh.stale if j.content != refresh.staging_token and uses_claim(cache) is not None]
    deletes += [Delete(j.name, j.uid, "a copy no longer served nor staged") for j in refresh.stale if j not in retiring]
    retire = plan_retirement(
        cache,
        fp,
        staging.token,
        staging.served,
        retiring,
        observed.jobs,
        observed.mounts,
        observed.rollouts,
        settings.job,
        settings.backoff,
        now,
        may_create=problem is None,
    )
    for job in retire.creates:
        if settings.job.scheduler_name == VOLCANO:
            creates.append(Create("PodGroup", podgroup(cache, job), f"the PodGroup of Job {job['metadata']['name']}"))
        creates.append(Create("Job", job, RETIRE_WHY))
    deletes += [Delete(j.name, j.uid, why) for j, why in retire.deletes]
    events += refresh.events + retire.events
    waits = [u.retry_at - now for u in units if u.state == "retry-wait" and u.retry_at is not None]
    if refresh.next_check is not None:
        waits.append(refresh.next_check - now)
    if retire.recheck_at is not None:
        waits.append(retire.recheck_at - now)
    if any(u.state in ("running", "starting", "create") for u in units):
        waits.append(settings.progress_interval)
    recheck = recheck_after(cache.spec.attestation, status, settings.attestation)
    if recheck is not None:
        waits.append(recheck)  # ConfigMaps are not watched: a failing attestation is read again (bounded)
    requeue = max(0.5, min(waits)) if waits else None
    unique = {d.name: d for d in deletes}
    return CachePlan(fp, tuple(creates), tuple(unique.values()), status, events, requeue, retire.waiting)
