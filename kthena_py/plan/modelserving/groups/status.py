"""The ``status`` of a ModelServing, computed from its spec, the observed groups and the plan's activity.

Guarantees:

* ``replicas`` counts live ServingGroups (at least one non-terminating pod); ``availableReplicas`` those where
  every role has its ``replicas`` instances with all pods Running, Ready and not terminating;
  ``updatedReplicas`` the live groups on the update revision; ``currentReplicas`` (as Kthena) the live groups
  on any other revision, except that once every one of ``spec.replicas`` groups is updated and available and no
  ``rollingUpdateConfiguration.partition`` is set it equals ``updatedReplicas`` (so it stays 0 until then).
* ``currentRevision`` is promoted to ``updateRevision`` only when the rollout is complete (every wanted group is
  live, updated and ready, and no surplus group is left) or when there is nothing to compare (a new
  ModelServing); until then it keeps its previous value while a live group is on it or none is outdated, else it
  is the most common outdated revision. Partition-protected groups therefore keep it on the old revision.
* ``collisionCount`` is raised by one when the update revision's name collides with a ControllerRevision that
  records other data.
* ``labelSelector`` selects one pod per group (the entry pod of the first role's instance 0), for the scale
  subresource (HPA/KEDA).
* Conditions (``metav1.Condition``): ``Available`` (True iff ``availableReplicas >= spec.replicas``, with Kthena's
  reason ``AllGroupsReady`` and message ``All Serving groups are ready``) and ``Progressing`` (True while a group
  is being created, recreated, scaled, deleted, waited for or is starting; Kthena's reason ``GroupProgressing``
  and message prefix ``Some groups is progressing: [<ordinals>]``, then what each group is doing).
  ``lastTransitionTime`` is kept from the previous status when a condition's status does not change.
  Only these two types are returned: they are this reconciler's share of the status, applied with its own field
  manager (server-side apply), so conditions of other reconcilers (``UpdateInProgress``...) are never touched.
* :func:`progress_only` tells a change that only reports progress (the counters in :data:`PROGRESS_FIELDS`, a
  condition's message or reason) from one that moves something (a condition's status, ``replicas``, a revision,
  ``observedGeneration``, the selector, ``collisionCount``, a condition that appears): the first may wait a moment
  to be written together with what follows it, the second may not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from kthena_py.api.common import Condition
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import GroupState
from kthena_py.plan.modelserving.core.state import PlanningState
from kthena_py.plan.modelserving.core.types import KubeObject
from kthena_py.vocab.conditions import (
    AVAILABLE,
    PROGRESSING,
    REASON_ALL_GROUPS_READY,
    REASON_GROUP_PROGRESSING,
    REASON_GROUPS_NOT_READY,
    REASON_IDLE,
)
from kthena_py.vocab.times import format_time as vocab_format_time

__all__ = [
    "AVAILABLE",
    "OWNED_CONDITIONS",
    "PROGRESSING",
    "PROGRESS_FIELDS",
    "compute_status",
    "format_time",
    "label_selector",
    "progress_only",
    "rollout_complete",
    "set_condition",
]

OWNED_CONDITIONS = (AVAILABLE, PROGRESSING)
"""The condition types the ServingGroup reconciler owns (others belong to other reconcilers)."""


def format_time(now: float) -> str:
    """Render epoch seconds as an RFC 3339 UTC timestamp with second precision (``2024-01-02T03:04:05Z``)."""
    return vocab_format_time(now)


def label_selector(ms: str, first_role: str) -> str:
    """The scale-subresource selector: the entry pod of instance 0 of the first role, one per group.

    The ``key=value`` terms are sorted as whole strings, the way Kthena renders its label set, so ``role-id=``
    comes before ``role=`` (``-`` sorts before ``=``) and the string equals Kthena's byte for byte.
    """
    return ",".join(
        sorted(
            [
                f"{naming.LABEL_ENTRY}={naming.ENTRY_LABEL_VALUE}",
                f"{naming.LABEL_NAME}={ms}",
                f"{naming.LABEL_ROLE}={first_role}",
                f"{naming.LABEL_ROLE_ID}={naming.role_id(first_role, 0)}",
            ]
        )
    )


def set_condition(
    previous: list[Condition] | None,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int,
    now: float,
) -> KubeObject:
    """Build a condition, keeping the previous ``lastTransitionTime`` when its status is unchanged."""
    value = "True" if status else "False"
    old = next((c for c in previous or [] if c.type == type_), None)
    since = old.last_transition_time if old is not None and old.status == value else format_time(now)
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def _group_revision(state: PlanningState, group: GroupState) -> str:
    target = state.target(group.ordinal)
    if target is not None and target.updated:
        return state.revision
    if state.targets.role_granularity:
        outdated = [
            pod.revision
            for inst in group.instances.values()
            if inst.live
            for pod in inst.pods.values()
            if not pod.terminating and pod.revision != state.revision
        ]
        return Counter(outdated).most_common(1)[0][0] if outdated else state.revision
    return group.revision(state.revision) or ""


def rollout_complete(state: PlanningState) -> bool:
    """Whether every wanted group is live, updated and ready, and no surplus group is left."""
    live = [group for group in state.groups.sorted() if group.live]
    targets = state.targets.groups
    return (
        len(live) == len(targets) == max(state.ms.spec.replicas, 0)
        and all(t.updated and t.ready for t in targets.values())
        and {g.ordinal for g in live} == set(targets)
    )


def _current_revision(state: PlanningState, previous: str | None, outdated: Counter[str]) -> str:
    if rollout_complete(state) or (not previous and not outdated):
        return state.revision
    if previous and (previous in outdated or not outdated):
        return previous
    top = max(outdated.values())
    return min(rev for rev, count in outdated.items() if count == top)


def _current_replicas(state: PlanningState, live: int, updated: int, available: int, outdated: int) -> int:
    rollout = state.ms.spec.rollout_strategy
    config = rollout.rolling_update_configuration if rollout is not None else None
    if (config is None or config.partition is None) and updated == available == live == state.ms.spec.replicas:
        return updated
    return outdated


def _names(names: list[str]) -> str:
    return ", ".join(names)


def compute_status(state: PlanningState, activity: Mapping[str, str], now: float) -> KubeObject:
    """Compute the part of ``status`` the ServingGroup reconciler owns.

    Args:
        state: The planning state (the observed groups, before the plan is applied).
        activity: Group name to what the plan does with it (``creating``, ``recreating``, ``scaling``,
            ``deleting``, ``waiting``...).
        now: The current time (epoch seconds), for condition transitions.

    Returns:
        The ``status`` fields it owns, in the API's camelCase (conditions: ``Available`` and ``Progressing``).
    """
    ms = state.ms
    previous = ms.status
    live = [group for group in state.groups.sorted() if group.live]
    ready = {group.ordinal for group in live if state.group_ready(group)}
    revisions = Counter(_group_revision(state, group) for group in live)
    outdated = Counter({rev: n for rev, n in revisions.items() if rev != state.revision})
    current = _current_revision(state, previous.current_revision if previous else None, outdated)
    desired = tuple(state.targets.plan.desired)
    not_ready = [naming.group_name(state.ref.name, g) for g in desired if g not in ready]
    available = len(ready)
    generation = state.ref.generation or ms.generation
    conditions = previous.conditions if previous else None
    if available >= ms.spec.replicas:
        available_condition = set_condition(
            conditions, AVAILABLE, True, REASON_ALL_GROUPS_READY, "All Serving groups are ready", generation, now
        )
    else:
        message = f"{available}/{ms.spec.replicas} ServingGroups available; not ready: {_names(not_ready)}"
        available_condition = set_condition(
            conditions, AVAILABLE, False, REASON_GROUPS_NOT_READY, message, generation, now
        )
    progress = dict(activity)
    for name in not_ready:
        progress.setdefault(name, "starting")
    if progress:
        items = sorted(progress.items(), key=_by_ordinal)
        ordinals = " ".join(str(_by_ordinal(item)[0]) for item in items)
        detail = _names([f"{name} ({what})" for name, what in items])
        message = f"Some groups is progressing: [{ordinals}]; {detail}"
        progressing = set_condition(conditions, PROGRESSING, True, REASON_GROUP_PROGRESSING, message, generation, now)
    else:
        message = "No ServingGroup is being created, recreated or scaled"
        progressing = set_condition(conditions, PROGRESSING, False, REASON_IDLE, message, generation, now)
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "replicas": len(live),
        "currentReplicas": _current_replicas(
            state, len(live), revisions.get(state.revision, 0), available, sum(outdated.values())
        ),
        "updatedReplicas": revisions.get(state.revision, 0),
        "availableReplicas": available,
        "currentRevision": current,
        "updateRevision": state.revision,
        "labelSelector": label_selector(state.ref.name, ms.spec.template.roles[0].name),
        "conditions": [available_condition, progressing],
    }
    count = (previous.collision_count if previous is not None else None) or 0
    if state.collision:
        count += 1
    if count or (previous is not None and previous.collision_count is not None):
        status["collisionCount"] = count
    return status


PROGRESS_FIELDS = frozenset({"availableReplicas", "updatedReplicas", "currentReplicas"})
"""The counters of the status that move one ServingGroup at a time while a fleet starts or rolls."""

_CONDITION_IDENTITY = ("status", "observedGeneration", "lastTransitionTime")
"""What a condition must keep for a change to it to be progress only (its reason and message may move)."""


def progress_only(current: Mapping[str, Any], share: Mapping[str, Any]) -> bool:
    """Whether writing ``share`` over the status ``current`` only reports progress (see the module docstring).

    True also when ``share`` is already held; the caller asks only about a share that differs.
    """
    for key, value in share.items():
        if key == "conditions":
            have = {c.get("type"): c for c in current.get("conditions") or [] if isinstance(c, dict)}
            for condition in value or []:
                old = have.get(condition.get("type"))
                if old is None or any(old.get(k) != condition.get(k) for k in _CONDITION_IDENTITY):
                    return False
        elif key not in PROGRESS_FIELDS and current.get(key) != value:
            return False
    return True


def _by_ordinal(item: tuple[str, str]) -> tuple[int, str]:
    parsed = naming.parse_ordinal(item[0])
    return (parsed[1] if parsed else -1, item[0])
