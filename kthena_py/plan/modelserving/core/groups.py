"""Parse the observed pods and Services of a ModelServing into ServingGroups and role instances.

Guarantees:

* Pure and total: malformed objects never raise. A pod is taken into account only when it carries our labels
  (``name`` = the ModelServing, ``group-name`` = ``<ms>-<g>``, ``role``, ``role-id`` = ``<role>-<r>``) *and* its
  name is exactly the one the controller would have given it (``<ms>-<g>-<role>-<r>-<i>``); anything else is
  ignored (never adopted, never deleted). Services likewise need our labels and the entry pod's name.
* The result is keyed by ordinals: groups by group ordinal, role instances by ``(role, ordinal)``, pods by index;
  iteration helpers return them sorted, so every planner built on this is deterministic.
* Liveness is level-based: a unit is *live* when it has at least one pod that is not terminating. A pod is
  *healthy-ready* when it is ``Running``, its ``Ready`` condition is ``True``, it is not terminating and no in-place
  update of it is waiting to be verified (:mod:`kthena_py.plan.modelserving.core.inplace_state`): a pod patched in place
  counts as unavailable until the rollout has seen it Ready on its new image.
* ``restarts`` leaves out the container restarts an in-place update explains, so recovery never acts on them.
* A pod object is read once while it lives: its :class:`PodState` is kept for the object (by identity, the entry
  holding the object so its ``id`` cannot be reused; the :data:`POD_STATE_MEMO` most recent objects), so the
  planners' reconciles of an unchanged pod do not parse it again. Objects are read as the cache holds them:
  replaced on every change, never modified in place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kthena_py.api.intstr import IntOrStringError, go_atoi
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.inplace_state import (
    PHASE_FAILED,
    PHASE_PATCHED,
    InPlaceState,
    container_restarts,
    excused_restarts,
    parse_state,
)
from kthena_py.plan.modelserving.core.memo import ObjectMemo
from kthena_py.plan.modelserving.core.types import KubeObject, Observed
from kthena_py.vocab.pods import CRASH_LOOP, IMAGE_PULL_REASONS, PHASE_RUNNING, ready_condition
from kthena_py.vocab.times import parse_time

__all__ = [
    "STUCK_REASONS",
    "GroupState",
    "InstanceState",
    "ObservedGroups",
    "PodState",
    "ServiceState",
    "deletion_cost",
    "parse_observed",
    "parse_timestamp",
]


def parse_timestamp(value: Any) -> float | None:
    """Parse an RFC 3339 timestamp into epoch seconds (``None`` when absent or malformed)."""
    return parse_time(value)


def deletion_cost(annotations: Any) -> int:
    """Return ``controller.kubernetes.io/pod-deletion-cost`` as an int (missing or not an integer: 0)."""
    if not isinstance(annotations, dict):
        return 0
    raw = annotations.get(naming.ANNOTATION_DELETION_COST)
    if not isinstance(raw, str):
        return 0
    try:
        return go_atoi(raw)
    except IntOrStringError:
        return 0


@dataclass(frozen=True)
class PodState:
    """What the planners need to know about one observed pod."""

    name: str
    uid: str
    group: int
    role: str
    role_ordinal: int
    index: int
    revision: str
    role_hash: str
    phase: str
    ready: bool
    ready_changed_at: float | None
    """``lastTransitionTime`` of the ``Ready`` condition (epoch seconds), or ``None``."""
    created_at: float | None
    terminating: bool
    restarts: int
    """Sum of ``restartCount`` over containers and init containers, less the restarts in-place updates explain."""
    cost: int
    """``controller.kubernetes.io/pod-deletion-cost`` (0 when missing or invalid)."""
    problem: str = ""
    """A container's waiting reason that needs a person (``ImagePullBackOff``, ``CrashLoopBackOff``...), else ``""``."""
    inplace: InPlaceState | None = field(default=None, compare=False)
    """The pod's in-place update record, if any."""

    @property
    def updating(self) -> bool:
        """An in-place update patched this pod and has not verified it yet."""
        return self.inplace is not None and self.inplace.phase == PHASE_PATCHED

    @property
    def inplace_failed(self) -> str:
        """Why an in-place update of this pod failed (it missed ``progressDeadlineSeconds``), else ``""``."""
        if self.inplace is None or self.inplace.phase != PHASE_FAILED:
            return ""
        return self.inplace.reason or "in-place update failed"

    @property
    def healthy_ready(self) -> bool:
        """Running, Ready, not terminating and not waiting for an in-place update to be verified."""
        return self.phase == PHASE_RUNNING and self.ready and not self.terminating and not self.updating

    @property
    def is_entry(self) -> bool:
        """Whether this is the entry pod of its role instance."""
        return self.index == naming.ENTRY_INDEX


@dataclass(frozen=True)
class ServiceState:
    """An observed headless Service of a role instance."""

    name: str
    uid: str
    terminating: bool


@dataclass
class InstanceState:
    """One role instance (``<role>-<ordinal>``) of a ServingGroup, as observed."""

    role: str
    ordinal: int
    pods: dict[int, PodState] = field(default_factory=dict)
    service: ServiceState | None = None

    @property
    def live(self) -> bool:
        """Whether at least one pod is not terminating."""
        return any(not pod.terminating for pod in self.pods.values())

    @property
    def terminating(self) -> bool:
        """Whether at least one pod is terminating."""
        return any(pod.terminating for pod in self.pods.values())

    @property
    def cost(self) -> int:
        """Summed pod deletion cost."""
        return sum(pod.cost for pod in self.pods.values())

    def sorted_pods(self) -> list[PodState]:
        """Pods by index."""
        return [self.pods[index] for index in sorted(self.pods)]

    def revision(self) -> str | None:
        """The most common revision label of the non-terminating pods (ties: smallest), else of any pod."""
        return _most_common(pod.revision for pod in self.pods.values() if not pod.terminating) or _most_common(
            pod.revision for pod in self.pods.values()
        )

    def complete_and_ready(self, worker_replicas: int) -> bool:
        """Whether exactly pods ``0..worker_replicas`` exist and all are Running, Ready and not terminating."""
        return set(self.pods) == set(range(worker_replicas + 1)) and all(
            pod.healthy_ready for pod in self.pods.values()
        )


@dataclass
class GroupState:
    """One ServingGroup, as observed."""

    ordinal: int
    name: str
    instances: dict[tuple[str, int], InstanceState] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        """Whether at least one pod of the group is not terminating."""
        return any(instance.live for instance in self.instances.values())

    @property
    def has_pods(self) -> bool:
        """Whether any pod (terminating or not) of the group is observed."""
        return any(instance.pods for instance in self.instances.values())

    @property
    def terminating(self) -> bool:
        """Whether at least one pod of the group is terminating."""
        return any(instance.terminating for instance in self.instances.values())

    @property
    def cost(self) -> int:
        """Summed pod deletion cost."""
        return sum(instance.cost for instance in self.instances.values())

    def pods(self) -> Iterator[PodState]:
        """All pods, by role, role ordinal and index."""
        for key in sorted(self.instances):
            yield from self.instances[key].sorted_pods()

    def role_instances(self, role: str) -> dict[int, InstanceState]:
        """The instances of one role, by ordinal."""
        return {ordinal: inst for (name, ordinal), inst in sorted(self.instances.items()) if name == role}

    def revision(self, prefer: str | None = None) -> str | None:
        """The most common revision label among non-terminating pods (ties: ``prefer``, then smallest)."""
        return _most_common((pod.revision for pod in self.pods() if not pod.terminating), prefer) or _most_common(
            (pod.revision for pod in self.pods()), prefer
        )


def _most_common(values: Iterable[str], prefer: str | None = None) -> str | None:
    present = [value for value in values if value]
    if not present:
        return None
    first = present[0]
    if all(value == first for value in present):  # the usual case: every pod on one revision
        return first
    counts = Counter(present)
    top = max(counts.values())
    tied = sorted(value for value, count in counts.items() if count == top)
    return prefer if prefer in tied else tied[0]


@dataclass(frozen=True)
class ObservedGroups:
    """The observed ServingGroups of one ModelServing, by ordinal."""

    groups: dict[int, GroupState]

    def get(self, ordinal: int) -> GroupState | None:
        """The group with this ordinal, if any object of it is observed."""
        return self.groups.get(ordinal)

    def sorted(self) -> list[GroupState]:
        """Groups by ordinal."""
        return [self.groups[ordinal] for ordinal in sorted(self.groups)]


def _labels(obj: KubeObject) -> dict[str, Any]:
    labels = obj.get("metadata", {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _identity(ms: str, obj: KubeObject) -> tuple[int, str, int] | None:
    labels = _labels(obj)
    if labels.get(naming.LABEL_NAME) != ms:
        return None
    group_label = labels.get(naming.LABEL_GROUP_NAME)
    role = labels.get(naming.LABEL_ROLE)
    role_id = labels.get(naming.LABEL_ROLE_ID)
    if not isinstance(group_label, str) or not isinstance(role, str) or not isinstance(role_id, str):
        return None
    group = naming.parse_group_name(ms, group_label)
    ordinal = naming.parse_role_id(role, role_id)
    if group is None or ordinal is None:
        return None
    return group, role, ordinal


def _ready_condition(status: dict[str, Any]) -> tuple[bool, float | None]:
    condition = ready_condition({"status": status})
    if condition is None:
        return False, None
    return condition.get("status") == "True", parse_timestamp(condition.get("lastTransitionTime"))


def _restarts(status: dict[str, Any]) -> int:
    total = 0
    for key in ("containerStatuses", "initContainerStatuses"):
        for item in status.get(key) or []:
            count = item.get("restartCount") if isinstance(item, dict) else None
            if isinstance(count, int) and not isinstance(count, bool):
                total += count
    return total


STUCK_REASONS = IMAGE_PULL_REASONS | frozenset(
    {CRASH_LOOP, "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)
"""Container waiting reasons that do not resolve by waiting."""


def _problem(status: dict[str, Any]) -> str:
    for key in ("initContainerStatuses", "containerStatuses"):
        for item in status.get(key) or []:
            state = item.get("state") if isinstance(item, dict) else None
            waiting = state.get("waiting") if isinstance(state, dict) else None
            reason = waiting.get("reason") if isinstance(waiting, dict) else None
            if isinstance(reason, str) and reason in STUCK_REASONS:
                return reason
    return ""


POD_STATE_MEMO = 2048
"""Pod objects whose :class:`PodState` is kept (first in, first out): a burst of reconciles reads each pod of a
ModelServing several times, and the entries hold their objects alive, so few are kept."""

_POD_STATES: ObjectMemo[PodState | None] = ObjectMemo(POD_STATE_MEMO)


def _pod_state(ms: str, obj: KubeObject) -> PodState | None:
    return _POD_STATES.get(obj, ms, lambda: _read_pod_state(ms, obj))


def _read_pod_state(ms: str, obj: KubeObject) -> PodState | None:
    identity = _identity(ms, obj)
    metadata = obj.get("metadata", {})
    name = metadata.get("name")
    if identity is None or not isinstance(name, str):
        return None
    group, role, ordinal = identity
    parsed = naming.parse_ordinal(name)
    if parsed is None or naming.pod_name(ms, group, role, ordinal, parsed[1]) != name:
        return None
    raw_status = obj.get("status")
    status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    ready, ready_changed_at = _ready_condition(status)
    labels = _labels(obj)
    uid = str(metadata.get("uid", ""))
    inplace = parse_state(metadata.get("annotations"), uid)
    restarts = _restarts(status)
    if inplace is not None:
        restarts -= excused_restarts(inplace, container_restarts(status))
    return PodState(
        name=name,
        uid=uid,
        group=group,
        role=role,
        role_ordinal=ordinal,
        index=parsed[1],
        revision=str(labels.get(naming.LABEL_REVISION, "")),
        role_hash=str(labels.get(naming.LABEL_ROLE_TEMPLATE_HASH, "")),
        phase=str(status.get("phase", "")),
        ready=ready,
        ready_changed_at=ready_changed_at,
        created_at=parse_timestamp(metadata.get("creationTimestamp")),
        terminating=metadata.get("deletionTimestamp") is not None,
        restarts=restarts,
        cost=deletion_cost(metadata.get("annotations")),
        problem=_problem(status),
        inplace=inplace,
    )


def _instance(groups: dict[int, GroupState], ms: str, group: int, role: str, ordinal: int) -> InstanceState:
    state = groups.setdefault(group, GroupState(group, naming.group_name(ms, group)))
    return state.instances.setdefault((role, ordinal), InstanceState(role, ordinal))


def parse_observed(ms: str, observed: Observed) -> ObservedGroups:
    """Group the observed pods and Services of ModelServing ``ms``.

    Args:
        ms: The ModelServing name.
        observed: The owned objects, as cached.

    Returns:
        The ServingGroups that have at least one recognised pod or Service.
    """
    groups: dict[int, GroupState] = {}
    for obj in observed.pods:
        pod = _pod_state(ms, obj)
        if pod is not None:
            _instance(groups, ms, pod.group, pod.role, pod.role_ordinal).pods[pod.index] = pod
    for obj in observed.services:
        read = _service_state(ms, obj)
        if read is not None:
            identity, service = read
            _instance(groups, ms, *identity).service = service
    return ObservedGroups(groups)


_SERVICE_STATES: ObjectMemo[tuple[tuple[int, str, int], ServiceState] | None] = ObjectMemo(POD_STATE_MEMO // 2)
"""Service objects whose identity and :class:`ServiceState` are kept, as :data:`_POD_STATES` keeps pods'."""


def _service_state(ms: str, obj: KubeObject) -> tuple[tuple[int, str, int], ServiceState] | None:
    return _SERVICE_STATES.get(obj, ms, lambda: _read_service_state(ms, obj))


def _read_service_state(ms: str, obj: KubeObject) -> tuple[tuple[int, str, int], ServiceState] | None:
    identity = _identity(ms, obj)
    metadata = obj.get("metadata", {})
    if identity is None or metadata.get("name") != naming.service_name(ms, *identity):
        return None
    service = ServiceState(
        str(metadata["name"]), str(metadata.get("uid", "")), metadata.get("deletionTimestamp") is not None
    )
    return identity, service
