"""The ``status`` of a ModelServing, computed from its spec, the observed groups and the plan's activity.

Guarantees:

* ``replicas`` counts live ServingGroups (at least one non-terminating pod); ``availableReplicas`` those where
  every role has its ``replicas`` instances with all pods Running, Ready and not terminating;
  ``updatedReplicas`` / ``currentReplicas`` the live groups on the update / current revision.
* ``currentRevision`` keeps its previous value while a live group is still on it, becomes ``updateRevision``
  once no live group is outdated, and otherwise is the most common outdated revision.
* ``labelSelector`` selects one pod per group (the entry pod of the first role's instance 0), for the scale
  subresource (HPA/KEDA).
* Conditions (``metav1.Condition``): ``Available`` (True iff ``availableReplicas >= spec.replicas``) and
  ``Progressing`` (True while a group is being created, recreated, scaled, deleted, waited for or is starting).
  ``lastTransitionTime`` is kept from the previous status when a condition's status does not change.
  ``DisruptionAllowed`` (owned by the eviction budget reconciler) is carried over unchanged; other condition
  types are dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kthena_py.api.common import Condition, to_dict
from kthena_py.plan.modelserving import naming
from kthena_py.plan.modelserving.eviction.report import CONDITION_TYPE as DISRUPTION_ALLOWED
from kthena_py.plan.modelserving.state import PlanningState
from kthena_py.plan.modelserving.types import KubeObject

__all__ = ["AVAILABLE", "PROGRESSING", "compute_status", "format_time", "label_selector", "set_condition"]

AVAILABLE = "Available"
PROGRESSING = "Progressing"


def format_time(now: float) -> str:
    """Render epoch seconds as an RFC 3339 UTC timestamp with second precision (``2024-01-02T03:04:05Z``)."""
    return datetime.fromtimestamp(int(now), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def label_selector(ms: str, first_role: str) -> str:
    """The scale-subresource selector: the entry pod of instance 0 of the first role, one per group."""
    return ",".join(
        [
            f"{naming.LABEL_ENTRY}={naming.ENTRY_LABEL_VALUE}",
            f"{naming.LABEL_NAME}={ms}",
            f"{naming.LABEL_ROLE}={first_role}",
            f"{naming.LABEL_ROLE_ID}={naming.role_id(first_role, 0)}",
        ]
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


def _current_revision(previous: str | None, update: str, outdated: Counter[str]) -> str:
    if not outdated:
        return update
    if previous and previous in outdated:
        return previous
    top = max(outdated.values())
    return min(rev for rev, count in outdated.items() if count == top)


def _names(names: list[str]) -> str:
    return ", ".join(names)


def compute_status(state: PlanningState, activity: Mapping[str, str], now: float) -> KubeObject:
    """Compute the full desired ``status``.

    Args:
        state: The planning state (the observed groups, before the plan is applied).
        activity: Group name to what the plan does with it (``creating``, ``recreating``, ``scaling``,
            ``deleting``, ``waiting``...).
        now: The current time (epoch seconds), for condition transitions.

    Returns:
        The ``status`` object, in the API's camelCase.
    """
    ms = state.ms
    previous = ms.status
    live = [group for group in state.groups.sorted() if group.live]
    ready = {group.ordinal for group in live if state.group_ready(group)}
    revisions = Counter(state.group_revision(group)[0] for group in live)
    outdated = Counter({rev: n for rev, n in revisions.items() if rev != state.revision})
    current = _current_revision(previous.current_revision if previous else None, state.revision, outdated)
    desired = state.group_plan.desired
    not_ready = [naming.group_name(state.ref.name, g) for g in desired if g not in ready]
    available = len(ready)
    generation = state.ref.generation or ms.generation
    conditions = previous.conditions if previous else None
    if available >= ms.spec.replicas:
        available_condition = set_condition(
            conditions, AVAILABLE, True, "AllGroupsReady", "All ServingGroups are ready", generation, now
        )
    else:
        message = f"{available}/{ms.spec.replicas} ServingGroups available; not ready: {_names(not_ready)}"
        available_condition = set_condition(conditions, AVAILABLE, False, "GroupsNotReady", message, generation, now)
    progress = dict(activity)
    for name in not_ready:
        progress.setdefault(name, "starting")
    if progress:
        detail = _names([f"{name} ({what})" for name, what in sorted(progress.items(), key=_by_ordinal)])
        progressing = set_condition(
            conditions, PROGRESSING, True, "GroupsProgressing", f"ServingGroups progressing: {detail}", generation, now
        )
    else:
        message = "No ServingGroup is being created, recreated or scaled"
        progressing = set_condition(conditions, PROGRESSING, False, "Idle", message, generation, now)
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "replicas": len(live),
        "currentReplicas": revisions.get(current, 0),
        "updatedReplicas": revisions.get(state.revision, 0),
        "availableReplicas": available,
        "currentRevision": current,
        "updateRevision": state.revision,
        "labelSelector": label_selector(state.ref.name, ms.spec.template.roles[0].name),
        "conditions": [available_condition, progressing, *_carried(conditions)],
    }
    if previous is not None and previous.collision_count is not None:
        status["collisionCount"] = previous.collision_count
    return status


def _carried(conditions: list[Condition] | None) -> list[KubeObject]:
    # Written by another reconciler with its own field manager (server-side apply). This writer sends the whole
    # list (merge patch), so it must send those back as they are, or it would drop them.
    return [to_dict(c, with_defaults=False) for c in conditions or [] if c.type == DISRUPTION_ALLOWED]


def _by_ordinal(item: tuple[str, str]) -> tuple[int, str]:
    parsed = naming.parse_ordinal(item[0])
    return (parsed[1] if parsed else -1, item[0])
