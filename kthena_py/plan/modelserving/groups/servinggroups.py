"""Plan the ServingGroups of a ModelServing: revisions, creation, scaling, recovery and status.

:func:`plan_servinggroups` is the ModelServing controller's main planner. It guarantees:

* Order of ``creates``: the ControllerRevision of the update revision first (when missing), then groups by
  ordinal, roles in spec order, instances by ordinal; per instance its headless Service, then its workers
  ``1..W``, then its entry pod (the order :mod:`kthena_py.plan.modelserving.groups.recovery` relies on).
* Scaling follows :mod:`kthena_py.plan.modelserving.core.scaling` for groups and for the role instances of each
  group: ordinals are never renumbered, missing ones are filled lowest first, scale-down removes not-ready,
  then cheap, then high ordinals. A removed unit's pods and Service are deleted.
* Recovery follows :mod:`kthena_py.plan.modelserving.groups.recovery` (``recoveryPolicy`` and the restart grace).
* Nothing is created for a unit while one of its pods is terminating: names are reused, so the unit is
  re-created once they are gone. Deletions carry observed UIDs and skip objects already terminating.
* With gang scheduling (``schedulerName: volcano`` and the PodGroup CRD served) no pod of a group is created
  before its PodGroup is observed; the group is skipped and a short requeue asked for (the PodGroup planner
  creates it).
* Which units exist and what each is rendered from come from the targets
  (:mod:`kthena_py.plan.modelserving.core.targets`): wanted ordinals include ``maxSurge`` units during a rollout and
  protect the partition; a missing unit is created at its target revision (the update revision, or the revision
  a partition-protected unit had); missing pods of an existing unit come from its own revision. A revision that
  cannot be resolved is reported (``RevisionUnresolved``) and nothing is created from a guess.
* Outdated units are never taken down here: that is the rollout reconciler's job
  (:mod:`kthena_py.plan.modelserving.rollout.rollout`); this planner re-creates what it took down.
* A ModelServing that names a ModelCache creates nothing (no pod, no Service) while the serving gate
  (``Observed.model_cache``) is closed; deletions (scale-down, recovery) go on, and nothing existing is deleted
  because of the gate. Pods rendered while it is open get the cache's nodes as node affinity when it is node-local.
* A ControllerRevision name collision (same name, other data) stops creation for one reconcile while the status
  raises ``collisionCount`` (a ``RevisionCollision`` Warning says so).
* ControllerRevisions beyond ``revisionHistoryLimit`` that no pod, nor the current or update revision, uses
  are deleted.

Raises :class:`~kthena_py.plan.modelserving.core.plugins.PluginError` when a plugin is unknown or misconfigured.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from kthena_py.api.modelserving import ModelServing, Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import GroupState, InstanceState
from kthena_py.plan.modelserving.core.modelcache import CacheGate
from kthena_py.plan.modelserving.core.plugins import validate_plugins
from kthena_py.plan.modelserving.core.revision import (
    build_controller_revision,
    revisions_to_prune,
    role_template_hash,
)
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.targets import GroupTarget, RoleTargets
from kthena_py.plan.modelserving.core.types import (
    Delete,
    KubeObject,
    MSRef,
    Observed,
    Plan,
    PlannedEvent,
    PodGroupSupport,
)
from kthena_py.plan.modelserving.groups.events import role_message
from kthena_py.plan.modelserving.groups.recovery import DesiredInstance, Recovery, missing_indices, plan_group_recovery
from kthena_py.plan.modelserving.groups.status import compute_status
from kthena_py.plan.modelserving.render.pods import RenderContext, build_pod, build_service
from kthena_py.vocab.owners import controlled_by

__all__ = ["SHORT_REQUEUE_SECONDS", "plan_servinggroups"]

SHORT_REQUEUE_SECONDS = 1.0
"""Requeue delay while waiting for a PodGroup to be observed or a foreign ControllerRevision to go."""


_Kind = Literal["Pod", "Service", "PodGroup", "ControllerRevision"]


@dataclass
class _Builder:
    """Accumulates the decisions of one planning pass."""

    state: PlanningState
    podgroups: frozenset[str]
    creates: list[KubeObject] = field(default_factory=list)
    deletes: dict[tuple[str, str, str], Delete] = field(default_factory=dict)
    events: list[PlannedEvent] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    activity: dict[str, str] = field(default_factory=dict)
    requeue: float | None = None
    refused: frozenset[str] = frozenset()
    foreign: frozenset[str] = frozenset()
    awaiting: list[str] = field(default_factory=list)
    model_cache: CacheGate | None = None

    def requeue_after(self, seconds: float | None) -> None:
        if seconds is not None:
            self.requeue = seconds if self.requeue is None else min(self.requeue, seconds)

    def delete(self, kind: _Kind, name: str, uid: str, reason: str) -> None:
        self.deletes.setdefault((kind, name, uid), Delete(kind, name, uid, reason))

    def delete_instance(self, instance: InstanceState, reason: str) -> bool:
        """Delete an instance's non-terminating pods and its Service; return whether anything was deleted."""
        found = False
        for pod in instance.sorted_pods():
            if not pod.terminating:
                self.delete("Pod", pod.name, pod.uid, reason)
                found = True
        if instance.service is not None and not instance.service.terminating:
            self.delete("Service", instance.service.name, instance.service.uid, reason)
            found = True
        return found

    def event(self, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(PlannedEvent(type_, reason, message))

    def can_create_pods(self, group: int) -> bool:
        """Whether pods of a group may be created now (the gate is open; its PodGroup is observed, or no gang)."""
        gate = self.model_cache
        if gate is not None and not gate.open:
            group_name = naming.group_name(self.state.ref.name, group)
            self.reasons.append(f"ServingGroup {group_name}: waiting for ModelCache {gate.name} ({gate.reason})")
            self.activity.setdefault(group_name, f"waiting for ModelCache {gate.name}")
            return False
        name = naming.podgroup_name(self.state.ref.name, group)
        if not self.state.gang or name in self.podgroups:
            return True
        self.reasons.append(f"ServingGroup {name}: waiting for its PodGroup before creating pods")
        if name not in self.awaiting:
            self.awaiting.append(name)
        self.activity.setdefault(naming.group_name(self.state.ref.name, group), "waiting for PodGroup")
        self.requeue_after(SHORT_REQUEUE_SECONDS)
        return False


def _role_message(role: str, role_id: str, group: str, what: str) -> str:
    return role_message(role, role_id, group, what)


def _create_instance(
    b: _Builder,
    ctx: RenderContext,
    role: Role,
    group: int,
    ordinal: int,
    instance: InstanceState | None,
    skip: Collection[int] = (),
) -> int:
    """Create what an instance lacks (Service, then workers, then entry); return the number of pods created."""
    if ctx.data.model_cache is not None and not ctx.data.model_cache.resolved:
        b.reasons.append(
            f"revision {ctx.revision} names ModelCache {ctx.data.model_cache.cache}, not found: nothing created"
        )
        return 0
    if naming.needs_service(role) and (instance is None or instance.service is None):
        b.creates.append(build_service(b.state.ref, group, role.name, ordinal))
    indices = [*range(1, role.worker_replicas + 1), naming.ENTRY_INDEX]
    if instance is not None:
        indices = missing_indices(instance, role.worker_replicas)
    indices = [index for index in indices if index not in skip]
    if b.foreign:  # names held by another owner's pods: wait for them to go
        indices = [
            i for i in indices if naming.pod_name(b.state.ref.name, group, role.name, ordinal, i) not in b.foreign
        ]
    role_hash = role_template_hash(ctx.data, role)
    b.creates.extend(build_pod(ctx, role, group, ordinal, index, role_hash) for index in indices)
    return len(indices)


def _render_context(state: PlanningState, revision: str, gate: CacheGate | None) -> RenderContext:
    owners = tuple(o for o in (state.ms.metadata or {}).get("ownerReferences") or [] if isinstance(o, dict))
    data = state.revisions[revision]
    nodes = gate.nodes_for(data.model_cache) if gate is not None else None
    return RenderContext(state.ref, revision, data, state.gang, owners, nodes)


def _unresolved(b: _Builder, unit: str, revision: str | None) -> None:
    """Report a unit whose revision cannot be resolved: nothing is created for it."""
    what = f"revision {revision}" if revision else "its revision"
    b.event(
        "Warning",
        "RevisionUnresolved",
        f"Cannot resolve {what} for {unit}: ControllerRevision "
        f"{naming.revision_name(b.state.ref.name, revision or '?')} is missing or unreadable; "
        "template-driven creation is paused for it",
    )
    b.reasons.append(f"{unit}: revision {revision or '?'} cannot be resolved; nothing created")
    b.activity.setdefault(unit.split("/")[0], "revision unresolved")


def _new_group(b: _Builder, ordinal: int, group: GroupState | None) -> None:
    """Create a group that has no live pod (new, or re-created once all its pods are gone)."""
    state = b.state
    name = naming.group_name(state.ref.name, ordinal)
    if group is not None and group.has_pods:
        b.activity[name] = "waiting for terminating pods"
        b.reasons.append(f"ServingGroup {name}: waiting for its terminating pods before re-creating it")
        return
    target = state.targets.groups[ordinal]
    if target.revision is None:
        _unresolved(b, name, _protected_revision(state))
        return
    items = [(rt, r, rt.instances[r]) for rt in target.roles.values() if rt.role.replicas > 0 for r in rt.plan.desired]
    if not items or not b.can_create_pods(ordinal):
        return
    b.event("Normal", "ServingGroupCreating", f"ServingGroup {name} is now Creating")
    b.activity[name] = "creating"
    b.reasons.append(f"create ServingGroup {name} at revision {target.revision}")
    wanted: set[tuple[str, int]] = set()
    for rt, ordinal_r, it in items:
        wanted.add((rt.role.name, ordinal_r))
        role_id = naming.role_id(rt.role.name, ordinal_r)
        if it.revision is None or it.role is None:
            _unresolved(b, f"{name}/{role_id}", _protected_revision(state))
            continue
        instance = group.instances.get((rt.role.name, ordinal_r)) if group is not None else None
        _create_instance(b, _render_context(state, it.revision, b.model_cache), it.role, ordinal, ordinal_r, instance)
        b.event("Normal", "RoleCreating", _role_message(rt.role.name, role_id, name, "Creating"))
    for key, instance in sorted(group.instances.items()) if group is not None else ():
        if key not in wanted:
            b.delete_instance(instance, "not in the template")


def _protected_revision(state: PlanningState) -> str | None:
    previous = state.ms.status.current_revision if state.ms.status is not None else None
    return previous or None


def _apply_recovery(b: _Builder, group: GroupState, recovery: Recovery) -> None:
    for pod in recovery.deletes:
        b.delete("Pod", pod.name, pod.uid, "recovery")
    b.events.extend(recovery.events)
    b.reasons.extend(recovery.reasons)
    b.requeue_after(recovery.requeue_after)
    if recovery.recreating or recovery.group_blocked:
        b.activity[group.name] = "recreating"


def _scale_roles(b: _Builder, group: GroupState, target: GroupTarget) -> list[tuple[RoleTargets, int]]:
    """Delete instances of unknown roles and scaled-away instances; return the wanted ``(role, ordinal)``."""
    for (role_name, ordinal), instance in sorted(group.instances.items()):
        if role_name not in target.roles and b.delete_instance(instance, "role not in the template"):
            b.activity[group.name] = "scaling"
            b.reasons.append(f"delete {group.name}/{naming.role_id(role_name, ordinal)}: role not in its revision")
    desired: list[tuple[RoleTargets, int]] = []
    for rt in target.roles.values():
        role = rt.role
        instances = group.role_instances(role.name)
        for ordinal in rt.plan.remove:
            role_id = naming.role_id(role.name, ordinal)
            b.delete_instance(instances[ordinal], "scale down")
            b.event("Normal", "RoleDeleting", _role_message(role.name, role_id, group.name, "Deleting"))
            b.activity[group.name] = "scaling"
            b.reasons.append(f"scale down: delete role instance {group.name}/{role_id}")
        wanted = set(rt.plan.desired)
        for ordinal, instance in instances.items():
            if not instance.live and ordinal not in wanted and b.delete_instance(instance, "scale down"):
                b.activity.setdefault(group.name, "scaling")
        desired.extend((rt, ordinal) for ordinal in rt.plan.desired)
    return desired


def _live_group(b: _Builder, group: GroupState, now: float) -> None:
    state = b.state
    target = state.targets.groups[group.ordinal]
    if target.data is None:
        # Its revision is unknown: neither scale nor complete it from a guess (the rollout replaces it).
        _unresolved(b, group.name, group.revision())
        return
    desired = _scale_roles(b, group, target)
    items = [DesiredInstance(rt.role.name, r, (rt.instances[r].role or rt.role).worker_replicas) for rt, r in desired]
    spec = state.ms.spec
    recovery = plan_group_recovery(
        spec.recovery_policy,
        spec.template.restart_grace_period_seconds,
        group,
        items,
        now,
        refused=b.refused,
        foreign=b.foreign,
    )
    _apply_recovery(b, group, recovery)
    if recovery.group_blocked:
        return
    for rt, r in desired:
        key = (rt.role.name, r)
        it = rt.instances[r]
        instance = group.instances.get(key)
        if key in recovery.blocked_instances:
            continue
        worker_replicas = (it.role or rt.role).worker_replicas
        skip = {index for (name, rr, index) in recovery.blocked_pods if (name, rr) == key}
        if instance is not None:
            skip |= {index for index, pod in instance.pods.items() if pod.terminating}
        missing = missing_indices(instance, worker_replicas) if instance is not None else [0]
        service_missing = naming.needs_service(it.role or rt.role) and (instance is None or instance.service is None)
        if not service_missing and all(index in skip for index in missing):
            continue
        role_id = naming.role_id(rt.role.name, r)
        if it.revision is None or it.role is None:
            _unresolved(b, f"{group.name}/{role_id}", instance.revision() if instance is not None else None)
            continue
        if not b.can_create_pods(group.ordinal):
            return
        ctx = _render_context(state, it.revision, b.model_cache)
        created = _create_instance(b, ctx, it.role, group.ordinal, r, instance, skip)
        if created:
            fresh = instance is None or not instance.pods
            b.event("Normal", "RoleCreating", _role_message(rt.role.name, role_id, group.name, "Creating"))
            b.activity.setdefault(group.name, "creating" if fresh else "recreating")
            b.reasons.append(f"create {created} pod(s) of {group.name}/{role_id} at revision {ctx.revision}")


def _delete_group(b: _Builder, group: GroupState, reason: str) -> bool:
    found = False
    for key in sorted(group.instances):
        found = b.delete_instance(group.instances[key], reason) or found
    return found


def _revision_history(b: _Builder) -> None:
    state = b.state
    live = {state.revision}
    if state.ms.status is not None and state.ms.status.current_revision:
        live.add(state.ms.status.current_revision)
    live.update(pod.revision for group in state.groups.sorted() for pod in group.pods())
    owned = [
        obj
        for name, obj in sorted(state.revision_objects.items())
        if name.startswith(f"{state.ref.name}-") and _owned_by(obj, state.ref.uid)
    ]
    for obj in revisions_to_prune(owned, live, state.ref.name, state.ms.spec.revision_history_limit):
        metadata = obj.get("metadata", {})
        if metadata.get("deletionTimestamp") is None:
            b.delete("ControllerRevision", str(metadata.get("name")), str(metadata.get("uid", "")), "history limit")


def _owned_by(obj: KubeObject, uid: str) -> bool:
    return controlled_by(obj, uid)


def _ensure_revision(b: _Builder, observed: Observed) -> None:
    state = b.state
    name = naming.revision_name(state.ref.name, state.revision)
    existing = state.revision_objects.get(name)
    if state.data.model_cache is not None and not state.data.model_cache.resolved:
        return  # its ModelCache is not found: nothing can be rendered from this revision, so none is recorded
    if existing is None:
        b.creates.append(build_controller_revision(state.ref, state.data, state.revision, observed.revisions))
        b.reasons.append(f"create ControllerRevision {name}")
    elif state.ref.uid and not _owned_by(existing, state.ref.uid):
        b.reasons.append(f"ControllerRevision {name} belongs to another owner; waiting for it to go")
        b.requeue_after(SHORT_REQUEUE_SECONDS)


def plan_servinggroups(ms: ModelServing, ref: MSRef, observed: Observed, support: PodGroupSupport, now: float) -> Plan:
    """Plan one reconcile of a ModelServing's ServingGroups (see the module docstring).

    Args:
        ms: The ModelServing (parsed, defaulted).
        ref: Its identity (name, namespace, uid, generation).
        observed: The pods, Services, PodGroups and ControllerRevisions it owns, as cached.
        support: PodGroup support of the cluster.
        now: The current time (epoch seconds), for grace periods and condition transitions.

    Returns:
        The plan, including the full desired status.

    Raises:
        PluginError: If a plugin is unknown or misconfigured.
    """
    validate_plugins(ms.spec.plugins)
    state = build_state(ms, ref, observed, support)
    podgroups = frozenset(
        str(pg.get("metadata", {}).get("name"))
        for pg in observed.podgroups
        if pg.get("metadata", {}).get("deletionTimestamp") is None
    )
    b = _Builder(
        state,
        podgroups,
        refused=observed.refused_pods,
        foreign=observed.foreign_pods,
        model_cache=observed.model_cache,
    )
    if state.collision:
        name = naming.revision_name(ref.name, state.revision)
        b.event("Warning", "RevisionCollision", f"ControllerRevision {name} records other data; raising collisionCount")
        return Plan(
            status=compute_status(state, b.activity, now), events=tuple(b.events), reasons=(f"{name} collides",)
        )
    _ensure_revision(b, observed)
    plan = state.targets.plan
    for ordinal in plan.remove:
        group = state.groups.groups[ordinal]
        _delete_group(b, group, "scale down")
        b.event("Normal", "ServingGroupDeleting", f"ServingGroup {group.name} is now Deleting")
        b.activity[group.name] = "deleting"
        b.reasons.append(f"scale down: delete ServingGroup {group.name}")
    desired = set(plan.desired)
    for group in state.groups.sorted():
        leftover = group.ordinal not in desired and group.ordinal not in plan.remove
        if leftover and (_delete_group(b, group, "scale down") or group.has_pods):
            b.activity[group.name] = "deleting"
    for ordinal in plan.desired:
        existing = state.groups.get(ordinal)
        if existing is not None and existing.live:
            _live_group(b, existing, now)
        else:
            _new_group(b, ordinal, existing)
    _revision_history(b)
    return Plan(
        creates=tuple(b.creates),
        deletes=tuple(b.deletes.values()),
        status=compute_status(state, b.activity, now),
        events=tuple(b.events),
        requeue_after=b.requeue,
        reasons=tuple(b.reasons),
        awaiting_podgroups=tuple(b.awaiting),
    )
