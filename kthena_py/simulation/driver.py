"""The reconcile driver: the three ModelServing planners run over an in-memory cluster until they settle.

Guarantees:

* The controller's own planners decide everything: every reconcile pass runs
  :func:`~kthena_py.plan.modelserving.render.podgroups.plan_podgroups`,
  :func:`~kthena_py.plan.modelserving.groups.servinggroups.plan_servinggroups` and
  :func:`~kthena_py.plan.modelserving.rollout.rollout.plan_rollout`, in that order, each plan applied
  (:mod:`.applier`) before the next planner reads the cluster; new pods are admitted by the :mod:`.kubelet`.
* The ModelServing lives in the store like every other object: the user's edit (:meth:`Simulation.set_spec`)
  raises its generation as the API server does, each planner's status share is server-side applied by its own
  field manager.
* No I/O and no clock: time moves only when :attr:`Simulation.now` is advanced; the store's timestamps follow it
  and its UIDs are numbered from 1, so the same inputs give the same run.
* :meth:`Simulation.step` reconciles until a pass changes nothing, then lets pods become ready, and reports what
  happened (:class:`~.report.StepReport`); the rollout's decisions it reports are the typed
  :class:`~kthena_py.plan.modelserving.rollout.rollout.RolloutStep` each rollout plan carries (noted by
  :meth:`Simulation.rollout_decisions`; nothing is computed twice).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.kube.memory import MemoryStore
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.rolling import Budget
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.types import MSRef, Observed, Plan, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups
from kthena_py.plan.modelserving.rollout.rollout import UPDATE_IN_PROGRESS, RolloutStep, plan_rollout, rollout_step

from .applier import MODELSERVINGS, apply_plan, apply_status, observed
from .kubelet import Kubelet, Readiness, unit_of
from .report import StepReport, UnitAction

__all__ = [
    "EPOCH",
    "MANAGERS",
    "PLACEHOLDER_UID",
    "STEP_SECONDS",
    "VOLCANO",
    "Simulation",
    "SimulationError",
    "available",
    "budgets",
    "role_ready",
]

EPOCH = 1_700_000_000.0
"""The simulated clock's start (epoch seconds)."""

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
"""The ModelServing uid assumed when the document has none."""

VOLCANO = PodGroupSupport(crd_served=True, sub_group_policy=True)
"""The cluster assumed by default: Volcano's PodGroup CRD with ``subGroupPolicy``."""

STEP_SECONDS = 10.0
"""Simulated seconds per step (only condition transition times show it)."""

MANAGERS = {"podgroups": "simulated-gang", "servinggroups": "simulated-servinggroups", "rollout": "simulated-rollout"}
"""The field manager of each planner's writes."""

_NOT_REMOVALS = frozenset({"rolling update", "recovery"})
"""Reasons of pod deletions that are not a unit being removed (the unit comes back)."""


class SimulationError(Exception):
    """The planners did not settle within a step (a planner bug: they are meant to converge)."""


@dataclass
class _Acc:
    take_down: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    created: dict[str, str] = field(default_factory=dict)
    surge: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    min_available: int | None = None
    min_role_ready: dict[str, int] = field(default_factory=dict)

    def measure(self, state: PlanningState) -> None:
        now = available(state)
        self.min_available = now if self.min_available is None else min(self.min_available, now)
        for role, ready, _ in role_ready(state):
            self.min_role_ready[role] = min(self.min_role_ready.get(role, ready), ready)


def role_level(ms: ModelServing) -> bool:
    """Whether the rollout moves role instances (``RoleRollingUpdate``) rather than ServingGroups."""
    strategy = ms.spec.rollout_strategy
    return strategy is not None and strategy.type == "RoleRollingUpdate"


class Simulation:
    """One ModelServing, its in-memory cluster, the three planners and the kubelet.

    Args:
        doc: The ModelServing document (stored as given; its namespace, uid and generation default).
        support: PodGroup support of the simulated cluster.
        readiness: Which pods become ready in :meth:`tick`.
        now: The simulated clock (epoch seconds).
    """

    def __init__(
        self,
        doc: dict[str, Any],
        *,
        support: PodGroupSupport = VOLCANO,
        readiness: Readiness | None = None,
        now: float = EPOCH,
    ) -> None:
        doc = copy.deepcopy(doc)
        metadata = doc.setdefault("metadata", {})
        metadata.setdefault("namespace", "default")
        metadata.setdefault("uid", PLACEHOLDER_UID)
        metadata.setdefault("generation", 1)
        self.name = str(metadata.get("name", ""))
        self.namespace = str(metadata["namespace"])
        self.support = support
        self.now = now
        numbers = itertools.count(1)
        self.store = MemoryStore(clock=lambda: format_time(self.now), uids=lambda: f"uid-{next(numbers)}")
        self.store.put(MODELSERVINGS, doc)
        self.kubelet = Kubelet(self.store, self.namespace, readiness)
        self.events: list[tuple[str, str, str]] = []
        self._acc: _Acc | None = None

    @property
    def readiness(self) -> Readiness:
        """Which pods become ready in :meth:`tick`."""
        return self.kubelet.readiness

    @readiness.setter
    def readiness(self, value: Readiness) -> None:
        self.kubelet.readiness = value

    # --- the planners -------------------------------------------------------------------------------------------

    @property
    def doc(self) -> KubeObject:
        """The ModelServing as stored (a copy)."""
        return self.store.get(MODELSERVINGS, self.name, self.namespace)

    def parse(self) -> ModelServing:
        """The document as the planners see it."""
        return ModelServing.model_validate(self.doc)

    def ref(self, ms: ModelServing) -> MSRef:
        """The identity of the ModelServing."""
        return MSRef(ms.name, ms.namespace, ms.uid, ms.generation)

    def observed(self) -> Observed:
        """The planners' snapshot of the cluster."""
        return observed(self.store, self.namespace)

    def state(self) -> PlanningState:
        """The planning state of the cluster as it is now."""
        ms = self.parse()
        return build_state(ms, self.ref(ms), self.observed(), self.support)

    def _record(self, ms: ModelServing, plan: Plan) -> None:
        acc = self._acc
        if acc is None:
            return
        level = role_level(ms)
        replicas = {role.name: role.replicas for role in ms.spec.template.roles}
        for delete in plan.deletes:
            pod = self.store.peek(PODS, delete.name, self.namespace) if delete.kind == "Pod" else None
            if pod is not None and delete.reason not in _NOT_REMOVALS:
                unit = unit_of(pod, self.name, level)
                if unit is not None and unit[0] not in acc.removed:
                    acc.removed.append(unit[0])
        for created in plan.creates:
            if created["kind"] != "Pod":
                continue
            unit = unit_of(created, self.name, level)
            if unit is None:
                continue
            name, group, role, ordinal = unit
            revision = str(created["metadata"]["labels"].get(naming.LABEL_REVISION, ""))
            beyond = ordinal >= replicas.get(role, 0) if level else group >= ms.spec.replicas
            (acc.surge if beyond else acc.created).setdefault(name, revision)

    def _run(self, ms: ModelServing, plan: Plan, planner: str) -> bool:
        self._record(ms, plan)
        before = self.store.revision
        created = apply_plan(self.store, plan, self.namespace, field_manager=MANAGERS[planner])
        self.kubelet.admit(created)
        self.events.extend((e.type, e.reason, e.message) for e in plan.events)
        changed = bool(plan.creates or plan.deletes or plan.updates) or self.store.revision != before
        if plan.status is not None:
            changed = (
                apply_status(self.store, self.name, self.namespace, plan.status, field_manager=MANAGERS[planner])
                or changed
            )
        self.after_apply()
        return changed

    def after_apply(self) -> None:
        """Called after every plan is applied (records the lowest availability of a step)."""
        if self._acc is not None:
            self._acc.measure(self.state())

    def rollout_decisions(self, step: RolloutStep | None) -> None:
        """Note what the rollout decided (taken down, patched in place, held) for the step's report."""
        acc = self._acc
        if acc is None or step is None:
            return
        for unit in step.take_down:
            chosen = acc.patched if unit in step.in_place else acc.take_down
            if unit not in chosen:
                chosen.append(unit)
        acc.held.extend(what for what in step.held if what not in acc.held)

    def reconcile(self, *, rollout: bool = True) -> bool:
        """One pass of every reconciler; return whether anything changed (objects or status)."""
        ms = self.parse()
        changed = self._run(ms, plan_podgroups(ms, self.ref(ms), self.observed(), self.support), "podgroups")
        ms = self.parse()
        plan = plan_servinggroups(ms, self.ref(ms), self.observed(), self.support, self.now)
        changed = self._run(ms, plan, "servinggroups") or changed
        if rollout:
            ms = self.parse()
            rollout_plan = plan_rollout(ms, self.ref(ms), self.observed(), self.support, self.now)
            self.rollout_decisions(rollout_plan.step)
            changed = self._run(ms, rollout_plan, "rollout") or changed
        return changed

    # --- pods becoming ready ------------------------------------------------------------------------------------

    def tick(self) -> tuple[str, ...]:
        """Let pending pods become Running and Ready (see :class:`~.kubelet.Readiness`); return the units made ready.

        Pods that never become ready get the stuck waiting reason instead.
        """
        return self._tick()[0]

    def _tick(self) -> tuple[tuple[str, ...], bool]:
        ms = self.parse()
        update_revision = build_state(ms, self.ref(ms), Observed(), self.support).revision
        return self.kubelet.tick(self.now, self.name, role_level(ms), update_revision)

    def settle(self, rounds: int = 200) -> int:
        """Alternate reconcile passes and ticks until neither changes anything; return the rounds used.

        Raises:
            SimulationError: Still changing after ``rounds`` rounds.
        """
        for n in range(rounds):
            reconciled = self.reconcile()
            _, ticked = self._tick()
            if not reconciled and not ticked:
                return n
        raise SimulationError(f"did not settle within {rounds} rounds")

    # --- reading and editing ------------------------------------------------------------------------------------

    def available(self) -> int:
        """Complete and ready ServingGroups (every role has its instances, every pod Running and Ready)."""
        return available(self.state())

    def condition(self, type_: str = UPDATE_IN_PROGRESS) -> dict[str, Any] | None:
        """A condition of the document's status, or ``None``."""
        for c in (self.doc.get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def set_spec(self, spec: dict[str, Any]) -> None:
        """Replace the spec (a user's edit: the store raises ``metadata.generation`` when it changes)."""
        doc = self.doc
        doc["spec"] = copy.deepcopy(spec)
        self.store.replace(MODELSERVINGS, doc, self.namespace)

    # --- steps --------------------------------------------------------------------------------------------------

    def step(self, number: int, max_passes: int = 100) -> StepReport:
        """Reconcile until a pass changes nothing, then let pods become ready (see the module docstring).

        Raises:
            SimulationError: The planners did not settle within ``max_passes`` passes.
        """
        acc = _Acc()
        self._acc = acc
        try:
            for _ in range(max_passes):
                if not self.reconcile():
                    break
            else:
                raise SimulationError(f"step {number}: the planners did not settle within {max_passes} passes")
        finally:
            self._acc = None
        state = self.state()
        acc.measure(state)
        now_available = available(state)
        roles = role_ready(state)
        status = self.doc.get("status") or {}
        condition = self.condition()
        report = StepReport(
            number=number,
            take_down=tuple(acc.take_down),
            patched=tuple(acc.patched),
            held=tuple(acc.held),
            created=_actions(acc.created),
            surge=_actions(acc.surge),
            removed=tuple(acc.removed),
            available=now_available,
            min_available=now_available if acc.min_available is None else acc.min_available,
            updated=int(status.get("updatedReplicas") or 0),
            live=int(status.get("replicas") or 0),
            role_ready=roles,
            min_role_ready=tuple((role, acc.min_role_ready.get(role, ready), wanted) for role, ready, wanted in roles),
            protected=rollout_step(state).protected,
            condition=None
            if condition is None
            else (str(condition["status"]), str(condition["reason"]), str(condition["message"])),
        )
        became = self.tick()
        self.now += STEP_SECONDS
        return replace(report, became_ready=became)


def _actions(units: dict[str, str]) -> tuple[UnitAction, ...]:
    return tuple(UnitAction(unit, revision) for unit, revision in units.items())


def available(state: PlanningState) -> int:
    """Complete and ready ServingGroups of ``state``."""
    return sum(1 for group in state.groups.sorted() if group.live and state.group_ready(group))


def role_ready(state: PlanningState) -> tuple[tuple[str, int, int], ...]:
    """Under ``RoleRollingUpdate``: ``(role, ready instances, wanted instances)`` over every group."""
    if not state.targets.role_granularity:
        return ()
    totals: dict[str, list[int]] = {role.name: [0, 0] for role in state.ms.spec.template.roles}
    for target in state.targets.groups.values():
        for name, rt in target.roles.items():
            counts = totals.setdefault(name, [0, 0])
            counts[0] += sum(1 for view in rt.views if view.ready and view.ordinal in rt.plan.desired)
            counts[1] += rt.role.replicas
    return tuple((name, ready, wanted) for name, (ready, wanted) in totals.items())


def budgets(state: PlanningState) -> tuple[Budget, tuple[tuple[str, Budget], ...]]:
    """The group-level budget and, under ``RoleRollingUpdate``, each role's."""
    roles: dict[str, Budget] = {}
    for target in state.targets.groups.values():
        for name, rt in target.roles.items():
            roles.setdefault(name, rt.budget)
    return state.targets.budget, tuple(roles.items()) if state.targets.role_granularity else ()
