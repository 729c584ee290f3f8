"""Plan one step of a ModelServing's rolling update: which outdated units to take down now, and its condition.

The rollout planner only ever *takes units down*; the ServingGroup planner re-creates every missing unit at its
target revision (:mod:`kthena_py.plan.modelserving.targets`). Both read the same targets, so a unit taken down
here always comes back on the update revision (or, when partition-protected, on the revision it had).

Guarantees:

* Granularity: whole ServingGroups (``ServingGroupRollingUpdate``: every pod and headless Service of the group is
  deleted) or role instances (``RoleRollingUpdate``: the instance's pods and Service; other roles keep their pods).
* Budget: :func:`~kthena_py.plan.modelserving.rolling.choose_updates` at the rollout's granularity. Units that are
  not ready for any reason (failed, still starting, taken down before, recorded as disrupted by an eviction) count
  as unavailable, so recovery, eviction and rollout draw on one budget, and a rollout never takes a ready unit down
  while that would leave fewer than ``replicas - maxUnavailable`` ready units.
* The ``UpdateInProgress`` condition (owned by the rollout reconciler alone) is absent until the first rollout
  starts, then: ``True`` with reason ``GroupsUpdating`` / ``RolesUpdating`` while units are being replaced,
  ``UpdateStalled`` when the budget is held by units whose pods cannot start (``ImagePullBackOff``,
  ``CrashLoopBackOff``, ...: the message names them), ``False`` with ``PartitionReached`` when only
  partition-protected units remain outdated, and ``False`` / ``RolloutComplete`` once every group is updated and
  ready and no surge group is left. Messages name the units and are deterministic, so an unchanged cluster
  never causes a status write.
* Events: ``ServingGroupUpdating`` / ``RoleUpdating`` per unit taken down, ``RolloutComplete`` once when the
  condition turns to complete. ``RevisionUnresolved`` is left to the ServingGroup planner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kthena_py.api.common import Condition
from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelserving import naming
from kthena_py.plan.modelserving.eviction.tracker import group_key, role_key, unit_disrupted
from kthena_py.plan.modelserving.groups import GroupState, InstanceState
from kthena_py.plan.modelserving.rolling import UnitView, choose_updates
from kthena_py.plan.modelserving.state import PlanningState, build_state
from kthena_py.plan.modelserving.status import rollout_complete, set_condition
from kthena_py.plan.modelserving.targets import Disrupted
from kthena_py.plan.modelserving.types import Delete, MSRef, Observed, Plan, PlannedEvent, PodGroupSupport

__all__ = [
    "REASON_COMPLETE",
    "REASON_GROUPS_UPDATING",
    "REASON_PARTITION",
    "REASON_ROLES_UPDATING",
    "REASON_STALLED",
    "UPDATE_IN_PROGRESS",
    "RolloutStep",
    "plan_rollout",
    "rollout_step",
]

UPDATE_IN_PROGRESS = "UpdateInProgress"
REASON_GROUPS_UPDATING = "GroupsUpdating"
REASON_ROLES_UPDATING = "RolesUpdating"
REASON_STALLED = "UpdateStalled"
REASON_PARTITION = "PartitionReached"
REASON_COMPLETE = "RolloutComplete"


@dataclass(frozen=True)
class RolloutStep:
    """The pure decision of one rollout step (also what ``kthena-py rollout plan`` prints)."""

    take_down: tuple[str, ...]
    """Unit names taken down now (``<ms>-<g>`` or ``<ms>-<g>/<role>-<r>``), in the order chosen."""
    outdated: tuple[str, ...]
    """Every live unit not on its target, protected ones included."""
    protected: tuple[str, ...]
    """Outdated units kept by the partition."""
    blocking: tuple[str, ...]
    """Unavailable units holding the budget (with the reason they are unavailable)."""
    stuck: tuple[str, ...]
    """The blocking units whose pods cannot start."""
    in_progress: bool
    complete: bool
    unprotected_done: bool = False
    """Every wanted unit outside the partition exists, is updated and ready."""
    deletes: tuple[Delete, ...] = ()
    events: tuple[PlannedEvent, ...] = field(default_factory=tuple)


def _unit_problem(instances: list[InstanceState]) -> str:
    for inst in instances:
        for pod in inst.sorted_pods():
            if pod.problem:
                return f"pod {pod.name} {pod.problem}"
    return ""


def _delete_pods(instances: list[InstanceState], reason: str) -> list[Delete]:
    out: list[Delete] = []
    for inst in instances:
        out.extend(Delete("Pod", p.name, p.uid, reason) for p in inst.sorted_pods() if not p.terminating)
        if inst.service is not None and not inst.service.terminating:
            out.append(Delete("Service", inst.service.name, inst.service.uid, reason))
    return out


@dataclass
class _Acc:
    take_down: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    blocking: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    events: list[PlannedEvent] = field(default_factory=list)
    unprotected_done: bool = True

    def check_done(self, views: tuple[UnitView, ...], desired: tuple[int, ...], protected: frozenset[int]) -> None:
        by_ordinal = {view.ordinal: view for view in views}
        for ordinal in desired:
            view = by_ordinal.get(ordinal)
            if ordinal not in protected and (view is None or not (view.live and view.updated and view.ready)):
                self.unprotected_done = False

    def blockers(
        self, views: tuple[UnitView, ...], desired: set[int], name_of: dict[int, str], problems: dict[int, str]
    ) -> None:
        for view in views:
            if view.ordinal in desired and not view.ready:
                problem = problems.get(view.ordinal, "")
                label = f"{name_of[view.ordinal]} ({problem or 'not ready'})"
                self.blocking.append(label)
                if problem:
                    self.stuck.append(label)


def _group_step(state: PlanningState, acc: _Acc) -> None:
    t = state.targets
    groups = {g.ordinal: g for g in state.groups.sorted()}
    names = {o: naming.group_name(state.ref.name, o) for o in groups}
    for view in t.views:
        if view.live and not view.updated:
            (acc.protected if view.ordinal in t.plan.protected else acc.outdated).append(names[view.ordinal])
    acc.outdated.extend(acc.protected)
    acc.check_done(t.views, t.plan.desired, t.plan.protected)
    chosen = choose_updates(t.views, t.plan, state.ms.spec.replicas, t.budget)
    for ordinal in chosen:
        group = groups[ordinal]
        acc.take_down.append(group.name)
        acc.deletes.extend(_delete_pods([group.instances[k] for k in sorted(group.instances)], "rolling update"))
        acc.events.append(
            PlannedEvent(
                "Normal",
                "ServingGroupUpdating",
                f"ServingGroup {group.name} is being updated "
                f"from revision {group.revision() or '?'} to {state.revision}",
            )
        )
    if t.plan.outdated and not chosen:
        problems = {o: _unit_problem(list(g.instances.values())) for o, g in groups.items()}
        acc.blockers(t.views, set(t.plan.desired), names, problems)


def _role_step(state: PlanningState, acc: _Acc) -> None:
    for ordinal, target in sorted(state.targets.groups.items()):
        group: GroupState | None = state.groups.get(ordinal)
        if group is None:
            acc.unprotected_done = False
            continue
        for rt in target.roles.values():
            instances = group.role_instances(rt.role.name)
            names = {r: f"{group.name}/{naming.role_id(rt.role.name, r)}" for r in instances}
            for view in rt.views:
                if view.live and not view.updated:
                    (acc.protected if view.ordinal in rt.plan.protected else acc.outdated).append(names[view.ordinal])
            acc.check_done(rt.views, rt.plan.desired, rt.plan.protected)
            chosen = choose_updates(rt.views, rt.plan, rt.role.replicas, rt.budget)
            for r in chosen:
                inst = instances[r]
                acc.take_down.append(names[r])
                acc.deletes.extend(_delete_pods([inst], "rolling update"))
                role_id = naming.role_id(rt.role.name, r)
                message = (
                    f"Role {rt.role.name}/{role_id} in ServingGroup {group.name} is being updated "
                    f"from revision {inst.revision() or '?'} to {state.revision}"
                )
                acc.events.append(PlannedEvent("Normal", "RoleUpdating", message))
            if rt.plan.outdated and not chosen:
                problems = {r: _unit_problem([inst]) for r, inst in instances.items()}
                acc.blockers(rt.views, set(rt.plan.desired), names, problems)
    acc.outdated.extend(acc.protected)


def rollout_step(state: PlanningState) -> RolloutStep:
    """Decide one rollout step from the planning state (pure)."""
    acc = _Acc()
    (_role_step if state.targets.role_granularity else _group_step)(state, acc)
    complete = rollout_complete(state)
    previous = state.ms.status.current_revision if state.ms.status is not None else None
    in_progress = bool(acc.outdated) or bool(previous and previous != state.revision and not complete)
    return RolloutStep(
        take_down=tuple(acc.take_down),
        outdated=tuple(sorted(set(acc.outdated))),
        protected=tuple(sorted(set(acc.protected))),
        blocking=tuple(acc.blocking),
        stuck=tuple(acc.stuck),
        in_progress=in_progress,
        complete=complete,
        unprotected_done=acc.unprotected_done,
        deletes=tuple(acc.deletes),
        events=tuple(acc.events),
    )


def _listed(names: tuple[str, ...], limit: int = 10) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _previous(ms: ModelServing) -> tuple[list[Condition] | None, Condition | None]:
    conditions = ms.status.conditions if ms.status is not None else None
    return conditions, next((c for c in conditions or [] if c.type == UPDATE_IN_PROGRESS), None)


def _condition(state: PlanningState, step: RolloutStep) -> tuple[bool, str, str] | None:
    """``(status, reason, message)`` of ``UpdateInProgress``; ``None`` to leave it absent."""
    _, previous = _previous(state.ms)
    to = f"revision {state.revision}"
    if not step.in_progress:
        return (
            None if previous is None else (False, REASON_COMPLETE, f"Every ServingGroup is updated to {to} and ready")
        )
    unprotected = tuple(u for u in step.outdated if u not in step.protected)
    reason = REASON_ROLES_UPDATING if state.targets.role_granularity else REASON_GROUPS_UPDATING
    if not unprotected:
        if step.protected and step.unprotected_done:
            return False, REASON_PARTITION, f"Partition reached: {_listed(step.protected)} stay on their revision"
        return True, reason, f"Updating to {to}: waiting for updated units to become ready"
    if step.take_down:
        return True, reason, f"Updating to {to}: taking down {_listed(step.take_down)}"
    if step.stuck:
        return True, REASON_STALLED, f"Update to {to} stalled: unavailable units hold the budget: {_listed(step.stuck)}"
    waiting = _listed(step.blocking) or "units being replaced"
    return True, reason, f"Updating to {to}: waiting for {waiting}; outdated: {_listed(unprotected)}"


def disruption_check(ms: ModelServing, disrupted: frozenset[str]) -> Disrupted:
    """A :data:`~kthena_py.plan.modelserving.targets.Disrupted` over the unit keys an eviction tracker records."""

    def check(group: str, role_id: str | None) -> bool:
        if not disrupted:
            return False
        if role_id is None:
            return unit_disrupted(group_key(ms.namespace, ms.name, group), disrupted)
        role = role_id.rsplit("-", 1)[0]
        return unit_disrupted(role_key(ms.namespace, ms.name, group, role, role_id), disrupted)

    return check


def plan_rollout(
    ms: ModelServing,
    ref: MSRef,
    observed: Observed,
    support: PodGroupSupport,
    now: float,
    disrupted: frozenset[str] = frozenset(),
) -> Plan:
    """Plan one rollout step for a ModelServing (see the module docstring).

    Args:
        ms: The ModelServing (parsed, defaulted).
        ref: Its identity.
        observed: The objects it owns, as cached.
        support: PodGroup support of the cluster.
        now: The current time (epoch seconds), for the condition's transition time.
        disrupted: Unit keys an eviction tracker records as disrupted
            (:func:`~kthena_py.plan.modelserving.eviction.tracker.disrupted_units`): they count as unavailable.

    Returns:
        Deletes of the units taken down, their events, and the ``UpdateInProgress`` condition as the status share
        of the rollout reconciler (``None`` while no rollout has ever started).
    """
    state = build_state(ms, ref, observed, support, disruption_check(ms, disrupted))
    step = rollout_step(state)
    events = list(step.events)
    status = None
    condition = _condition(state, step)
    if condition is not None:
        value, reason, message = condition
        conditions, old = _previous(ms)
        built = set_condition(
            conditions, UPDATE_IN_PROGRESS, value, reason, message, ref.generation or ms.generation, now
        )
        status = {"conditions": [built]}
        old_reason = old.reason if old is not None else None
        if reason == REASON_COMPLETE and old_reason not in (None, REASON_COMPLETE):
            events.append(
                PlannedEvent("Normal", "RolloutComplete", f"Rollout to revision {state.revision} is complete")
            )
        if reason == REASON_STALLED and old_reason != REASON_STALLED:
            events.append(PlannedEvent("Warning", REASON_STALLED, message))
    return Plan(
        deletes=step.deletes,
        status=status,
        events=tuple(events),
        reasons=tuple(f"rolling update: take down {name}" for name in step.take_down),
    )
