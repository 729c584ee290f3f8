"""Target revisions: the one step that decides, for every ServingGroup and role instance, what it should be.

:func:`build_targets` is a pure function of the spec, the resolvable revisions, the observed groups and the
previous status. The ServingGroup planner (what to create), the PodGroup planner (gang shape), the rollout planner
(what to take down) and the status all read its result, so they can never disagree.

Guarantees:

* Granularity follows ``rolloutStrategy.type``. Under ``ServingGroupRollingUpdate`` a group is the unit: it is
  *updated* when all its live pods carry the update revision (or a revision whose recorded data is the same, e.g.
  written by Kthena's Go controller, so taking over from it rolls nothing), its missing parts are rendered from the
  revision the group is on (a group is never mixed), and the group-level budget (``rollingUpdateConfiguration``)
  applies. Under ``RoleRollingUpdate`` a role instance is the unit: it is *updated* when its pods carry the update
  revision's role template hash (or their revision records the same role template), each role uses its own
  ``maxUnavailable`` / ``maxSurge`` / ``partition`` in every group, and the roles of every group are the spec's
  (roles no longer in the spec are scaled away).
* Wanted ordinals come from :func:`~kthena_py.plan.modelserving.core.rolling.plan_units` (surge and partition
  included) at both levels.
* Where a missing unit is created from: the update revision, unless it is partition-protected while a rollout is
  in progress, in which case it comes back on the current revision (``status.currentRevision``) as it was before.
  An instance that still has pods is completed from its own revision (or from the update revision when its
  template hash proves it is the same template).
* A revision that cannot be resolved (its ControllerRevision is gone or unreadable) is never replaced by the
  current spec for part of a unit: the target says ``revision=None`` and lists it in ``unresolved``, and the
  planners create nothing from it (the ServingGroup planner emits ``RevisionUnresolved``).
* Each observed group is decided once: a wanted group whose first-pass target came from the same inputs (not
  partition-protected, its revision resolved, no unresolvable revision met) takes that target, which equals what
  deciding it again would give (property-tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kthena_py.api.modelserving import ModelServing, Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.disruption import Disrupted
from kthena_py.plan.modelserving.core.groups import GroupState, InstanceState, ObservedGroups
from kthena_py.plan.modelserving.core.revision import RevisionData, role_template_hash, stored_revision_hash
from kthena_py.plan.modelserving.core.rolling import Budget, UnitPlan, UnitView, plan_units, resolve_budget

__all__ = [
    "Disrupted",
    "GroupTarget",
    "InstanceTarget",
    "RoleTargets",
    "Targets",
    "build_targets",
    "effective_roles",
]


def _never(_group: str, _role_id: str | None) -> bool:
    return False


_NO_ROLLOUT = Budget(max_unavailable=1, max_surge=0, partition=0)

REUSE_OBSERVED_TARGETS = True
"""A wanted group that was observed takes its first-pass target when that was computed from the same inputs
(unprotected, its revision resolved); tests turn this off to check the reuse against computing it again."""


@dataclass(frozen=True)
class InstanceTarget:
    """What one wanted role instance should be rendered from."""

    revision: str | None
    """The revision its missing pods are rendered from (``None``: unresolvable, create nothing)."""
    role: Role | None
    """The role definition of that revision (current ``replicas``)."""
    updated: bool
    protected: bool


@dataclass(frozen=True)
class RoleTargets:
    """One role within one group."""

    role: Role
    """The role as the group uses it (its revision's template, the spec's replicas)."""
    budget: Budget
    plan: UnitPlan
    views: tuple[UnitView, ...]
    instances: dict[int, InstanceTarget]
    """Targets of the wanted instance ordinals."""


@dataclass(frozen=True)
class GroupTarget:
    """One wanted ServingGroup."""

    ordinal: int
    revision: str | None
    """The revision the group is on or will be created at (``None``: unresolvable)."""
    data: RevisionData | None
    roles: dict[str, RoleTargets]
    updated: bool
    ready: bool
    protected: bool


@dataclass(frozen=True)
class Targets:
    """The result of :func:`build_targets`."""

    role_granularity: bool
    """``RoleRollingUpdate``: role instances are the rollout unit."""
    rollout_in_progress: bool
    budget: Budget
    """The group-level budget (no surge/partition under ``RoleRollingUpdate``)."""
    plan: UnitPlan
    views: tuple[UnitView, ...]
    groups: dict[int, GroupTarget]
    """Targets of the wanted group ordinals."""
    observed: dict[int, GroupTarget] = field(default_factory=dict)
    """Targets computed for every observed group (wanted or not), by ordinal: readiness and roles for status."""
    unresolved: tuple[str, ...] = ()
    """Revisions that were needed but cannot be resolved."""


def effective_roles(ms: ModelServing, data: RevisionData) -> tuple[Role, ...]:
    """The roles of ``data`` with the current spec's role ``replicas`` where the role still exists."""
    current = {role.name: role.replicas for role in ms.spec.template.roles}
    return tuple(
        role.model_copy(update={"replicas": current[role.name]})
        if role.name in current and current[role.name] != role.replicas
        else role
        for role in data.roles
    )


@dataclass
class _Context:
    ms: ModelServing
    revision: str
    data: RevisionData
    revisions: Mapping[str, RevisionData]
    hashes: dict[str, str]
    role_level: bool
    in_progress: bool
    fallback: str
    salt: int = 0
    disrupted: Disrupted = _never
    equivalent: dict[str, bool] = field(default_factory=dict)
    unresolved: set[str] = field(default_factory=set)

    def resolve(self, revision: str | None) -> RevisionData | None:
        if revision is None:
            return None
        data = self.revisions.get(revision)
        if data is None:
            self.unresolved.add(revision)
        return data

    def same_as_update(self, revision: str | None) -> bool:
        """Whether ``revision`` is the update revision or records the same pod-shaping data under another name.

        Kthena's Go controller names revisions with other hashes; its groups on the same templates are updated.
        """
        if revision is None:
            return False
        if revision == self.revision:
            return True
        if revision not in self.equivalent:
            data = self.revisions.get(revision)
            self.equivalent[revision] = data is not None and stored_revision_hash(data, self.salt) == self.revision
        return self.equivalent[revision]

    def instance_updated(self, instance: InstanceState) -> bool:
        want = self.hashes.get(instance.role)
        live = [pod for pod in instance.pods.values() if not pod.terminating]
        if want is None or not live:
            return False
        if all(pod.role_hash == want for pod in live):
            return True
        data = self.revisions.get(instance.revision() or "")
        if data is None:
            return False
        role = data.role(instance.role)
        return role is not None and role_template_hash(data, role) == want

    def instance_revision(self, instance: InstanceState, group_revision: str | None) -> str | None:
        """The revision to complete an instance that has pods from."""
        own = instance.revision()
        if own is not None and own in self.revisions:
            return own
        if self.instance_updated(instance):
            return self.revision
        if own is not None:
            self.unresolved.add(own)
            return None
        return group_revision


def _workers(ctx: _Context, instance: InstanceState, fallback: Role) -> int:
    data = ctx.revisions.get(instance.revision() or "")
    role = data.role(instance.role) if data is not None else None
    return (role or fallback).worker_replicas


def _role_targets(
    ctx: _Context, group: GroupState | None, role: Role, group_revision: str | None, group_protected: bool
) -> RoleTargets:
    instances = group.role_instances(role.name) if group is not None else {}
    views = tuple(
        UnitView(
            ordinal=r,
            live=inst.live,
            updated=ctx.instance_updated(inst) if ctx.role_level else True,
            ready=inst.complete_and_ready(_workers(ctx, inst, role))
            and (inst.service is not None or not naming.needs_service(role))
            and not (group is not None and ctx.disrupted(group.name, f"{role.name}-{r}")),
            terminating=inst.terminating,
            cost=inst.cost,
        )
        for r, inst in instances.items()
    )
    budget = (
        resolve_budget(role.replicas, role.max_unavailable, role.max_surge, role.partition)
        if ctx.role_level
        else _NO_ROLLOUT
    )
    plan = plan_units(views, role.replicas, budget, rollout_in_progress=ctx.in_progress)
    targets: dict[int, InstanceTarget] = {}
    for r in plan.desired:
        inst = instances.get(r)
        protected = r in plan.protected if ctx.role_level else group_protected
        if inst is not None and inst.pods:
            revision = ctx.instance_revision(inst, group_revision)
            updated = ctx.instance_updated(inst) if ctx.role_level else True
        elif ctx.role_level:
            revision = ctx.fallback if protected else ctx.revision
            updated = revision == ctx.revision
        else:
            revision = group_revision
            updated = True
        data = ctx.resolve(revision)
        chosen = data.role(role.name) if data is not None else None
        if chosen is None and data is not None and revision != ctx.revision:
            # The protected revision has no such role (it was added since): use the update revision's.
            revision, chosen = ctx.revision, role
        if chosen is not None and chosen.replicas != role.replicas:
            chosen = chosen.model_copy(update={"replicas": role.replicas})
        targets[r] = InstanceTarget(revision if chosen is not None else None, chosen, updated, protected)
    return RoleTargets(role, budget, plan, views, targets)


def _group_target(ctx: _Context, ordinal: int, group: GroupState | None, protected: bool, wanted: bool) -> GroupTarget:
    if group is not None and group.live:
        revision: str | None = group.revision(ctx.revision)
    elif ctx.role_level:
        revision = ctx.revision
    else:
        revision = ctx.fallback if protected else ctx.revision
    if ctx.role_level:
        data: RevisionData | None = ctx.data
    else:
        data = ctx.resolve(revision) if wanted else ctx.revisions.get(revision or "")
    roles_data = data if data is not None else ctx.data
    roles = {
        role.name: _role_targets(ctx, group, role, revision if data is not None else None, protected)
        for role in effective_roles(ctx.ms, roles_data)
    }
    ready = group is not None and all(
        sum(1 for view in rt.views if view.ready) >= rt.role.replicas for rt in roles.values()
    )
    if ctx.role_level:
        names = set(roles)
        updated = group is not None and all(
            inst.role in names and ctx.instance_updated(inst) for inst in group.instances.values() if inst.live
        )
    else:
        # Every live pod on the update revision (or an equivalent one): a group half-way through an in-place update
        # is not updated yet.
        updated = ctx.same_as_update(revision) and (
            group is None or all(ctx.same_as_update(pod.revision) for pod in group.pods() if not pod.terminating)
        )
    return GroupTarget(ordinal, revision if data is not None else None, data, roles, updated, ready, protected)


def build_targets(
    ms: ModelServing,
    revision: str,
    data: RevisionData,
    revisions: Mapping[str, RevisionData],
    groups: ObservedGroups,
    disrupted: Disrupted = _never,
) -> Targets:
    """Decide the wanted units and what each is rendered from (see the module docstring).

    Args:
        ms: The ModelServing (its spec and previous status).
        revision: The update revision.
        data: The update revision's data (the current spec).
        revisions: Every resolvable revision (the update revision included).
        groups: The observed groups.
        disrupted: Units an eviction recorded as disrupted count as not ready (one unavailability budget).

    Returns:
        The targets.
    """
    strategy = ms.spec.rollout_strategy
    role_level = strategy is not None and strategy.type == "RoleRollingUpdate"
    current = ms.status.current_revision if ms.status is not None else None
    in_progress = bool(current) and current != revision
    ctx = _Context(
        ms=ms,
        revision=revision,
        data=data,
        revisions=revisions,
        hashes={role.name: role_template_hash(data, role) for role in data.roles},
        role_level=role_level,
        in_progress=in_progress,
        fallback=current if in_progress and current else revision,
        salt=(ms.status.collision_count if ms.status is not None else None) or 0,
        disrupted=disrupted,
    )
    config = strategy.rolling_update_configuration if strategy is not None and not role_level else None
    budget = (
        resolve_budget(ms.spec.replicas, config.max_unavailable, config.max_surge, config.partition)
        if config is not None
        else _NO_ROLLOUT
    )
    # A first pass without protection tells readiness and updated-ness of the observed groups.
    observed = {g.ordinal: _group_target(ctx, g.ordinal, g, False, False) for g in groups.sorted()}
    views = tuple(
        UnitView(
            ordinal=g.ordinal,
            live=g.live,
            updated=observed[g.ordinal].updated,
            ready=observed[g.ordinal].ready and not disrupted(g.name, None),
            terminating=g.terminating,
            cost=g.cost,
        )
        for g in groups.sorted()
    )
    plan = plan_units(views, ms.spec.replicas, budget, rollout_in_progress=in_progress)
    reusable = REUSE_OBSERVED_TARGETS and not ctx.unresolved
    ctx.unresolved.clear()
    wanted: dict[int, GroupTarget] = {}
    for ordinal in plan.desired:
        protected = ordinal in plan.protected
        seen = observed.get(ordinal)
        if reusable and seen is not None and not protected and (role_level or seen.data is not None):
            # The first pass computed this group from the very same inputs: an unprotected group whose revision
            # resolved, with no unresolvable revision met anywhere (so no side effect is skipped).
            wanted[ordinal] = seen
        else:
            wanted[ordinal] = _group_target(ctx, ordinal, groups.get(ordinal), protected, True)
    return Targets(
        role_granularity=role_level,
        rollout_in_progress=in_progress,
        budget=budget,
        plan=plan,
        views=views,
        groups=wanted,
        observed=observed,
        unresolved=tuple(sorted(ctx.unresolved)),
    )
