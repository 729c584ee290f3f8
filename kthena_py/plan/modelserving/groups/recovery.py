"""Recovery of failed pods by ``spec.recoveryPolicy`` (level-based: decided from the observed pods and ``now``).

Policies (as the API reference documents them):

* ``ServingGroupRecreate``: when any pod of a live group is recreated (terminating, or missing) or fails
  (below), every pod of the group is deleted; the group is re-created, whole, once all of them are gone.
* ``RoleRecreate``: the same, scoped to the role instance.
* ``None``: Deployment-like. A Failed (or Succeeded) pod is deleted alone and re-created alone; a deleted pod is
  re-created alone; container restarts are left to the kubelet.

A pod is *unhealthy* when it is not terminating and its phase is terminal (``Failed``/``Succeeded``) or, under
the two Recreate policies, when it has restarted (``restartCount`` > 0 in a container or init container) and is
not Ready, or when an in-place update of it missed ``progressDeadlineSeconds`` (under every policy: ``None`` replaces
the pod alone). Restarts an in-place update explains are never counted (:mod:`kthena_py.plan.modelserving.core.groups`).
It becomes a *failure* only once it has been unhealthy for ``restartGracePeriodSeconds``, measured
from its ``Ready`` condition's ``lastTransitionTime`` (else its creation time; with neither, immediately). A pod
that recovers within the grace period is left alone; ``requeue_after`` is the shortest remaining grace.

Guarantees:

* Deletions only name pods that are observed and not already terminating, with their observed UIDs, so a
  replacement is never deleted and a unit is never deleted twice for one failure: once its pods are
  terminating the unit is *blocked* (nothing is created for it) until they are gone, then it is created anew.
* Missing pods. The pods of a role instance are created together, and the applier waits until the cache
  shows every creation before the next reconcile, so a *partial* instance (entry present and a worker
  missing, or the reverse) is a failure, because a pod was lost, unless every missing pod is
  *unavailable*: its creation was refused by the API server (``refused``; retrying it is paced by the
  applier) or its name is held by another owner's pod (``foreign``). Such an instance is completed, never
  torn down: recreating it cannot make the refused part succeed, and tearing it down only loops. A crash
  in the middle of a creation can still leave an unreported partial instance; recreating it costs one
  extra round, while keeping workers whose entry pod was lost would leave them attached to a dead entry.
  An instance with no pod at all is simply not created yet.
* Pods whose name is held by another owner's pod are never created (``blocked_pods``); the planner waits
  until the holder is gone.
* ``ServingGroupRecreate`` and a live group with a desired instance that has no pod at all: a failure, unless it
  is a role scale-up (the role has no live instance in the group, i.e. it is scaled up from zero, or this
  ordinal is above all its live ones) or all its pods are unavailable. A role scaled up from zero adds its
  instances without recreating the group; an interrupted group creation costs one group recreation.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kthena_py.api.modelserving import RecoveryPolicy
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import GroupState, InstanceState, PodState
from kthena_py.plan.modelserving.core.types import PlannedEvent
from kthena_py.vocab.pods import TERMINAL_PHASES

__all__ = [
    "DesiredInstance",
    "Recovery",
    "grace_remaining",
    "instance_failure",
    "missing_indices",
    "plan_group_recovery",
    "pod_name_in",
    "unhealthy_cause",
]

_TERMINAL = TERMINAL_PHASES


@dataclass(frozen=True)
class DesiredInstance:
    """A role instance that should exist in a group, with the ``workerReplicas`` it is rendered with."""

    role: str
    ordinal: int
    worker_replicas: int


@dataclass(frozen=True)
class Recovery:
    """The recovery decisions for one live ServingGroup."""

    deletes: tuple[PodState, ...] = ()
    group_blocked: bool = False
    """Create nothing in this group (it is being recreated)."""
    blocked_instances: frozenset[tuple[str, int]] = frozenset()
    """``(role, ordinal)`` of instances to create nothing for."""
    blocked_pods: frozenset[tuple[str, int, int]] = frozenset()
    """``(role, ordinal, index)`` of pods not to create yet (their predecessor is terminating)."""
    events: tuple[PlannedEvent, ...] = ()
    reasons: tuple[str, ...] = ()
    requeue_after: float | None = None
    recreating: bool = False
    """Whether anything of the group is being recreated (for the Progressing condition)."""


def unhealthy_cause(pod: PodState, policy: RecoveryPolicy) -> str | None:
    """Why a pod is unhealthy under ``policy``, or ``None`` when it is not (terminating pods never are)."""
    if pod.terminating:
        return None
    if pod.phase in _TERMINAL:
        return f"pod {pod.name} is {pod.phase}"
    if pod.inplace_failed:
        return f"pod {pod.name}: {pod.inplace_failed}"
    if policy != "None" and pod.restarts > 0 and not pod.ready:
        return f"pod {pod.name} restarted {pod.restarts} time(s) and is not Ready"
    return None


def grace_remaining(pod: PodState, grace_seconds: int, now: float) -> float:
    """Seconds left before an unhealthy pod counts as failed (``<= 0``: it has failed)."""
    since = pod.ready_changed_at if pod.ready_changed_at is not None else pod.created_at
    if since is None or grace_seconds <= 0:
        return 0.0
    return since + grace_seconds - now


def missing_indices(instance: InstanceState, worker_replicas: int) -> list[int]:
    """Indices in ``0..worker_replicas`` with no observed pod, workers first and the entry last."""
    order = [*range(1, worker_replicas + 1), naming.ENTRY_INDEX]
    return [index for index in order if index not in instance.pods]


def pod_name_in(group: GroupState, role: str, ordinal: int, index: int) -> str:
    """The name of pod ``index`` of instance ``role``-``ordinal`` in ``group``."""
    return f"{group.name}-{naming.role_id(role, ordinal)}-{index}"


def instance_failure(
    instance: InstanceState,
    worker_replicas: int,
    policy: RecoveryPolicy,
    grace_seconds: int,
    now: float,
    unavailable: Collection[str] = (),
    group: GroupState | None = None,
) -> tuple[str | None, float | None]:
    """Decide whether a role instance with pods has failed (for the two Recreate policies).

    Args:
        instance: The observed instance (at least one pod).
        worker_replicas: Its ``workerReplicas``.
        policy: The recovery policy.
        grace_seconds: ``restartGracePeriodSeconds``.
        now: The current time (epoch seconds).
        unavailable: Names of pods that cannot be created now (refused, or held by another owner); their
            absence is not a failure.
        group: The instance's group (needed to name its missing pods when ``unavailable`` is given).

    Returns:
        ``(cause, None)`` for a failure, else ``(None, remaining)`` where ``remaining`` is the shortest grace
        left among unhealthy pods (``None`` when all are healthy).
    """
    terminating = [pod.name for pod in instance.sorted_pods() if pod.terminating]
    if terminating:
        return f"pod {terminating[0]} was deleted", None
    missing = missing_indices(instance, worker_replicas)
    if unavailable and group is not None:
        missing = [i for i in missing if pod_name_in(group, instance.role, instance.ordinal, i) not in unavailable]
    if missing and instance.pods:
        has_entry = naming.ENTRY_INDEX in instance.pods
        what = "worker pod" if has_entry else "entry pod"
        index = missing[0] if has_entry else naming.ENTRY_INDEX
        if has_entry or any(i in instance.pods for i in range(1, worker_replicas + 1)):
            return f"{what} with index {index} is missing", None
    remaining: float | None = None
    for pod in instance.sorted_pods():
        cause = unhealthy_cause(pod, policy)
        if cause is None or pod.index > worker_replicas:
            continue
        left = grace_remaining(pod, grace_seconds, now)
        if left <= 0:
            return cause, None
        remaining = left if remaining is None else min(remaining, left)
    return None, remaining


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _role_event(group: GroupState, instance: InstanceState, cause: str) -> PlannedEvent:
    role_id = naming.role_id(instance.role, instance.ordinal)
    message = f"Role {instance.role}/{role_id} in ServingGroup {group.name} is now Recreating: {cause}"
    return PlannedEvent("Warning", "RoleRecreating", message)


def _scale_up_slot(group: GroupState, item: DesiredInstance) -> bool:
    """Whether a desired instance without pods is new: its role has no live instance, or it is above them."""
    live = [ordinal for ordinal, inst in group.role_instances(item.role).items() if inst.live]
    return not live or item.ordinal > max(live)


def _all_unavailable(group: GroupState, item: DesiredInstance, unavailable: Collection[str]) -> bool:
    indices = [naming.ENTRY_INDEX, *range(1, item.worker_replicas + 1)]
    return bool(unavailable) and all(pod_name_in(group, item.role, item.ordinal, i) in unavailable for i in indices)


def _group_failure(
    group: GroupState,
    desired: Sequence[DesiredInstance],
    grace_seconds: int,
    now: float,
    unavailable: Collection[str],
) -> tuple[str | None, float | None]:
    remaining: float | None = None
    for item in desired:
        instance = group.instances.get((item.role, item.ordinal))
        if instance is None or not instance.pods:
            if not _scale_up_slot(group, item) and not _all_unavailable(group, item, unavailable):
                return f"role instance {naming.role_id(item.role, item.ordinal)} is missing", None
            continue
        cause, left = instance_failure(
            instance, item.worker_replicas, "ServingGroupRecreate", grace_seconds, now, unavailable, group
        )
        if cause is not None:
            return f"{naming.role_id(item.role, item.ordinal)}: {cause}", None
        remaining = _min(remaining, left)
    return None, remaining


def _stray(group: GroupState, desired: Sequence[DesiredInstance]) -> list[PodState]:
    """Pods of desired instances whose index is beyond the instance's ``workerReplicas``."""
    stray: list[PodState] = []
    for item in desired:
        instance = group.instances.get((item.role, item.ordinal))
        if instance is not None:
            stray.extend(p for p in instance.sorted_pods() if p.index > item.worker_replicas and not p.terminating)
    return stray


def _foreign_blocked(
    group: GroupState, desired: Sequence[DesiredInstance], foreign: Collection[str]
) -> set[tuple[str, int, int]]:
    """``(role, ordinal, index)`` of desired pods whose name is held by another owner's pod."""
    if not foreign:
        return set()
    return {
        (item.role, item.ordinal, index)
        for item in desired
        for index in range(item.worker_replicas + 1)
        if pod_name_in(group, item.role, item.ordinal, index) in foreign
    }


def plan_group_recovery(
    policy: RecoveryPolicy,
    grace_seconds: int,
    group: GroupState,
    desired: Sequence[DesiredInstance],
    now: float,
    *,
    refused: Collection[str] = (),
    foreign: Collection[str] = (),
) -> Recovery:
    """Decide the recovery actions for one live, desired ServingGroup.

    Args:
        policy: ``spec.recoveryPolicy``.
        grace_seconds: ``spec.template.restartGracePeriodSeconds``.
        group: The observed group (live: at least one non-terminating pod).
        desired: The role instances that should exist in it (instances being scaled away are not listed).
        now: The current time (epoch seconds).
        refused: Names of pods whose last creation was refused by the API server.
        foreign: Names of pods held by another owner's pods.

    Returns:
        The decisions (see :class:`Recovery`).
    """
    unavailable = frozenset(refused) | frozenset(foreign)
    held = _foreign_blocked(group, desired, foreign)
    stray = _stray(group, desired)
    reasons = [f"delete {pod.name}: index beyond workerReplicas" for pod in stray]
    if policy == "ServingGroupRecreate":
        cause, remaining = _group_failure(group, desired, grace_seconds, now, unavailable)
        if cause is None:
            return Recovery(
                deletes=tuple(stray),
                reasons=tuple(reasons),
                requeue_after=remaining,
                blocked_pods=frozenset(held),
            )
        doomed = [pod for pod in group.pods() if not pod.terminating]
        message = f"ServingGroup {group.name} is now Recreating: {cause}"
        return Recovery(
            deletes=tuple(doomed),
            group_blocked=True,
            events=(PlannedEvent("Warning", "ServingGroupRecreating", message),) if doomed else (),
            reasons=(f"recreate ServingGroup {group.name}: {cause}",),
            recreating=True,
        )
    deletes = list(stray)
    events: list[PlannedEvent] = []
    blocked_instances: set[tuple[str, int]] = set()
    blocked_pods: set[tuple[str, int, int]] = set(held)
    requeue: float | None = None
    for item in desired:
        instance = group.instances.get((item.role, item.ordinal))
        if instance is None or not instance.pods:
            continue
        if policy == "RoleRecreate":
            cause, left = instance_failure(
                instance, item.worker_replicas, policy, grace_seconds, now, unavailable, group
            )
            requeue = _min(requeue, left)
            if cause is None:
                continue
            blocked_instances.add((item.role, item.ordinal))
            doomed = [pod for pod in instance.sorted_pods() if not pod.terminating]
            deletes.extend(doomed)
            if doomed:
                events.append(_role_event(group, instance, cause))
                reasons.append(f"recreate role {group.name}/{naming.role_id(item.role, item.ordinal)}: {cause}")
            continue
        for pod in instance.sorted_pods():
            if pod.terminating:
                blocked_pods.add((item.role, item.ordinal, pod.index))
                continue
            cause = unhealthy_cause(pod, policy)
            if cause is None or pod.index > item.worker_replicas:
                continue
            left = grace_remaining(pod, grace_seconds, now)
            if left > 0:
                requeue = _min(requeue, left)
                continue
            deletes.append(pod)
            blocked_pods.add((item.role, item.ordinal, pod.index))
            role_id = naming.role_id(item.role, item.ordinal)
            message = (
                f"Pod {pod.name} of Role {item.role}/{role_id} in ServingGroup {group.name} is now Recreating: {cause}"
            )
            events.append(PlannedEvent("Warning", "PodRecreating", message))
            reasons.append(f"recreate pod {pod.name}: {cause}")
    return Recovery(
        deletes=tuple(deletes),
        blocked_instances=frozenset(blocked_instances),
        blocked_pods=frozenset(blocked_pods),
        events=tuple(events),
        reasons=tuple(reasons),
        requeue_after=requeue,
        recreating=bool(events),
    )
