"""Plan one step of a ModelServing's rolling update: which outdated units to take down now, and its condition.

The rollout planner only ever *takes units down*; the ServingGroup planner re-creates every missing unit at its
target revision (:mod:`kthena_py.plan.modelserving.core.targets`). Both read the same targets, so a unit taken down
here always comes back on the update revision (or, when partition-protected, on the revision it had).

Guarantees:

* Granularity: whole ServingGroups (``ServingGroupRollingUpdate``: every pod and headless Service of the group is
  deleted) or role instances (``RoleRollingUpdate``: the instance's pods and Service; other roles keep their pods).
* Budget: :func:`~kthena_py.plan.modelserving.core.rolling.choose_updates` at the rollout's granularity. Units that are
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
* The plan is a :class:`RolloutPlan`: it carries the typed :class:`RolloutStep` its writes come from (units
  patched in place, recreated, recreated as an in-place fallback, past their deadline), so callers (metrics, the
  offline simulation) read the decision, never the plan's reasons or events.
* Units an eviction recorded as disrupted come with the observed state (``Observed.disrupted``), as for every
  other ModelServing planner.
* ``updateMethod: InPlace`` (:mod:`kthena_py.plan.modelserving.rollout.inplace`): a chosen unit whose revisions differ
  only in regular-container images is patched in place (same pods, same UIDs) instead of deleted, within the same
  budget (a patched unit counts as unavailable until it is verified Ready on its new images); any other unit is
  recreated and an ``InPlaceUpdateFallback`` Warning says why. Patched pods are followed every step: verified,
  or past ``progressDeadlineSeconds`` marked failed for recovery (a ``requeue_after`` brings the step back when
  the deadline comes). ``UpdateInProgress`` then says ``InPlaceVerifying`` or ``ProgressDeadlineExceeded``.
* ``roleCoordination`` (:mod:`kthena_py.plan.modelserving.rollout.coordination`): under ``RoleRollingUpdate`` the
  candidates of participating roles in each group are further limited by ``maxSkew`` and the dependencies. The
  condition ``CoordinatedRoleRolloutBlocked`` (owned by this reconciler too) is ``True`` while coordination holds
  back a role that its own budget would move (reason ``SkewLimit``, ``DependencyNotReady`` or
  ``OldCapacityRetained``; the message names the group, the role and what it waits for), ``False`` with
  ``NotBlocked`` while the rollout runs unhindered and ``False`` / ``RolloutComplete`` once it is done; absent
  without coordination or before the first rollout. ``UpdateInProgress`` says ``CoordinationBlocked`` when that
  is all that stops the rollout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kthena_py.api.common import Condition
from kthena_py.api.modelserving import ModelServing, RoleCoordination
from kthena_py.api.validation.modelserving_update import COORDINATION_BLOCKED_CONDITION
from kthena_py.api.validation.rollout import selected_roles
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import GroupState, InstanceState
from kthena_py.plan.modelserving.core.inplace_state import ANNOTATION_INPLACE_STATE
from kthena_py.plan.modelserving.core.revision import spec_revision_hash
from kthena_py.plan.modelserving.core.rolling import UnitView, choose_updates
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.targets import RoleTargets
from kthena_py.plan.modelserving.core.types import (
    Delete,
    KubeObject,
    MSRef,
    Observed,
    Plan,
    PlannedEvent,
    PodGroupSupport,
    Update,
)
from kthena_py.plan.modelserving.groups.status import rollout_complete, set_condition
from kthena_py.plan.modelserving.rollout import inplace
from kthena_py.plan.modelserving.rollout.coordination import RoleCounts, coordinate, parse_skew
from kthena_py.vocab.conditions import (
    REASON_COMPLETE,
    REASON_COORDINATION,
    REASON_DEADLINE,
    REASON_GROUPS_UPDATING,
    REASON_NOT_BLOCKED,
    REASON_PARTITION,
    REASON_ROLES_UPDATING,
    REASON_STALLED,
    REASON_VERIFYING,
    UPDATE_IN_PROGRESS,
)

__all__ = [
    "COORDINATION_BLOCKED",
    "REASON_COMPLETE",
    "REASON_COORDINATION",
    "REASON_DEADLINE",
    "REASON_GROUPS_UPDATING",
    "REASON_NOT_BLOCKED",
    "REASON_PARTITION",
    "REASON_ROLES_UPDATING",
    "REASON_STALLED",
    "REASON_VERIFYING",
    "UPDATE_IN_PROGRESS",
    "RolloutPlan",
    "RolloutStep",
    "plan_rollout",
    "rollout_step",
]

COORDINATION_BLOCKED = COORDINATION_BLOCKED_CONDITION
"""The condition the admission webhook reads to tell whether a coordinated rollout is still running."""


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
    in_place: tuple[str, ...] = ()
    """The units of ``take_down`` patched in place (the others are recreated)."""
    updates: tuple[Update, ...] = ()
    """Pod patches: in-place updates and their state records."""
    verifying: tuple[str, ...] = ()
    """Units patched in place, waiting to be Ready on their new images (with their deadline)."""
    exceeded: tuple[str, ...] = ()
    """Units that missed ``progressDeadlineSeconds`` (their pods are handed to recovery)."""
    fallbacks: tuple[str, ...] = ()
    """The units of ``take_down`` recreated although ``InPlace`` was asked for (one ``InPlaceUpdateFallback``
    Warning each)."""
    missed_deadline: tuple[str, ...] = ()
    """Units whose in-place update this step marks as past ``progressDeadlineSeconds`` (one
    ``ProgressDeadlineExceeded`` Warning each; ``exceeded`` also keeps listing them on later steps)."""
    held: tuple[str, ...] = ()
    """Coordination holds: ``<group>: <reason>: <message>``."""
    hold_reasons: tuple[str, ...] = ()
    """The reason of each entry of ``held``."""
    coordinated: bool = False
    """``roleCoordination`` applies."""
    requeue_after: float | None = None


@dataclass(frozen=True)
class RolloutPlan(Plan):
    """A rollout plan with the typed decision it was built from, so nothing reads the decision back from text."""

    step: RolloutStep | None = None
    """The step whose deletes, patches and events the plan carries (``None``: nothing planned, see :func:`settled`)."""


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
    now: float | None = None
    take_down: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    blocking: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    events: list[PlannedEvent] = field(default_factory=list)
    unprotected_done: bool = True
    in_place: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    patches: list[Update] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    hold_reasons: list[str] = field(default_factory=list)

    def move(
        self, state: PlanningState, name: str, instances: list[InstanceState], ineligible: str | None, what: str
    ) -> str:
        """Take a chosen unit out of service: patch it in place or delete it; return how (for its event)."""
        self.take_down.append(name)
        if inplace.in_place_enabled(state) and ineligible is None:
            self.in_place.append(name)
            self.patches.extend(inplace.patch_unit(state, instances, self.now or 0.0))
            return "in place"
        self.deletes.extend(_delete_pods(instances, "rolling update"))
        if inplace.in_place_enabled(state):
            self.fallbacks.append(name)
            self.events.append(
                PlannedEvent(
                    "Warning",
                    "InPlaceUpdateFallback",
                    f"{what} is recreated instead of updated in place: {ineligible}",
                )
            )
        return ""

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
        instances = [group.instances[k] for k in sorted(group.instances)]
        source = group.revision()
        ineligible = (
            inplace.ineligibility(state.revisions.get(source or ""), state.data)
            if inplace.in_place_enabled(state)
            else None
        )
        how = acc.move(state, group.name, instances, ineligible, f"ServingGroup {group.name}")
        acc.events.append(
            PlannedEvent(
                "Normal",
                "ServingGroupUpdating",
                f"ServingGroup {group.name} is being updated {how + ' ' if how else ''}"
                f"from revision {source or '?'} to {state.revision}",
            )
        )
    if t.plan.outdated and not chosen:
        problems = {o: _unit_problem(list(g.instances.values())) for o, g in groups.items()}
        acc.blockers(t.views, set(t.plan.desired), names, problems)


def _coordination(state: PlanningState) -> RoleCoordination | None:
    strategy = state.ms.spec.rollout_strategy
    if strategy is None or strategy.type != "RoleRollingUpdate" or strategy.role_coordination is None:
        return None
    return strategy.role_coordination if parse_skew(strategy.role_coordination.max_skew) is not None else None


def _role_counts(rt: RoleTargets, candidates: tuple[int, ...]) -> RoleCounts:
    by_ordinal = {view.ordinal: view for view in rt.views}
    desired = set(rt.plan.desired)
    ready = started = 0
    for ordinal in desired:
        view = by_ordinal.get(ordinal)
        if view is not None and view.live and view.updated and view.ready:
            ready += 1
        if ordinal not in rt.plan.protected and (view is None or not view.live or view.updated):
            started += 1
    old = [view for view in rt.views if view.live and not view.updated]
    return RoleCounts(
        role=rt.role.name,
        replicas=rt.role.replicas,
        ready=ready,
        started=started,
        old_ready=sum(1 for view in old if view.ready),
        old_live=len(old),
        candidates=candidates,
        ready_candidates=frozenset(o for o in candidates if by_ordinal[o].ready),
    )


def _coordinated_choice(
    state: PlanningState, group: GroupState, roles: Sequence[RoleTargets], chosen: dict[str, tuple[int, ...]], acc: _Acc
) -> dict[str, tuple[int, ...]]:
    coordination = _coordination(state)
    if coordination is None:
        return chosen
    skew = parse_skew(coordination.max_skew)
    assert skew is not None
    names = selected_roles(coordination, [role.name for role in state.ms.spec.template.roles])
    participating = [rt for rt in roles if rt.role.name in names]
    dependencies = {d.role: list(d.depends_on or []) for d in coordination.dependencies or []}
    counts = [_role_counts(rt, chosen[rt.role.name]) for rt in participating]
    decision = coordinate(counts, Fraction(skew), dependencies)
    for hold in decision.holds:
        acc.held.append(f"{group.name}: {hold.message}")
        acc.hold_reasons.append(hold.reason)
    return {name: decision.allowed.get(name, taken) for name, taken in chosen.items()}


def _role_step(state: PlanningState, acc: _Acc) -> None:
    for ordinal, target in sorted(state.targets.groups.items()):
        group: GroupState | None = state.groups.get(ordinal)
        if group is None:
            acc.unprotected_done = False
            continue
        roles = list(target.roles.values())
        chosen: dict[str, tuple[int, ...]] = {}
        for rt in roles:
            instances = group.role_instances(rt.role.name)
            names = {r: f"{group.name}/{naming.role_id(rt.role.name, r)}" for r in instances}
            for view in rt.views:
                if view.live and not view.updated:
                    (acc.protected if view.ordinal in rt.plan.protected else acc.outdated).append(names[view.ordinal])
            acc.check_done(rt.views, rt.plan.desired, rt.plan.protected)
            chosen[rt.role.name] = choose_updates(rt.views, rt.plan, rt.role.replicas, rt.budget)
        allowed = _coordinated_choice(state, group, roles, chosen, acc)
        for rt in roles:
            instances = group.role_instances(rt.role.name)
            names = {r: f"{group.name}/{naming.role_id(rt.role.name, r)}" for r in instances}
            for r in allowed[rt.role.name]:
                inst = instances[r]
                role_id = naming.role_id(rt.role.name, r)
                source = inst.revision()
                ineligible = (
                    inplace.ineligibility(state.revisions.get(source or ""), state.data, rt.role.name)
                    if inplace.in_place_enabled(state)
                    else None
                )
                what = f"Role {rt.role.name}/{role_id} in ServingGroup {group.name}"
                how = acc.move(state, names[r], [inst], ineligible, what)
                message = (
                    f"{what} is being updated {how + ' ' if how else ''}"
                    f"from revision {source or '?'} to {state.revision}"
                )
                acc.events.append(PlannedEvent("Normal", "RoleUpdating", message))
            if rt.plan.outdated and not chosen[rt.role.name]:
                problems = {r: _unit_problem([inst]) for r, inst in instances.items()}
                acc.blockers(rt.views, set(rt.plan.desired), names, problems)
    acc.outdated.extend(acc.protected)


def _units(state: PlanningState) -> list[tuple[str, list[InstanceState]]]:
    """Every observed unit at the rollout's granularity: ``(name, its instances)``."""
    out: list[tuple[str, list[InstanceState]]] = []
    for group in state.groups.sorted():
        if state.targets.role_granularity:
            out.extend(
                (f"{group.name}/{naming.role_id(role, r)}", [inst])
                for (role, r), inst in sorted(group.instances.items())
            )
        else:
            out.append((group.name, [group.instances[k] for k in sorted(group.instances)]))
    return out


def rollout_step(state: PlanningState, now: float | None = None) -> RolloutStep:
    """Decide one rollout step from the planning state (pure).

    Args:
        state: The planning state.
        now: The current time (epoch seconds) for in-place patches and their deadline; ``None`` (an offline plan)
            records patches at time 0 and never lets a deadline pass.
    """
    acc = _Acc(now=now)
    (_role_step if state.targets.role_granularity else _group_step)(state, acc)
    follow = inplace.maintain(state, _units(state), now)
    updates = dict(follow.updates)
    updates.update((u.name, u) for u in acc.patches)
    complete = rollout_complete(state)
    previous = state.ms.status.current_revision if state.ms.status is not None else None
    in_progress = (
        bool(acc.outdated) or bool(follow.verifying) or bool(previous and previous != state.revision and not complete)
    )
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
        events=tuple([*acc.events, *follow.events]),
        in_place=tuple(acc.in_place),
        updates=tuple(updates[name] for name in sorted(updates)),
        verifying=tuple(follow.verifying),
        exceeded=tuple(follow.exceeded),
        fallbacks=tuple(acc.fallbacks),
        missed_deadline=tuple(follow.missed),
        held=tuple(acc.held),
        hold_reasons=tuple(acc.hold_reasons),
        coordinated=_coordination(state) is not None,
        requeue_after=follow.requeue_after,
    )


def _listed(names: tuple[str, ...], limit: int = 10) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _previous(ms: ModelServing, type_: str = UPDATE_IN_PROGRESS) -> tuple[list[Condition] | None, Condition | None]:
    conditions = ms.status.conditions if ms.status is not None else None
    return conditions, next((c for c in conditions or [] if c.type == type_), None)


def _condition(state: PlanningState, step: RolloutStep) -> tuple[bool, str, str] | None:
    """``(status, reason, message)`` of ``UpdateInProgress``; ``None`` to leave it absent."""
    _, previous = _previous(state.ms)
    to = f"revision {state.revision}"
    if not step.in_progress:
        return (
            None if previous is None else (False, REASON_COMPLETE, f"Every ServingGroup is updated to {to} and ready")
        )
    if step.exceeded:
        return (
            True,
            REASON_DEADLINE,
            f"Update to {to}: progressDeadlineSeconds exceeded by in-place updates of {_listed(step.exceeded)}",
        )
    unprotected = tuple(u for u in step.outdated if u not in step.protected)
    reason = REASON_ROLES_UPDATING if state.targets.role_granularity else REASON_GROUPS_UPDATING
    if not unprotected and not step.verifying:
        if step.protected and step.unprotected_done:
            return False, REASON_PARTITION, f"Partition reached: {_listed(step.protected)} stay on their revision"
        return True, reason, f"Updating to {to}: waiting for updated units to become ready"
    if step.take_down:
        moved = [f"{u} (in place)" if u in step.in_place else u for u in step.take_down]
        return True, reason, f"Updating to {to}: taking down {_listed(tuple(moved))}"
    if step.verifying:
        return True, REASON_VERIFYING, f"Updating to {to} in place: verifying {_listed(step.verifying)}"
    if step.stuck:
        return True, REASON_STALLED, f"Update to {to} stalled: unavailable units hold the budget: {_listed(step.stuck)}"
    if step.held and not step.blocking:
        return True, REASON_COORDINATION, f"Update to {to} held by role coordination: {_listed(step.held)}"
    waiting = _listed(step.blocking) or "units being replaced"
    return True, reason, f"Updating to {to}: waiting for {waiting}; outdated: {_listed(unprotected)}"


def _coordination_condition(state: PlanningState, step: RolloutStep) -> tuple[bool, str, str] | None:
    """``(status, reason, message)`` of ``CoordinatedRoleRolloutBlocked``; ``None`` to leave it absent."""
    _, previous = _previous(state.ms, COORDINATION_BLOCKED)
    if not step.coordinated or (previous is None and not step.in_progress):
        return None
    if not step.in_progress:
        return False, REASON_COMPLETE, f"Coordinated rollout to revision {state.revision} is complete"
    if step.held:
        return True, step.hold_reasons[0], f"Role coordination holds back: {_listed(step.held)}"
    return False, REASON_NOT_BLOCKED, f"Coordinated rollout to revision {state.revision} is not blocked"


def settled(ms: ModelServing, observed: Observed) -> bool:
    """Whether there is no rollout to plan at all, decided without building the planning state.

    True when no rollout condition was ever written, the recorded ``currentRevision`` (if any) is the update
    revision, no unit is recorded as disrupted, and every pod carries the update revision and no in-place update
    record: then :func:`plan_rollout` would take nothing down, patch nothing and write no condition. The common case
    (a fleet being created or scaled, every pod on the current spec) costs a revision hash and one pass over the pods
    instead of a full plan.
    """
    if observed.disrupted:
        return False
    conditions = ms.status.conditions if ms.status is not None else None
    if any(c.type in (UPDATE_IN_PROGRESS, COORDINATION_BLOCKED) for c in conditions or []):
        return False
    salt = (ms.status.collision_count if ms.status is not None else None) or 0
    mount = observed.model_cache.mount if observed.model_cache is not None else None
    revision = spec_revision_hash(ms.spec, salt, mount)
    current = ms.status.current_revision if ms.status is not None else None
    if current and current != revision:
        return False
    for pod in observed.pods:
        md = pod.get("metadata") or {}
        if (md.get("labels") or {}).get(naming.LABEL_REVISION) != revision:
            return False
        if ANNOTATION_INPLACE_STATE in (md.get("annotations") or {}):
            return False
    return True


def plan_rollout(
    ms: ModelServing,
    ref: MSRef,
    observed: Observed,
    support: PodGroupSupport,
    now: float,
) -> RolloutPlan:
    """Plan one rollout step for a ModelServing (see the module docstring); nothing at all when :func:`settled`.

    Args:
        ms: The ModelServing (parsed, defaulted).
        ref: Its identity.
        observed: The objects it owns, as cached, with the units its eviction tracker records as disrupted
            (``Observed.disrupted``): they count as unavailable.
        support: PodGroup support of the cluster.
        now: The current time (epoch seconds), for in-place deadlines and the conditions' transition times.

    Returns:
        Deletes of the units taken down, patches of the units updated in place, their events, and the
        ``UpdateInProgress`` (and, with coordination, ``CoordinatedRoleRolloutBlocked``) conditions as the status
        share of the rollout reconciler (``None`` while no rollout has ever started); ``step`` is the decision they
        come from (``None`` when :func:`settled`: nothing was planned).
    """
    if settled(ms, observed):
        return RolloutPlan()
    gate = observed.model_cache
    if gate is not None and not gate.open:
        # The units taken down could not be re-created: the rollout waits, every existing unit stays.
        return RolloutPlan(reasons=(f"rollout paused: ModelCache {gate.name} is not Ready ({gate.reason})",))
    return _plan_in_full(ms, ref, observed, support, now)


def _plan_in_full(
    ms: ModelServing, ref: MSRef, observed: Observed, support: PodGroupSupport, now: float
) -> RolloutPlan:
    state = build_state(ms, ref, observed, support)
    step = rollout_step(state, now)
    events = list(step.events)
    built: list[KubeObject] = []
    generation = ref.generation or ms.generation
    condition = _condition(state, step)
    if condition is not None:
        value, reason, message = condition
        conditions, old = _previous(ms)
        built.append(set_condition(conditions, UPDATE_IN_PROGRESS, value, reason, message, generation, now))
        old_reason = old.reason if old is not None else None
        if reason == REASON_COMPLETE and old_reason not in (None, REASON_COMPLETE):
            events.append(PlannedEvent("Normal", REASON_COMPLETE, f"Rollout to revision {state.revision} is complete"))
        if reason == REASON_STALLED and old_reason != REASON_STALLED:
            events.append(PlannedEvent("Warning", REASON_STALLED, message))
    blocked = _coordination_condition(state, step)
    if blocked is not None:
        value, reason, message = blocked
        conditions, old = _previous(ms, COORDINATION_BLOCKED)
        built.append(set_condition(conditions, COORDINATION_BLOCKED, value, reason, message, generation, now))
    reasons = [f"rolling update: {'patch' if n in step.in_place else 'take down'} {n}" for n in step.take_down]
    return RolloutPlan(
        updates=step.updates,
        deletes=step.deletes,
        status={"conditions": built} if built else None,
        events=tuple(events),
        requeue_after=step.requeue_after,
        reasons=tuple(reasons),
        step=step,
    )
