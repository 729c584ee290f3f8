"""The eviction budget of a ModelServing: which pod evictions ``rolloutStrategy.evictionStrategy`` allows.

A *unit* is what an eviction disrupts: a ServingGroup (``protectionLevel: ServingGroup``) or one role instance
(``protectionLevel: Role``). A *budget* is one protected set of units with a threshold: all ServingGroups of the
ModelServing against ``minAvailable`` (int or percentage of ``spec.replicas``, rounded up; absent: 1), or the
instances of one role within one ServingGroup against ``roleMinAvailable[role]`` (percentage of the role's
``replicas``, rounded up). Roles absent from ``roleMinAvailable`` are not protected.

Guarantees:

* Pure: decisions are functions of the planning state (observed pods and revisions), the tracker's entries and
  ``now``; no I/O, no clock.
* A unit is *ready* when it is complete (every role of a group has its ``replicas`` instances; an instance has
  its entry pod and every worker), every pod is ``Running`` and ``Ready``, none is terminating, it is kept by
  the scaling plan (not about to be scaled away) and it is not recorded as disrupted in the tracker (see
  :func:`~kthena_py.plan.modelserving.eviction.tracker.unit_disrupted`). Units a rollout took down or that failed
  are therefore never ready, and count against the budget automatically.
* :func:`decide` grants an eviction that takes a ready unit down only while more than ``minAvailable`` units are
  ready, and records the unit (expiring after ``ttl``). Allowed without spending the budget: pods of roles that
  are not protected, a budget of zero units, a target pod that is not ready, a unit already recorded. A ready pod
  of a unit that is not ready (or not observed) is allowed only while more than ``minAvailable`` units are ready,
  as in Kthena. Every grant that reaches a pod of a protected unit is recorded, so a granted pod that still
  looks ready (its deletion not yet observed) never lets a second grant spend the same budget.
* Therefore, if every grant is decided on the tracker's latest content and written with an optimistic
  concurrency check, the number of ready units never drops below ``minAvailable`` because of evictions (as long
  as a granted pod's deletion is observed before its record expires).
* Every grant holds its unit's record for :data:`IN_FLIGHT_SECONDS` at least: the API server evicts after the
  webhook answered, whichever pod has the name by then, and a record released before that could let it delete a
  replacement that was counted ready.
* A grant for a pod of a unit that is already recorded spends nothing more, but is recorded too (the pod joins
  the entry's granted pods and the expiry moves to ``now + ttl``): the unit is released only once every granted
  pod is gone, so a pod evicted while its unit was rebuilding can never be forgotten by a release computed on a
  view that shows the unit whole (see :func:`~kthena_py.plan.modelserving.eviction.tracker.prune`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from kthena_py.api.intstr import IntOrString, resolve_scaled
from kthena_py.api.modelserving import EvictionStrategySpec, ProtectionLevelType
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import GroupState, PodState
from kthena_py.plan.modelserving.core.state import PlanningState
from kthena_py.plan.modelserving.core.types import KubeObject
from kthena_py.vocab.pods import is_terminating, running_and_ready

from .tracker import (
    GROUP_PREFIX,
    ROLE_PREFIX,
    PodIdentity,
    TrackerEntry,
    UnitHealth,
    group_key,
    prune,
    role_key,
    unit_disrupted,
)

__all__ = [
    "ALLOWED_REASONS",
    "DENIED_REASONS",
    "IN_FLIGHT_SECONDS",
    "Budget",
    "BudgetStatus",
    "Target",
    "Unit",
    "Verdict",
    "budget_statuses",
    "budgets",
    "decide",
    "denial_message",
    "evaluate",
    "resolve_min_available",
    "target_budget",
    "target_by_name",
    "target_of",
    "unit_index",
]

# Reasons (metric label values): allowed ...
NOT_OWNED: Final = "NotOwned"
NO_STRATEGY: Final = "NoEvictionStrategy"
NO_REPLICAS: Final = "NoReplicas"
UNPROTECTED: Final = "Unprotected"
POD_NOT_READY: Final = "PodNotReady"
ALREADY_DISRUPTED: Final = "AlreadyDisrupted"
WITHIN_BUDGET: Final = "WithinBudget"
DISABLED: Final = "Disabled"
# ... and denied.
BUDGET_EXHAUSTED: Final = "BudgetExhausted"
UNIT_NOT_READY: Final = "UnitNotReady"
UNIT_NOT_OBSERVED: Final = "UnitNotObserved"
TRACKER_CONFLICT: Final = "TrackerConflict"
TRACKER_ERROR: Final = "TrackerError"
LOOKUP_FAILED: Final = "LookupFailed"

ALLOWED_REASONS: Final = (
    NOT_OWNED,
    NO_STRATEGY,
    NO_REPLICAS,
    UNPROTECTED,
    POD_NOT_READY,
    ALREADY_DISRUPTED,
    WITHIN_BUDGET,
    DISABLED,
)
DENIED_REASONS: Final = (
    BUDGET_EXHAUSTED,
    UNIT_NOT_READY,
    UNIT_NOT_OBSERVED,
    TRACKER_CONFLICT,
    TRACKER_ERROR,
    LOOKUP_FAILED,
)

UnitState = Literal["ready", "not-ready", "not-observed"]

#: How long after the webhook's decision the API server may still act on a grant: the webhook call's timeout
#: (5 s, ``manifests/eviction``) plus the Eviction API's retries on a conflicting pod write (20 x 0.5 s, 10 %
#: jitter, Kubernetes' ``EvictionsRetry``), rounded up. A unit's record is held at least this long after its
#: latest grant.
IN_FLIGHT_SECONDS: Final = 17.0


@dataclass(frozen=True)
class Unit:
    """One eviction unit as observed (the tracker not considered)."""

    key: str
    name: str
    """The group name (``llm-0``) or the role id (``decode-1``)."""
    health: UnitHealth

    @property
    def healthy(self) -> bool:
        """Complete, every pod Running and Ready, none terminating, kept by the scaling plan."""
        return self.health.healthy


@dataclass(frozen=True)
class Budget:
    """A protected set of units and its threshold."""

    level: ProtectionLevelType
    ms: str
    group: str | None
    """Role level: the ServingGroup the role instances belong to."""
    role: str | None
    total: int
    """``spec.replicas`` or the role's ``replicas``: what a percentage refers to."""
    min_available: int
    units: tuple[Unit, ...]

    def ready(self, disrupted: frozenset[str]) -> tuple[Unit, ...]:
        """The units that are ready: healthy and not recorded as disrupted."""
        return tuple(unit for unit in self.units if unit.healthy and not unit_disrupted(unit.key, disrupted))

    def allowed(self, disrupted: frozenset[str]) -> int:
        """How many more ready units may be disrupted."""
        return max(0, len(self.ready(disrupted)) - self.min_available)


@dataclass(frozen=True)
class Target:
    """The pod an eviction asks for, as its labels place it."""

    pod_name: str
    pod_uid: str
    pod_ready: bool
    """Running, Ready and not terminating."""
    group: str
    role: str
    role_id: str


@dataclass(frozen=True)
class Verdict:
    """The outcome of one eviction request.

    Attributes:
        allowed: Admit the eviction.
        reason: One of :data:`ALLOWED_REASONS` or :data:`DENIED_REASONS`.
        message: The denial message (Kthena's wording), or a short explanation of an admission.
        entries: The tracker's entries after this decision (pruned, plus the new record).
        record: The key recorded by this decision, if any.
        ready: Ready units in the budget that decided (-1 when no budget applied).
        min_available: Its threshold (-1 when no budget applied).
    """

    allowed: bool
    reason: str
    message: str
    entries: Mapping[str, TrackerEntry]
    record: str | None = None
    ready: int = -1
    min_available: int = -1


@dataclass(frozen=True)
class BudgetStatus:
    """One budget as a user sees it (for the status condition)."""

    level: ProtectionLevelType
    group: str | None
    role: str | None
    ready: int
    total: int
    min_available: int
    disrupted: int
    """Units of this budget recorded as disrupted."""
    allowed: int


def resolve_min_available(value: IntOrString | None, total: int, default: int) -> int:
    """Resolve a threshold against ``total`` (percentages round up); an unreadable value protects everything."""
    return resolve_scaled(value, total, round_up=True, if_none=default, if_invalid=max(0, total), non_negative=True)


def target_of(pod: KubeObject) -> Target | None:
    """Read the target of an eviction from the pod (``None`` without our group/role labels)."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    group, role, role_id = (labels.get(k) for k in (naming.LABEL_GROUP_NAME, naming.LABEL_ROLE, naming.LABEL_ROLE_ID))
    if not all(isinstance(v, str) and v for v in (group, role, role_id)):
        return None
    healthy = running_and_ready(pod) and not is_terminating(pod)
    return Target(
        pod_name=str(metadata.get("name") or ""),
        pod_uid=str(metadata.get("uid") or ""),
        pod_ready=healthy,
        group=str(group),
        role=str(role),
        role_id=str(role_id),
    )


def target_by_name(ms: str, roles: Iterable[str], pod_name: str) -> Target | None:
    """The target of an eviction for a pod that does not exist (now), from its name alone.

    The API server looks the pod up only after the webhook answered, so a pod being re-created under its name can
    be what it evicts. Such a target has no UID and is not ready: granting it records its unit (without a UID)
    and holds it (:data:`IN_FLIGHT_SECONDS`).

    Args:
        ms: The ModelServing's name.
        roles: Its role names.
        pod_name: The requested name, ``<ms>-<group>-<role>-<ordinal>-<index>``.

    Returns:
        The target, or ``None`` when the name is not one of this ModelServing's pod names.
    """
    for role in roles:
        head, _, rest = pod_name.partition(f"-{role}-")
        group = naming.parse_group_name(ms, head)
        ordinal, _, index = rest.partition("-")
        if group is None or not (ordinal.isdigit() and index.isdigit()):
            continue
        if naming.pod_name(ms, group, role, int(ordinal), int(index)) == pod_name:
            return Target(pod_name, "", False, head, role, naming.role_id(role, int(ordinal)))
    return None


def _group_healthy(state: PlanningState, group: GroupState, kept: set[int]) -> bool:
    pods = list(group.pods())
    return group.ordinal in kept and bool(pods) and all(pod.healthy_ready for pod in pods) and state.group_ready(group)


def _group_units(state: PlanningState) -> tuple[Unit, ...]:
    kept = set(state.targets.plan.keep)
    ns, ms = state.ref.namespace, state.ref.name
    return tuple(
        Unit(
            group_key(ns, ms, group.name),
            group.name,
            UnitHealth(_group_healthy(state, group, kept), _identities(group.pods())),
        )
        for group in state.groups.sorted()
        if group.has_pods
    )


def _identities(pods: Iterable[PodState]) -> tuple[PodIdentity, ...]:
    return tuple(PodIdentity(pod.name, pod.uid) for pod in pods)


def _role_units(state: PlanningState, group: GroupState, role_name: str) -> tuple[Unit, ...]:
    target = state.target(group.ordinal)
    rt = target.roles.get(role_name) if target is not None else None
    instances = group.role_instances(role_name)
    if rt is None:
        return ()
    ready = {view.ordinal: view.ready for view in rt.views}
    kept = set(rt.plan.keep)
    ns, ms = state.ref.namespace, state.ref.name
    return tuple(
        Unit(
            role_key(ns, ms, group.name, role_name, naming.role_id(role_name, ordinal)),
            naming.role_id(role_name, ordinal),
            UnitHealth(
                ordinal in kept and ready.get(ordinal, False),
                _identities(instance.sorted_pods()),
            ),
        )
        for ordinal, instance in instances.items()
        if instance.pods
    )


def unit_index(state: PlanningState) -> dict[str, UnitHealth]:
    """Every observed unit of both levels (ServingGroups and every role instance), by key, for pruning."""
    index = {unit.key: unit.health for unit in _group_units(state)}
    for group in state.groups.sorted():
        for name in sorted({role for role, _ in group.instances}):
            index.update({unit.key: unit.health for unit in _role_units(state, group, name)})
    return index


def _group_budget(state: PlanningState, strategy: EvictionStrategySpec) -> Budget:
    replicas = state.ms.spec.replicas
    minimum = resolve_min_available(strategy.min_available, replicas, 1)
    return Budget("ServingGroup", state.ref.name, None, None, replicas, minimum, _group_units(state))


def _role_budget(
    state: PlanningState, group: GroupState | None, group_name: str, role: str, value: IntOrString
) -> Budget | None:
    target = state.target(group.ordinal) if group is not None else None
    roles = (
        {rt.role.name: rt.role for rt in target.roles.values()}
        if target is not None
        else {r.name: r for r in state.effective_roles(state.data)}
    )
    if role not in roles:
        return None
    replicas = roles[role].replicas
    units = _role_units(state, group, role) if group is not None else ()
    minimum = resolve_min_available(value, replicas, 0)
    return Budget("Role", state.ref.name, group_name, role, replicas, minimum, units)


def budgets(state: PlanningState, strategy: EvictionStrategySpec) -> tuple[Budget, ...]:
    """Every budget of the ModelServing: one at ServingGroup level; one per observed group and protected role."""
    if strategy.protection_level == "ServingGroup":
        return (_group_budget(state, strategy),)
    found: list[Budget] = []
    protected = strategy.role_min_available or {}
    kept = set(state.targets.plan.keep)
    for group in state.groups.sorted():
        if group.ordinal not in kept:
            continue
        for role in sorted(protected):
            budget = _role_budget(state, group, group.name, role, protected[role])
            if budget is not None:
                found.append(budget)
    return tuple(found)


def target_budget(state: PlanningState, strategy: EvictionStrategySpec, target: Target) -> Budget | None:
    """The budget an eviction of ``target`` draws on (``None``: its role is not protected)."""
    if strategy.protection_level == "ServingGroup":
        return _group_budget(state, strategy)
    protected = strategy.role_min_available or {}
    if target.role not in protected:
        return None
    ordinal = naming.parse_group_name(state.ref.name, target.group)
    group = state.groups.get(ordinal) if ordinal is not None else None
    return _role_budget(state, group, target.group, target.role, protected[target.role])


def _target_key(budget: Budget, namespace: str, target: Target) -> str:
    if budget.level == "ServingGroup":
        return group_key(namespace, budget.ms, target.group)
    return role_key(namespace, budget.ms, target.group, target.role, target.role_id)


def denial_message(budget: Budget, target: Target, state: UnitState, ready: int) -> str:
    """Kthena's denial message for ``target`` in ``budget`` with ``ready`` units ready."""
    head = f"Eviction denied: protected by ModelServing {budget.ms}."
    minimum = budget.min_available
    if budget.level == "ServingGroup":
        if state == "ready":
            return f"{head} Current ready groups ({ready}) <= minAvailable ({minimum})."
        if state == "not-ready":
            return (
                f"{head} Target group {target.group} is not ready and not tracked; "
                f"current ready groups ({ready}) <= minAvailable ({minimum})."
            )
        return (
            f"{head} Target group {target.group} was not observed while "
            f"current ready groups ({ready}) <= minAvailable ({minimum})."
        )
    where = f"ServingGroup {budget.group} role {budget.role}"
    if state == "ready":
        return f"{head} {where} ready instances ({ready}) <= minAvailable ({minimum})."
    if state == "not-ready":
        return (
            f"{head} {where} instance {target.role_id} is not ready and not tracked; "
            f"current ready instances ({ready}) <= minAvailable ({minimum})."
        )
    return (
        f"{head} {where} instance {target.role_id} was not observed while "
        f"current ready instances ({ready}) <= minAvailable ({minimum})."
    )


def decide(
    budget: Budget | None,
    namespace: str,
    target: Target,
    entries: Mapping[str, TrackerEntry],
    *,
    now: float,
    ttl: float,
) -> Verdict:
    """Decide one eviction.

    Args:
        budget: The budget the target draws on (:func:`target_budget`); ``None`` when its role is unprotected.
        namespace: The ModelServing's namespace (part of the unit keys).
        target: The pod to evict.
        entries: The tracker's entries, already pruned (:func:`~kthena_py.plan.modelserving.eviction.tracker.prune`).
        now: The current time, epoch seconds.
        ttl: How long a new record lasts, seconds.

    Returns:
        The verdict; ``entries`` of the verdict is what the tracker must hold if the eviction is admitted.
    """
    if budget is None:
        return Verdict(True, UNPROTECTED, f"role {target.role} is not protected", entries)
    if budget.total <= 0:
        return Verdict(True, NO_REPLICAS, "no replicas to protect", entries)
    key = _target_key(budget, namespace, target)
    disrupted = frozenset(key for key, entry in entries.items() if now < entry.expires_at)
    ready = budget.ready(disrupted)
    count, minimum = len(ready), budget.min_available

    def grant(reason: str, message: str) -> Verdict:
        previous = entries.get(key)
        hold = now + IN_FLIGHT_SECONDS
        expires = max(now + ttl, hold)  # a TTL shorter than the hold would end the record while still held
        entry = (
            previous.with_grant(target.pod_uid, expires, hold)
            if previous is not None
            else TrackerEntry(expires, target.pod_uid, target.pod_name, (), hold)
        )
        return Verdict(True, reason, message, {**entries, key: entry}, key, count, minimum)

    if unit_disrupted(key, disrupted):
        return grant(ALREADY_DISRUPTED, f"{key} is already disrupted")
    if not target.pod_ready:
        return grant(POD_NOT_READY, f"pod {target.pod_name} is not ready")
    unit = next((unit for unit in budget.units if unit.key == key), None)
    state: UnitState = "not-observed" if unit is None else "ready" if unit in ready else "not-ready"
    if count > minimum:
        return grant(WITHIN_BUDGET, f"{count} ready > minAvailable {minimum}")
    reason = {"ready": BUDGET_EXHAUSTED, "not-ready": UNIT_NOT_READY, "not-observed": UNIT_NOT_OBSERVED}[state]
    return Verdict(False, reason, denial_message(budget, target, state, count), entries, None, count, minimum)


def evaluate(
    state: PlanningState,
    strategy: EvictionStrategySpec,
    target: Target,
    entries: Mapping[str, TrackerEntry],
    *,
    now: float,
    ttl: float,
) -> Verdict:
    """Prune the tracker against the observed units, then :func:`decide` (the webhook's whole decision)."""
    pruned = prune(entries, unit_index(state), now)
    return decide(target_budget(state, strategy, target), state.ref.namespace, target, pruned, now=now, ttl=ttl)


def _recorded(budget: Budget, namespace: str, disrupted: frozenset[str]) -> int:
    """How many units of ``budget`` the tracker records, observed or not (a unit being rebuilt has no pods)."""
    if budget.level == "ServingGroup":
        groups = set()
        for key in disrupted:
            for prefix in (GROUP_PREFIX, ROLE_PREFIX):
                parts = key[len(prefix) :].split("/") if key.startswith(prefix) else []
                if len(parts) >= 3 and parts[:2] == [namespace, budget.ms]:
                    groups.add(parts[2])
        return len(groups)
    assert budget.group is not None and budget.role is not None
    if group_key(namespace, budget.ms, budget.group) in disrupted:
        return max(budget.total, len(budget.units))
    prefix = role_key(namespace, budget.ms, budget.group, budget.role, "")
    return sum(1 for key in disrupted if key.startswith(prefix))


def budget_statuses(
    state: PlanningState, strategy: EvictionStrategySpec, disrupted: frozenset[str]
) -> list[BudgetStatus]:
    """Every budget with its ready count and the evictions it allows now."""
    out: list[BudgetStatus] = []
    for budget in budgets(state, strategy):
        ready = budget.ready(disrupted)
        tracked = _recorded(budget, state.ref.namespace, disrupted)
        out.append(
            BudgetStatus(
                budget.level,
                budget.group,
                budget.role,
                len(ready),
                budget.total,
                budget.min_available,
                tracked,
                budget.allowed(disrupted),
            )
        )
    return out
