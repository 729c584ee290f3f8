"""The planning state shared by the ServingGroup, PodGroup and status planners.

Guarantees:

* :func:`build_state` is a pure function of ``(ms, ref, observed, support)``; the ServingGroup and PodGroup
  planners both call it, so they always agree on the revision, on each group's revision and templates, and on
  the set of desired ServingGroups (``group_plan``).
* Revision resolution: a revision string resolves to the current spec when it is the update revision, else to
  the data of the observed ControllerRevision ``<ms>-<revision>`` owned by this ModelServing; anything that cannot
  be resolved falls back to the current spec and revision (documented fallback: pods are then rendered from the
  current templates).
* Effective roles: a revision's roles with ``replicas`` taken from the current spec when it still has a role of
  that name (role scaling applies to every group), else the recorded replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kthena_py.api.modelserving import ModelServing, Role
from kthena_py.plan.modelserving import naming
from kthena_py.plan.modelserving.groups import GroupState, InstanceState, ObservedGroups, parse_observed
from kthena_py.plan.modelserving.pods import needs_service
from kthena_py.plan.modelserving.revision import (
    RevisionData,
    parse_controller_revision,
    revision_data,
    revision_hash,
)
from kthena_py.plan.modelserving.scaling import OrdinalPlan, UnitScore, plan_ordinals
from kthena_py.plan.modelserving.types import KubeObject, MSRef, Observed, PodGroupSupport

__all__ = ["PlanningState", "build_state"]


@dataclass(frozen=True)
class PlanningState:
    """Everything a ModelServing planner derives from its inputs before deciding anything."""

    ms: ModelServing
    ref: MSRef
    revision: str
    """The update revision (hash of the current spec)."""
    data: RevisionData
    """The pod-shaping part of the current spec."""
    revisions: dict[str, RevisionData]
    """Resolvable revisions (the current one included), by revision string."""
    revision_objects: dict[str, KubeObject]
    """Observed ControllerRevisions by name."""
    groups: ObservedGroups
    group_plan: OrdinalPlan
    gang: bool

    def resolve(self, revision: str | None) -> tuple[str, RevisionData]:
        """Return ``(revision, data)`` for a revision label, falling back to the update revision."""
        if revision and revision in self.revisions:
            return revision, self.revisions[revision]
        return self.revision, self.data

    def effective_roles(self, data: RevisionData) -> tuple[Role, ...]:
        """The roles of ``data`` with the current spec's role ``replicas`` where the role still exists."""
        current = {role.name: role.replicas for role in self.ms.spec.template.roles}
        return tuple(
            role.model_copy(update={"replicas": current[role.name]})
            if role.name in current and current[role.name] != role.replicas
            else role
            for role in data.roles
        )

    def group_revision(self, group: GroupState | None) -> tuple[str, RevisionData]:
        """The revision a group is on (most common pod label) and its data; new groups use the update revision."""
        return self.resolve(group.revision(self.revision) if group is not None else None)

    def instance_workers(self, instance: InstanceState, fallback: Role) -> int:
        """The ``workerReplicas`` an instance was rendered with (from its own revision, else ``fallback``)."""
        _, data = self.resolve(instance.revision())
        role = data.role(instance.role)
        return (role or fallback).worker_replicas

    def group_ready(self, group: GroupState) -> bool:
        """Whether every role of the group has ``replicas`` live instances that are complete and ready.

        An instance whose role needs a headless Service is ready only once that Service exists too.
        """
        _, data = self.group_revision(group)
        for role in self.effective_roles(data):
            ready = sum(
                1
                for instance in group.role_instances(role.name).values()
                if instance.complete_and_ready(self.instance_workers(instance, role))
                and (instance.service is not None or not needs_service(role))
            )
            if ready < role.replicas:
                return False
        return True


def _owned(obj: KubeObject, uid: str) -> bool:
    if not uid:
        return True
    owners = obj.get("metadata", {}).get("ownerReferences") or []
    return any(isinstance(o, dict) and o.get("controller") and o.get("uid") == uid for o in owners)


def build_state(ms: ModelServing, ref: MSRef, observed: Observed, support: PodGroupSupport) -> PlanningState:
    """Derive the planning state.

    Args:
        ms: The ModelServing (parsed, defaulted).
        ref: Its identity.
        observed: The objects it owns.
        support: PodGroup support of the cluster.

    Returns:
        The state both planners work from.
    """
    data = revision_data(ms.spec)
    revision = revision_hash(data)
    objects: dict[str, KubeObject] = {}
    revisions: dict[str, RevisionData] = {}
    prefix = f"{ref.name}-"
    for obj in observed.revisions:
        name = obj.get("metadata", {}).get("name")
        if not isinstance(name, str):
            continue
        objects[name] = obj
        if not name.startswith(prefix) or not _owned(obj, ref.uid):
            continue
        parsed = parse_controller_revision(obj, ms.spec.scheduler_name)
        if parsed is not None:
            revisions[name[len(prefix) :]] = parsed
    revisions[revision] = data
    groups = parse_observed(ref.name, observed)
    state = PlanningState(
        ms=ms,
        ref=ref,
        revision=revision,
        data=data,
        revisions=revisions,
        revision_objects=objects,
        groups=groups,
        group_plan=OrdinalPlan((), (), ()),
        gang=naming.gang_applies(ms.spec.scheduler_name, support),
    )
    live = [UnitScore(group.ordinal, state.group_ready(group), group.cost) for group in groups.sorted() if group.live]
    return replace(state, group_plan=plan_ordinals(live, ms.spec.replicas))
