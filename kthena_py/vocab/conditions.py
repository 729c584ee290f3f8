"""Every condition type kthena_py writes or reads, and every reason it gives, each spelled once.

Guarantees:

* Kthena's condition types keep Kthena's spelling (``Available``, ``Progressing``, ``UpdateInProgress`` on a
  ModelServing; ``Initialized``, ``Active``, ``Failed`` on a ModelBooster); the others are ours.
* :data:`CONDITION_TYPES` and :data:`CONDITION_REASONS` list every type and reason defined here (the
  vocabulary test checks that no other module spells one).
"""

from __future__ import annotations

__all__ = [
    "ACTIVE",
    "ADAPTERS_LOADED",
    "ATTESTATION_VERIFIED",
    "AVAILABLE",
    "CONDITION_REASONS",
    "CONDITION_TYPES",
    "COORDINATION_BLOCKED",
    "DEGRADED",
    "DISRUPTION_ALLOWED",
    "FAILED",
    "GANG_FAILURE",
    "INITIALIZED",
    "MEMBERS_VALID",
    "METRICS_AVAILABLE",
    "MODEL_CACHED",
    "PODGROUP_UNSCHEDULABLE",
    "POD_READY",
    "POD_SCHEDULED",
    "PREFETCH",
    "PROGRESSING",
    "RATIO_VIOLATED",
    "READY",
    "REASON_ADAPTERS_LOADED",
    "REASON_ADAPTERS_LOADING",
    "REASON_ADAPTER_LOAD_FAILED",
    "REASON_ADAPTER_UNLOAD_FAILED",
    "REASON_ALL_GROUPS_READY",
    "REASON_ALL_METRICS_AVAILABLE",
    "REASON_ALL_SCHEDULED",
    "REASON_ATTESTATION_FAILED",
    "REASON_ATTESTATION_NOT_FOUND",
    "REASON_ATTESTATION_PENDING",
    "REASON_ATTESTATION_VERIFIED",
    "REASON_CACHE_PENDING",
    "REASON_CACHE_READY",
    "REASON_COMPLETE",
    "REASON_COORDINATION",
    "REASON_DEADLINE",
    "REASON_DEMAND_EXPIRED",
    "REASON_DEPENDENCY",
    "REASON_DIGEST_MISMATCH",
    "REASON_DOWNLOADING",
    "REASON_DOWNLOAD_FAILED",
    "REASON_FAILED_CREATE",
    "REASON_FAILED_DELETE",
    "REASON_FAILED_UPDATE",
    "REASON_FIXED_REPLICAS",
    "REASON_GROUPS_NOT_READY",
    "REASON_GROUPS_UPDATING",
    "REASON_GROUP_PROGRESSING",
    "REASON_IDLE",
    "REASON_IDLE_CHECK_FAILED",
    "REASON_INSUFFICIENT_GPU",
    "REASON_INSUFFICIENT_READY",
    "REASON_INSUFFICIENT_RESOURCES",
    "REASON_INTEGRITY_CHECK_FAILED",
    "REASON_INVALID_ENVELOPE",
    "REASON_INVALID_SPEC",
    "REASON_KEY_EXPIRED",
    "REASON_KUBELET_READY",
    "REASON_MEMBERS_FOUND",
    "REASON_MEMBER_AUTOSCALED",
    "REASON_MEMBER_IN_ANOTHER_POOL",
    "REASON_MEMBER_MISSING",
    "REASON_MEMBER_RESIDENT",
    "REASON_MODEL_ABNORMAL",
    "REASON_MODEL_AVAILABLE",
    "REASON_MODEL_CACHE_CONFLICT",
    "REASON_MODEL_CACHE_FAILED",
    "REASON_MODEL_CACHE_READY",
    "REASON_MODEL_CREATING",
    "REASON_MODEL_PROCESSING",
    "REASON_MODEL_RECONCILED",
    "REASON_NODE_SELECTOR_MISMATCH",
    "REASON_NOT_BLOCKED",
    "REASON_NOT_DEFERRED",
    "REASON_NOT_ENQUEUED",
    "REASON_NO_ATTESTATION",
    "REASON_NO_FAILURE",
    "REASON_NO_METRICS",
    "REASON_NO_PROTECTED_UNITS",
    "REASON_NO_READY_PODS",
    "REASON_NO_RESIDENT",
    "REASON_PARTITION",
    "REASON_PODS_BUSY",
    "REASON_PREFETCH_RENDERED",
    "REASON_PREFETCH_UNSUPPORTED",
    "REASON_QUEUE_FULL",
    "REASON_RATIO_SATISFIED",
    "REASON_RATIO_UNSATISFIABLE",
    "REASON_RECONCILED",
    "REASON_RESIDENT_NOT_READY",
    "REASON_RESTAGING",
    "REASON_RETAINED",
    "REASON_RETIRED",
    "REASON_RETIREMENT_FAILED",
    "REASON_REVALIDATION_FAILED",
    "REASON_REVALIDATION_UNSUPPORTED",
    "REASON_ROLES_UPDATING",
    "REASON_SCALE_FAILED",
    "REASON_SCHEDULING",
    "REASON_SCHEDULING_GATED",
    "REASON_SIGNATURE_INVALID",
    "REASON_SKEW",
    "REASON_SOME_METRICS_MISSING",
    "REASON_SOURCE_CHANGED",
    "REASON_SOURCE_UNCHANGED",
    "REASON_STALLED",
    "REASON_STORAGE_UNAVAILABLE",
    "REASON_SUFFICIENT_READY",
    "REASON_SWAP_IN_PROGRESS",
    "REASON_SWAP_STALLED",
    "REASON_TARGET_INVALID",
    "REASON_TARGET_NOT_FOUND",
    "REASON_UNSCHEDULABLE",
    "REASON_UNTRUSTED_KEY",
    "REASON_VERIFYING",
    "REASON_WAITING_FOR_MODEL_CACHE",
    "REPLICA_FAILURE",
    "SCHEDULED",
    "SLOT_ALLOCATED",
    "SOURCE_DRIFTED",
    "SWAP_DEFERRED",
    "TARGET_FOUND",
    "UPDATE_IN_PROGRESS",
]

# ModelServing (Kthena's).
AVAILABLE = "Available"
PROGRESSING = "Progressing"
UPDATE_IN_PROGRESS = "UpdateInProgress"
# ModelServing (ours).
COORDINATION_BLOCKED = "CoordinatedRoleRolloutBlocked"
"""The condition the admission webhook reads to tell whether a coordinated rollout is still running."""
DISRUPTION_ALLOWED = "DisruptionAllowed"
REPLICA_FAILURE = "ReplicaFailure"
"""Refused writes of the ServingGroup reconciler (pods, Services, ControllerRevisions)."""
GANG_FAILURE = "PodGroupFailure"
"""Refused writes of the gang reconciler (PodGroups)."""
SCHEDULED = "Scheduled"
"""Whether every pod (every gang, under Volcano) of the ModelServing is placed, and if not, what it waits for."""

# ModelBooster (Kthena's).
INITIALIZED = "Initialized"
ACTIVE = "Active"
FAILED = "Failed"

# AutoscalingPolicyBinding (ours) and Pod (Kubernetes').
READY = "Ready"
POD_READY = READY
"""A pod's ``Ready`` condition."""
POD_SCHEDULED = "PodScheduled"
"""A pod's ``PodScheduled`` condition (kube-scheduler and Volcano set it ``False`` with their verdict)."""
POD_INITIALIZED = INITIALIZED
"""A pod's ``Initialized`` condition (its init containers succeeded)."""
CONTAINERS_READY = "ContainersReady"
"""A pod's ``ContainersReady`` condition."""
NODE_READY = READY
"""A Node's ``Ready`` condition."""
REASON_KUBELET_READY = "KubeletReady"
"""The reason a kubelet gives its Node's ``Ready`` condition when it is True."""
PODGROUP_UNSCHEDULABLE = "Unschedulable"
"""The condition Volcano sets on a PodGroup whose gang cannot be placed (same spelling as our reason)."""
TARGET_FOUND = "TargetFound"
METRICS_AVAILABLE = "MetricsAvailable"
RATIO_VIOLATED = "RatioConstraintViolated"

# ModelCache (ours) and the ModelServing condition that gates on it.
DEGRADED = "Degraded"
"""A ModelCache whose staging failed (reason says how); False while it is healthy."""
SOURCE_DRIFTED = "SourceDrifted"
"""True when the source's content (ETag, length, commit) differs from the staged copy's."""
ATTESTATION_VERIFIED = "AttestationVerified"
"""True when a trusted key signed an in-toto statement whose subjects match every staged file's digest."""
ADAPTERS_LOADED = "AdaptersLoaded"
"""On a ModelServing with LoRA adapters: whether every Ready entry pod has every adapter of the set loaded
(the message says on how many: "adapters loaded on N/M pods")."""
MODEL_CACHED = "ModelCached"
"""On a ModelServing that names a ModelCache: whether the cache is Ready (its pods wait until it is)."""
PREFETCH = "Prefetch"
"""On a ModelBooster with the prefetch annotation: whether its weights come from a child ModelCache (True) or,
because the booster cannot be mapped to one, from Kthena's per-pod downloader (False)."""

# ModelPool (ours): several ModelServings sharing GPU slots (issue 28); its Ready is READY above.
SLOT_ALLOCATED = "SlotAllocated"
"""True while a member holds the pool's slot (with ``slots > 1``: while at least one does)."""
MEMBERS_VALID = "MembersValid"
"""Whether every member exists, is in no other pool, has no AutoscalingPolicy and selects the pool's nodes."""
SWAP_DEFERRED = "SwapDeferred"
"""True while a wanted swap waits: no resident passed the idle check, or the demand expired before it started."""

CONDITION_TYPES = (
    AVAILABLE,
    PROGRESSING,
    UPDATE_IN_PROGRESS,
    COORDINATION_BLOCKED,
    DISRUPTION_ALLOWED,
    REPLICA_FAILURE,
    GANG_FAILURE,
    SCHEDULED,
    INITIALIZED,
    ACTIVE,
    FAILED,
    READY,
    POD_SCHEDULED,
    TARGET_FOUND,
    METRICS_AVAILABLE,
    RATIO_VIOLATED,
    DEGRADED,
    MODEL_CACHED,
    ADAPTERS_LOADED,
    PREFETCH,
    SOURCE_DRIFTED,
    ATTESTATION_VERIFIED,
    SLOT_ALLOCATED,
    MEMBERS_VALID,
    SWAP_DEFERRED,
)
"""Every condition type above."""

# Reasons of Scheduled: True once every pod is placed; False says which wait it is.
REASON_ALL_SCHEDULED = "AllScheduled"
REASON_SCHEDULING = "Scheduling"
"""Pods or gangs wait for the scheduler's first verdict (nothing says they cannot fit yet)."""
REASON_INSUFFICIENT_GPU = "InsufficientGPU"
"""Waiting for an extended accelerator resource (``nvidia.com/gpu``, ``amd.com/gpu``, ...)."""
REASON_INSUFFICIENT_RESOURCES = "InsufficientResources"
"""Waiting for cpu, memory or another resource that is not an accelerator."""
REASON_QUEUE_FULL = "QueueFull"
"""Volcano's queue has no room left for the gang."""
REASON_NOT_ENQUEUED = "NotEnqueued"
"""Volcano has not admitted the gang to its queue (closed queue, or not enqueued yet for lack of room)."""
REASON_UNSCHEDULABLE = "Unschedulable"
"""Any other reason a pod cannot be placed: taints, node selectors, affinity, topology."""
REASON_SCHEDULING_GATED = "SchedulingGated"
"""The reason a pod's ``PodScheduled`` condition gives while it has scheduling gates (Kubernetes')."""

# Reasons of UpdateInProgress and CoordinatedRoleRolloutBlocked.
REASON_GROUPS_UPDATING = "GroupsUpdating"
REASON_ROLES_UPDATING = "RolesUpdating"
REASON_STALLED = "UpdateStalled"
REASON_PARTITION = "PartitionReached"
REASON_COMPLETE = "RolloutComplete"
REASON_VERIFYING = "InPlaceVerifying"
REASON_DEADLINE = "ProgressDeadlineExceeded"
REASON_COORDINATION = "CoordinationBlocked"
REASON_NOT_BLOCKED = "NotBlocked"
REASON_SKEW = "SkewLimit"
REASON_DEPENDENCY = "DependencyNotReady"
REASON_RETAINED = "OldCapacityRetained"

# Reasons of Available and Progressing.
REASON_ALL_GROUPS_READY = "AllGroupsReady"
REASON_GROUPS_NOT_READY = "GroupsNotReady"
REASON_GROUP_PROGRESSING = "GroupProgressing"
REASON_IDLE = "Idle"

# Reasons of DisruptionAllowed.
REASON_NO_PROTECTED_UNITS = "NoProtectedUnits"
REASON_SUFFICIENT_READY = "SufficientReady"
REASON_INSUFFICIENT_READY = "InsufficientReady"

# Reasons of ReplicaFailure and PodGroupFailure (FailedCreate/Delete/Update also name their Events).
REASON_FAILED_CREATE = "FailedCreate"
REASON_FAILED_DELETE = "FailedDelete"
REASON_FAILED_UPDATE = "FailedUpdate"
REASON_NO_FAILURE = "NoFailure"

# Reasons of the ModelBooster conditions (Kthena's).
REASON_MODEL_CREATING = "ModelCreating"
REASON_MODEL_AVAILABLE = "ModelAvailable"
REASON_MODEL_PROCESSING = "ModelProcessing"
REASON_MODEL_ABNORMAL = "ModelAbnormal"
REASON_MODEL_RECONCILED = "ModelReconciled"

# Reasons of the AutoscalingPolicyBinding conditions (InvalidSpec also names the Event of an unreadable spec).
REASON_RECONCILED = "Reconciled"
REASON_TARGET_NOT_FOUND = "TargetNotFound"
REASON_TARGET_INVALID = "TargetInvalid"
REASON_FIXED_REPLICAS = "FixedReplicas"
REASON_NO_METRICS = "NoMetrics"
REASON_SOME_METRICS_MISSING = "SomeMetricsMissing"
REASON_ALL_METRICS_AVAILABLE = "AllMetricsAvailable"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_SCALE_FAILED = "ScaleFailed"
REASON_RATIO_SATISFIED = "RatioSatisfied"
REASON_RATIO_UNSATISFIABLE = "RatioUnsatisfiable"

# Reasons of a ModelCache's Ready, Progressing and Degraded, and of a ModelServing's ModelCached.
REASON_CACHE_PENDING = "Pending"
"""Nothing staged yet: no download started (``prefetch: false`` waits for a ModelServing to name the cache)."""
REASON_DOWNLOADING = "Downloading"
REASON_CACHE_READY = "Cached"
"""Every file is staged and verified."""
REASON_INTEGRITY_CHECK_FAILED = "IntegrityCheckFailed"
"""A staged file's sha256 differs from the one expected (spec or hub); nothing is left at the final path."""
REASON_DOWNLOAD_FAILED = "DownloadFailed"
"""The download failed for another reason (source unreachable, unauthorized, not found, unsupported)."""
REASON_STORAGE_UNAVAILABLE = "StorageUnavailable"
"""The storage cannot be used: a missing claim, a claim that does not bind, no node matching a node-local selector."""
REASON_WAITING_FOR_MODEL_CACHE = "WaitingForModelCache"
REASON_MODEL_CACHE_FAILED = "ModelCacheFailed"
REASON_MODEL_CACHE_READY = "ModelCacheReady"
REASON_MODEL_CACHE_CONFLICT = "ModelCacheMountConflict"
"""A ModelServing template already uses the cache's volume name or mount path: the gate stays closed."""

# ModelCache conditions of trust and freshness (issue 26) and their reasons.
REASON_SOURCE_UNCHANGED = "SourceUnchanged"
REASON_SOURCE_CHANGED = "SourceChanged"
"""The source changed; under IfNotPresent the staged copy keeps serving."""
REASON_RESTAGING = "Restaging"
"""The source changed; under OnChange its new content is being staged beside the served copy."""
REASON_RETIRED = "Retired"
"""Event: a superseded copy of an OnChange cache was removed from the storage (no pod mounts it any more)."""
REASON_RETIREMENT_FAILED = "RetirementFailed"
"""Event: the Job removing a superseded copy failed; it is retried after the backoff."""
REASON_REVALIDATION_FAILED = "RevalidationFailed"
"""The source could not be checked (unreachable, refused); the condition is Unknown, the cache keeps serving."""
REASON_REVALIDATION_UNSUPPORTED = "RevalidationUnsupported"
"""The source cannot be checked from the manager (a local path, or a scheme without a metadata request)."""
REASON_ATTESTATION_VERIFIED = "Verified"
REASON_ATTESTATION_PENDING = "AttestationPending"
"""Nothing staged yet to compare the statement with."""
REASON_NO_ATTESTATION = "NoAttestation"
"""The cache references no attestation while the manager's mode asks for one."""
REASON_ATTESTATION_NOT_FOUND = "AttestationNotFound"
"""The referenced ConfigMap or key does not exist."""
REASON_INVALID_ENVELOPE = "InvalidEnvelope"
"""The document is not a DSSE envelope with an in-toto statement (or has the wrong payload type)."""
REASON_UNTRUSTED_KEY = "UntrustedKey"
"""No signature is by a trusted key (unknown key id, or no trusted keys configured)."""
REASON_KEY_EXPIRED = "KeyExpired"
"""The only matching trusted key is past its expiry."""
REASON_SIGNATURE_INVALID = "SignatureInvalid"
"""A trusted key's signature does not verify over the envelope (tampered payload, wrong key)."""
REASON_DIGEST_MISMATCH = "DigestMismatch"
"""The statement's subjects do not carry the staged files' sha256 digests."""
REASON_ATTESTATION_FAILED = "AttestationFailed"
"""Ready/Degraded reason of a cache held back by an enforced attestation that did not verify."""

# Reasons of a ModelBooster's Prefetch (PrefetchUnsupported also names the Warning Event).
REASON_PREFETCH_RENDERED = "ModelCacheRendered"
"""The booster's ModelServing is gated on its child ModelCache; no pod runs a downloader."""
REASON_PREFETCH_UNSUPPORTED = "PrefetchUnsupported"
"""The booster cannot be mapped to a ModelCache (its cacheURI or download settings); pods keep the downloader."""

# Reasons of the ModelPool conditions (SlotAllocated, MembersValid, SwapDeferred, Ready).
REASON_MEMBER_RESIDENT = "MemberResident"
"""SlotAllocated True / Ready True: the resident member is scaled up and Ready."""
REASON_NO_RESIDENT = "NoMemberResident"
"""SlotAllocated False: no member holds a slot (a cold pool, no default and no demand yet)."""
REASON_SWAP_IN_PROGRESS = "SwapInProgress"
"""Ready False while a swap moves the slot from one member to another (``status.swap`` says which step)."""
REASON_RESIDENT_NOT_READY = "ResidentNotReady"
"""Ready False: the resident member is scaled up but its pods are not Ready (loading, or failing)."""
REASON_MEMBERS_FOUND = "MembersFound"
"""MembersValid True: every member exists and nothing else writes its replicas."""
REASON_MEMBER_MISSING = "MemberMissing"
"""MembersValid False: a member names a ModelServing that does not exist in the pool's namespace."""
REASON_MEMBER_AUTOSCALED = "MemberAutoscaled"
"""MembersValid False: an AutoscalingPolicy targets a member (created before the webhook could refuse it)."""
REASON_MEMBER_IN_ANOTHER_POOL = "MemberInAnotherPool"
"""MembersValid False: a member is also listed by another ModelPool (the older pool keeps it)."""
REASON_NODE_SELECTOR_MISMATCH = "NodeSelectorMismatch"
"""MembersValid False: a member's entry template does not select the pool's ``nodeSelector`` labels."""
REASON_PODS_BUSY = "PodsBusy"
"""SwapDeferred True: an idle-check probe found the would-be victim serving or queueing requests."""
REASON_IDLE_CHECK_FAILED = "IdleCheckFailed"
"""SwapDeferred True: a probe failed and none found a resident idle (failing closed: never counted as idle)."""
REASON_DEMAND_EXPIRED = "DemandExpired"
"""SwapDeferred True: the target's demand expired before its victim was drained; the swap was abandoned."""
REASON_NOT_DEFERRED = "NotDeferred"
"""SwapDeferred False: no swap is waiting."""
REASON_SWAP_STALLED = "SwapStalled"
"""Ready False (phase Degraded): a swap's target has been Loading longer than the pool's ``swapBudget``."""
# Reasons of AdaptersLoaded (AdapterLoadFailed also names the Warning Event of a refused load).
REASON_ADAPTERS_LOADED = "AllLoaded"
"""Every Ready entry pod has every adapter of the set loaded."""
REASON_ADAPTERS_LOADING = "Loading"
"""Some Ready entry pods still miss an adapter; nothing failed."""
REASON_ADAPTER_LOAD_FAILED = "AdapterLoadFailed"
"""A load was refused (or failed) on a pod; it is retried with backoff (the message names the pod)."""
REASON_ADAPTER_UNLOAD_FAILED = "AdapterUnloadFailed"
"""An unload was refused (or failed) on a pod (the Warning Event's reason; it is retried with backoff)."""
REASON_NO_READY_PODS = "NoReadyPods"
"""The ModelServing has no Ready entry pod to load adapters into."""

CONDITION_REASONS = (
    REASON_ALL_SCHEDULED,
    REASON_SCHEDULING,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_QUEUE_FULL,
    REASON_NOT_ENQUEUED,
    REASON_UNSCHEDULABLE,
    REASON_SCHEDULING_GATED,
    REASON_GROUPS_UPDATING,
    REASON_ROLES_UPDATING,
    REASON_STALLED,
    REASON_PARTITION,
    REASON_COMPLETE,
    REASON_VERIFYING,
    REASON_DEADLINE,
    REASON_COORDINATION,
    REASON_NOT_BLOCKED,
    REASON_SKEW,
    REASON_DEPENDENCY,
    REASON_RETAINED,
    REASON_ALL_GROUPS_READY,
    REASON_GROUPS_NOT_READY,
    REASON_GROUP_PROGRESSING,
    REASON_IDLE,
    REASON_NO_PROTECTED_UNITS,
    REASON_SUFFICIENT_READY,
    REASON_INSUFFICIENT_READY,
    REASON_FAILED_CREATE,
    REASON_FAILED_DELETE,
    REASON_FAILED_UPDATE,
    REASON_NO_FAILURE,
    REASON_MODEL_CREATING,
    REASON_MODEL_AVAILABLE,
    REASON_MODEL_PROCESSING,
    REASON_MODEL_ABNORMAL,
    REASON_MODEL_RECONCILED,
    REASON_RECONCILED,
    REASON_TARGET_NOT_FOUND,
    REASON_TARGET_INVALID,
    REASON_FIXED_REPLICAS,
    REASON_NO_METRICS,
    REASON_SOME_METRICS_MISSING,
    REASON_ALL_METRICS_AVAILABLE,
    REASON_INVALID_SPEC,
    REASON_SCALE_FAILED,
    REASON_RATIO_SATISFIED,
    REASON_RATIO_UNSATISFIABLE,
    REASON_CACHE_PENDING,
    REASON_DOWNLOADING,
    REASON_CACHE_READY,
    REASON_INTEGRITY_CHECK_FAILED,
    REASON_DOWNLOAD_FAILED,
    REASON_STORAGE_UNAVAILABLE,
    REASON_WAITING_FOR_MODEL_CACHE,
    REASON_MODEL_CACHE_FAILED,
    REASON_MODEL_CACHE_READY,
    REASON_MODEL_CACHE_CONFLICT,
    REASON_PREFETCH_RENDERED,
    REASON_PREFETCH_UNSUPPORTED,
    REASON_SOURCE_UNCHANGED,
    REASON_SOURCE_CHANGED,
    REASON_RESTAGING,
    REASON_RETIRED,
    REASON_RETIREMENT_FAILED,
    REASON_REVALIDATION_FAILED,
    REASON_REVALIDATION_UNSUPPORTED,
    REASON_ATTESTATION_VERIFIED,
    REASON_ATTESTATION_PENDING,
    REASON_NO_ATTESTATION,
    REASON_ATTESTATION_NOT_FOUND,
    REASON_INVALID_ENVELOPE,
    REASON_UNTRUSTED_KEY,
    REASON_KEY_EXPIRED,
    REASON_SIGNATURE_INVALID,
    REASON_DIGEST_MISMATCH,
    REASON_ATTESTATION_FAILED,
    REASON_MEMBER_RESIDENT,
    REASON_NO_RESIDENT,
    REASON_SWAP_IN_PROGRESS,
    REASON_RESIDENT_NOT_READY,
    REASON_MEMBERS_FOUND,
    REASON_MEMBER_MISSING,
    REASON_MEMBER_AUTOSCALED,
    REASON_MEMBER_IN_ANOTHER_POOL,
    REASON_NODE_SELECTOR_MISMATCH,
    REASON_PODS_BUSY,
    REASON_IDLE_CHECK_FAILED,
    REASON_DEMAND_EXPIRED,
    REASON_NOT_DEFERRED,
    REASON_SWAP_STALLED,
    REASON_ADAPTERS_LOADED,
    REASON_ADAPTERS_LOADING,
    REASON_ADAPTER_LOAD_FAILED,
    REASON_ADAPTER_UNLOAD_FAILED,
    REASON_NO_READY_PODS,
)
"""Every reason above."""
