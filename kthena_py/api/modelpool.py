"""``ModelPool`` (``serving.kthena-py.io/v1alpha1``): several ModelServings sharing a few GPU slots.

A kind of kthena_py's own group, never Kthena's. A pool lists ModelServings of its namespace (``spec.members``);
at most ``spec.slots`` of them are *resident* (scaled up) at once. A request for a non-resident member is held by
the activator, which records the demand as an annotation on the pool; the pool controller then swaps: it drains an
idle resident (the least recently used one), waits until its pods are gone, and scales the target up. The pool
controller is the only writer of its members' replicas.

Guarantees (on top of :mod:`kthena_py.api.common`):

* ``members`` is non-empty (at most :data:`MAX_MEMBERS`) and names each ModelServing at most once; ``default``,
  when set, names a member; ``slots >= 1``; ``swapBudget`` is a positive duration. The schema here checks each
  field alone (bounds, enums); the rules across fields are checks of the webhook with field paths
  (:mod:`kthena_py.api.validation.modelpool`) and, where CEL can say them, rules of the CRD.
* Every phase, swap step, condition type and reason a pool's status carries is a constant of this module
  (conditions and reasons are spelled once, in :mod:`kthena_py.vocab.conditions`, and re-exported here).
* Status times (``swap.started`` ...) are RFC 3339 strings, as the controller writes them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kthena_py.api.common import ApiObject, Condition, KthenaModel
from kthena_py.api.duration import Duration
from kthena_py.vocab import conditions as _conditions

__all__ = [
    "CONDITION_MEMBERS_VALID",
    "CONDITION_READY",
    "CONDITION_SLOT_ALLOCATED",
    "CONDITION_SWAP_DEFERRED",
    "DEFAULT_IDLE_METRICS",
    "DEFAULT_IDLE_PATH",
    "DEFAULT_NOT_A_MEMBER_MESSAGE",
    "DEFAULT_SLOTS",
    "DEFAULT_SWAP_BUDGET",
    "MAX_MEMBERS",
    "MEMBER_FAILED",
    "MEMBER_MISSING",
    "MEMBER_READY",
    "MEMBER_SCALING",
    "MEMBER_STOPPED",
    "MODEL_POOL_API_VERSION",
    "MODEL_POOL_GROUP",
    "MODEL_POOL_KIND",
    "MODEL_POOL_LIST_KIND",
    "MODEL_POOL_PLURAL",
    "MODEL_POOL_SHORT_NAME",
    "MODEL_POOL_SINGULAR",
    "MODEL_POOL_VERSION",
    "PHASE_DEGRADED",
    "PHASE_PENDING",
    "PHASE_READY",
    "PHASE_SWAPPING",
    "REASON_DEMAND_EXPIRED",
    "REASON_IDLE_CHECK_FAILED",
    "REASON_MEMBERS_FOUND",
    "REASON_MEMBER_AUTOSCALED",
    "REASON_MEMBER_IN_ANOTHER_POOL",
    "REASON_MEMBER_MISSING",
    "REASON_MEMBER_RESIDENT",
    "REASON_NODE_SELECTOR_MISMATCH",
    "REASON_NOT_DEFERRED",
    "REASON_NO_RESIDENT",
    "REASON_PODS_BUSY",
    "REASON_RESIDENT_NOT_READY",
    "REASON_SWAP_IN_PROGRESS",
    "STEP_DRAINING",
    "STEP_LOADING",
    "STEP_RELEASING",
    "SWAP_BUDGET_MESSAGE",
    "SWAP_POLICY_STICKY",
    "IdleCheck",
    "LastSwap",
    "MemberPhase",
    "ModelPool",
    "ModelPoolList",
    "ModelPoolPhase",
    "ModelPoolSpec",
    "ModelPoolStatus",
    "ModelServingReference",
    "PoolMember",
    "PoolMemberStatus",
    "PoolSwap",
    "SwapPolicy",
    "SwapStep",
    "idle_metrics",
    "idle_path",
    "member_names",
]

MODEL_POOL_GROUP = "serving.kthena-py.io"
MODEL_POOL_VERSION = "v1alpha1"
MODEL_POOL_API_VERSION = f"{MODEL_POOL_GROUP}/{MODEL_POOL_VERSION}"
MODEL_POOL_KIND = "ModelPool"
MODEL_POOL_LIST_KIND = "ModelPoolList"
MODEL_POOL_PLURAL = "modelpools"
MODEL_POOL_SINGULAR = "modelpool"
MODEL_POOL_SHORT_NAME = "mpool"

SwapPolicy = Literal["sticky"]
SWAP_POLICY_STICKY: SwapPolicy = "sticky"
"""A resident stays until another member has live demand (the only policy, as in LLMKube)."""

DEFAULT_SWAP_BUDGET = "300s"
"""How long the activator holds a request for a non-resident member before answering 503 + Retry-After."""
DEFAULT_SLOTS = 1
"""How many members may be resident at once."""
DEFAULT_IDLE_PATH = "/metrics"
"""Where the idle check scrapes a resident's Ready entry pods."""
DEFAULT_IDLE_METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting")
"""The engine gauges whose sum over a resident's Ready entry pods is 0 when it is idle."""

ModelPoolPhase = Literal["Pending", "Ready", "Swapping", "Degraded"]
PHASE_PENDING: ModelPoolPhase = "Pending"
"""No member is resident and Ready yet (a cold pool, or its first member still loading)."""
PHASE_READY: ModelPoolPhase = "Ready"
"""Every resident member is Ready and no swap is in progress."""
PHASE_SWAPPING: ModelPoolPhase = "Swapping"
"""A swap is in progress (``status.swap`` names its step)."""
PHASE_DEGRADED: ModelPoolPhase = "Degraded"
"""A member is invalid (missing, autoscaled, in another pool) or a resident failed."""

MemberPhase = Literal["Ready", "Scaling", "Stopped", "Failed", "Missing"]
MEMBER_READY: MemberPhase = "Ready"
"""The member has replicas and they are Ready."""
MEMBER_SCALING: MemberPhase = "Scaling"
"""The member is being scaled up or down (pods starting, or still present after a scale to 0)."""
MEMBER_STOPPED: MemberPhase = "Stopped"
"""The member is at 0 replicas with no pods left."""
MEMBER_FAILED: MemberPhase = "Failed"
"""The member's pods fail (crash, unschedulable)."""
MEMBER_MISSING: MemberPhase = "Missing"
"""No ModelServing of that name exists in the pool's namespace."""

SwapStep = Literal["Draining", "Releasing", "Loading"]
STEP_DRAINING: SwapStep = "Draining"
"""The victim is waiting for its idle check to pass (nothing scaled yet)."""
STEP_RELEASING: SwapStep = "Releasing"
"""The victim is at 0 replicas; waiting until its pods are gone (not just terminating)."""
STEP_LOADING: SwapStep = "Loading"
"""The target is at 1 replica; waiting until it is Ready."""

CONDITION_SLOT_ALLOCATED = _conditions.SLOT_ALLOCATED
CONDITION_MEMBERS_VALID = _conditions.MEMBERS_VALID
CONDITION_SWAP_DEFERRED = _conditions.SWAP_DEFERRED
CONDITION_READY = _conditions.READY

REASON_MEMBER_RESIDENT = _conditions.REASON_MEMBER_RESIDENT
REASON_NO_RESIDENT = _conditions.REASON_NO_RESIDENT
REASON_SWAP_IN_PROGRESS = _conditions.REASON_SWAP_IN_PROGRESS
REASON_RESIDENT_NOT_READY = _conditions.REASON_RESIDENT_NOT_READY
REASON_MEMBERS_FOUND = _conditions.REASON_MEMBERS_FOUND
REASON_MEMBER_MISSING = _conditions.REASON_MEMBER_MISSING
REASON_MEMBER_AUTOSCALED = _conditions.REASON_MEMBER_AUTOSCALED
REASON_MEMBER_IN_ANOTHER_POOL = _conditions.REASON_MEMBER_IN_ANOTHER_POOL
REASON_NODE_SELECTOR_MISMATCH = _conditions.REASON_NODE_SELECTOR_MISMATCH
REASON_PODS_BUSY = _conditions.REASON_PODS_BUSY
REASON_IDLE_CHECK_FAILED = _conditions.REASON_IDLE_CHECK_FAILED
REASON_DEMAND_EXPIRED = _conditions.REASON_DEMAND_EXPIRED
REASON_NOT_DEFERRED = _conditions.REASON_NOT_DEFERRED

MAX_MEMBERS = 64
"""The most members a pool lists: far more models than a few slots can usefully rotate through, and the bound
that lets the API server check ``default`` with a CEL rule (an unbounded list exceeds CEL's cost budget)."""

DEFAULT_NOT_A_MEMBER_MESSAGE = "must name a member of the pool"
"""The message of the API server (a CEL rule) and of the webhook when ``spec.default`` is not a member."""
SWAP_BUDGET_MESSAGE = "must be a positive duration"
"""The message of the API server (a CEL rule) and of the webhook when ``spec.swapBudget`` is not positive."""

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class ModelServingReference(KthenaModel):
    """A ModelServing in the pool's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)


class PoolMember(KthenaModel):
    """One member of the pool."""

    model_serving_ref: ModelServingReference


class IdleCheck(KthenaModel):
    """How the controller tells that a resident is idle (fails closed: an unreachable pod is never idle)."""

    port: int | None = Field(default=None, ge=1, le=65535)
    path: str = Field(default=DEFAULT_IDLE_PATH, min_length=1, max_length=1024, pattern=r"^/")
    metrics: list[str] | None = Field(default=None, min_length=1)
    """Unset: :data:`DEFAULT_IDLE_METRICS` (see :func:`idle_metrics`; CRD defaults are scalars only here)."""


class ModelPoolSpec(KthenaModel):
    """Which ModelServings share the slots, and how they are swapped."""

    members: list[PoolMember] = Field(min_length=1, max_length=MAX_MEMBERS)
    default: str | None = Field(default=None, min_length=1, max_length=253)
    gpu: int | None = Field(default=None, ge=0)
    node_selector: dict[str, str] | None = None
    swap_policy: SwapPolicy = SWAP_POLICY_STICKY
    swap_budget: Duration = Duration(DEFAULT_SWAP_BUDGET)
    slots: int = Field(default=DEFAULT_SLOTS, ge=1)
    idle_check: IdleCheck | None = None


class PoolSwap(KthenaModel):
    """The swap the controller is carrying out, written before each step is acted on (restart-safe)."""

    from_: str | None = Field(default=None, alias="from")
    to: str
    step: SwapStep
    started: str | None = None
    drained: str | None = None
    released: str | None = None


class LastSwap(KthenaModel):
    """The last completed swap: its members, the time of each step and its duration."""

    from_: str | None = Field(default=None, alias="from")
    to: str
    started: str | None = None
    drained: str | None = None
    released: str | None = None
    ready: str | None = None
    duration_seconds: float | None = Field(default=None, ge=0)


class PoolMemberStatus(KthenaModel):
    """Where one member stands."""

    name: str
    phase: MemberPhase | None = None
    resident: bool | None = None
    replicas: int | None = Field(default=None, ge=0)
    last_request_time: str | None = None


class ModelPoolStatus(KthenaModel):
    """Which members are resident, what the pool is doing, and how its last swap went."""

    observed_generation: int | None = Field(default=None, ge=0)
    phase: ModelPoolPhase | None = None
    resident_member: str | None = None
    resident_members: list[str] | None = None
    pending_member: str | None = None
    evicting_member: str | None = None
    swap: PoolSwap | None = None
    last_swap: LastSwap | None = None
    members: list[PoolMemberStatus] | None = None
    conditions: list[Condition] | None = None


class ModelPool(ApiObject):
    """Several ModelServings sharing ``slots`` GPU slots, swapped on demand by the pool controller."""

    api_version: Literal["serving.kthena-py.io/v1alpha1"] = "serving.kthena-py.io/v1alpha1"
    kind: Literal["ModelPool"] = "ModelPool"
    spec: ModelPoolSpec
    status: ModelPoolStatus | None = None


class ModelPoolList(KthenaModel):
    """A list of ModelPools."""

    api_version: Literal["serving.kthena-py.io/v1alpha1"] = "serving.kthena-py.io/v1alpha1"
    kind: Literal["ModelPoolList"] = "ModelPoolList"
    metadata: dict[str, Any] | None = None
    items: list[ModelPool] = Field(default_factory=list)


def idle_metrics(spec: ModelPoolSpec) -> tuple[str, ...]:
    """The gauges the idle check sums: ``spec.idleCheck.metrics``, else :data:`DEFAULT_IDLE_METRICS`."""
    check = spec.idle_check
    if check is None or check.metrics is None:
        return DEFAULT_IDLE_METRICS
    return tuple(check.metrics)


def idle_path(spec: ModelPoolSpec) -> str:
    """The path the idle check scrapes: ``spec.idleCheck.path``, else :data:`DEFAULT_IDLE_PATH`."""
    return DEFAULT_IDLE_PATH if spec.idle_check is None else spec.idle_check.path


def member_names(pool: ModelPool | ModelPoolSpec) -> list[str]:
    """The members' ModelServing names, in ``spec.members`` order."""
    spec = pool.spec if isinstance(pool, ModelPool) else pool
    return [member.model_serving_ref.name for member in spec.members]
