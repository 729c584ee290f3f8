"""The ModelCache planner: pure decisions about staging model weights (no I/O, no clock: ``now`` is passed in).

* :mod:`.naming`: the spec's fingerprint and the deterministic names of Jobs, PodGroups and the claim;
* :mod:`.result`: the one parser of the downloader's result (termination message) and progress reports;
* :mod:`.views`: typed views of Jobs (with their pods), claims and nodes;
* :mod:`.render`: the download and cleanup Jobs, PodGroups and the claim;
* :mod:`.units`: one unit's (shared storage, or one node's) decision, with retries and backoff;
* :mod:`.status`: the status, conditions and Events;
* :mod:`.attestation`: the ``AttestationVerified`` condition and whether it holds the cache from Ready;
* :mod:`.plan`: :func:`plan_cache` for a live cache; :mod:`.deletion`: :func:`plan_deletion` for a deleting one.
"""

from kthena_py.plan.modelcache.attestation import AttestationDocument, AttestationSettings
from kthena_py.plan.modelcache.deletion import ABANDONED, CLEANED, IN_USE, DeletionPlan, plan_deletion
from kthena_py.plan.modelcache.naming import (
    bounded_name,
    claim_name,
    cleanup_job_name,
    download_job_name,
    fingerprint,
    label_value,
)
from kthena_py.plan.modelcache.plan import (
    CachePlan,
    Create,
    Delete,
    Observed,
    PlanSettings,
    plan_cache,
    storage_problem,
)
from kthena_py.plan.modelcache.render import (
    JOB_MOUNT_PATH,
    VOLCANO,
    JobSettings,
    cache_path,
    claim,
    cleanup_job,
    download_job,
    podgroup,
    uses_claim,
)
from kthena_py.plan.modelcache.result import DownloadResult, human_size, parse_progress, parse_result
from kthena_py.plan.modelcache.status import Event, cache_events, cache_status
from kthena_py.plan.modelcache.units import PERMANENT_REASONS, Backoff, Failure, decide_unit, failure_of, retry_delay
from kthena_py.plan.modelcache.views import (
    CLEANUP,
    DOWNLOAD,
    ClaimView,
    JobView,
    NodeView,
    PodView,
    claim_view,
    job_view,
    node_view,
)

__all__ = [
    "ABANDONED",
    "CLEANED",
    "CLEANUP",
    "DOWNLOAD",
    "IN_USE",
    "JOB_MOUNT_PATH",
    "PERMANENT_REASONS",
    "VOLCANO",
    "AttestationDocument",
    "AttestationSettings",
    "Backoff",
    "CachePlan",
    "ClaimView",
    "Create",
    "Delete",
    "DeletionPlan",
    "DownloadResult",
    "Event",
    "Failure",
    "JobSettings",
    "JobView",
    "NodeView",
    "Observed",
    "PlanSettings",
    "PodView",
    "bounded_name",
    "cache_events",
    "cache_path",
    "cache_status",
    "claim",
    "claim_name",
    "claim_view",
    "cleanup_job",
    "cleanup_job_name",
    "decide_unit",
    "download_job",
    "download_job_name",
    "failure_of",
    "fingerprint",
    "human_size",
    "job_view",
    "label_value",
    "node_view",
    "parse_progress",
    "parse_result",
    "plan_cache",
    "plan_deletion",
    "podgroup",
    "retry_delay",
    "storage_problem",
    "uses_claim",
]
