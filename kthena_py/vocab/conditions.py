"""Every condition type kthena_py writes or reads, and the reasons of the rollout conditions, each spelled once.

Guarantees:

* Kthena's condition types keep Kthena's spelling (``Available``, ``Progressing``, ``UpdateInProgress`` on a
  ModelServing; ``Initialized``, ``Active``, ``Failed`` on a ModelBooster); the others are ours.
* :data:`CONDITION_TYPES` lists every type defined here (the vocabulary test checks that no other module
  spells one).
"""

from __future__ import annotations

__all__ = [
    "ACTIVE",
    "AVAILABLE",
    "CONDITION_TYPES",
    "COORDINATION_BLOCKED",
    "DISRUPTION_ALLOWED",
    "FAILED",
    "GANG_FAILURE",
    "INITIALIZED",
    "METRICS_AVAILABLE",
    "POD_READY",
    "PROGRESSING",
    "RATIO_VIOLATED",
    "READY",
    "REASON_COMPLETE",
    "REASON_COORDINATION",
    "REASON_DEADLINE",
    "REASON_DEPENDENCY",
    "REASON_GROUPS_UPDATING",
    "REASON_NOT_BLOCKED",
    "REASON_PARTITION",
    "REASON_RETAINED",
    "REASON_ROLES_UPDATING",
    "REASON_SKEW",
    "REASON_STALLED",
    "REASON_VERIFYING",
    "REPLICA_FAILURE",
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

# ModelBooster (Kthena's).
INITIALIZED = "Initialized"
ACTIVE = "Active"
FAILED = "Failed"

# AutoscalingPolicyBinding (ours) and Pod (Kubernetes').
READY = "Ready"
POD_READY = READY
"""A pod's ``Ready`` condition."""
TARGET_FOUND = "TargetFound"
METRICS_AVAILABLE = "MetricsAvailable"
RATIO_VIOLATED = "RatioConstraintViolated"

CONDITION_TYPES = (
    AVAILABLE,
    PROGRESSING,
    UPDATE_IN_PROGRESS,
    COORDINATION_BLOCKED,
    DISRUPTION_ALLOWED,
    REPLICA_FAILURE,
    GANG_FAILURE,
    INITIALIZED,
    ACTIVE,
    FAILED,
    READY,
    TARGET_FOUND,
    METRICS_AVAILABLE,
    RATIO_VIOLATED,
)
"""Every condition type above."""

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
