"""A pure simulation of the ModelServing reconcilers over an in-memory cluster: what a rollout would do, step by step.

:func:`simulate_rollout` is what ``kthena-py rollout plan`` prints; :class:`Simulation` is also the in-memory
fleet the planner unit tests drive.

Guarantees:

* The controller's own planners decide everything: every reconcile pass runs
  :func:`~kthena_py.plan.modelserving.render.podgroups.plan_podgroups`,
  :func:`~kthena_py.plan.modelserving.groups.servinggroups.plan_servinggroups` and
  :func:`~kthena_py.plan.modelserving.rollout.rollout.plan_rollout`, in that order, each plan applied before the next
  planner reads the cluster (the decisions reported per step come from
  :func:`~kthena_py.plan.modelserving.rollout.rollout.rollout_step` on the same state). No I/O and no clock: time moves
  only when ``now`` is advanced.
* :class:`MemoryCluster` applies plans as the API server would for these planners: creations get fresh UIDs
  (an existing name is AlreadyExists and skipped), pods start ``Pending``; deletions need the observed UID and take
  effect at once; updates are merge patches guarded by the UID. Status shares are merged like server-side apply
  does: each key of a share replaces the stored one, conditions are merged by ``type``.
* Pods become Running and Ready only in :meth:`Simulation.tick`, as :class:`Readiness` allows: a pod that never
  becomes ready reports a container waiting reason the planners treat as stuck (``ImagePullBackOff`` by default),
  which is what kwok does in the cluster tier for a bad image.
* :func:`simulate_rollout` starts from OLD converged (every pod ready), switches to NEW's spec, then runs steps.
  A step reconciles until a pass changes nothing, then lets pods become ready. It stops after the first step in
  which no unit is taken down, created, removed or becomes ready, or in which ``UpdateInProgress`` turned False
  and nothing was created or became ready: the outcome is ``complete`` or ``partition`` when ``UpdateInProgress``
  is False (or absent: nothing to roll out), else ``stalled``; after ``max_steps`` steps it is ``unfinished``.
  Same inputs, same report.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kthena_py.api.common import API_VERSION
from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.rolling import Budget
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef, Observed, Plan, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups
from kthena_py.plan.modelserving.rollout.rollout import REASON_PARTITION, UPDATE_IN_PROGRESS, plan_rollout, rollout_step
from kthena_py.vocab.conditions import POD_READY
from kthena_py.vocab.pods import PHASE_PENDING, PHASE_RUNNING

__all__ = [
    "EPOCH",
    "PLACEHOLDER_UID",
    "VOLCANO",
    "MemoryCluster",
    "Outcome",
    "Readiness",
    "RolloutReport",
    "Simulation",
    "SimulationError",
    "StepReport",
    "UnitAction",
    "merge_patch",
    "merge_status",
    "simulate_rollout",
]

EPOCH = 1_700_000_000.0
"""The simulated clock's start (epoch seconds)."""

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
"""The ModelServing uid assumed when the document has none."""

VOLCANO = PodGroupSupport(crd_served=True, sub_group_policy=True)
"""The cluster assumed by default: Volcano's PodGroup CRD with ``subGroupPolicy``."""

STEP_SECONDS = 10.0
"""Simulated seconds per step (only condition transition times show it)."""

_NOT_REMOVALS = frozenset({"rolling update", "recovery"})
"""Reasons of pod deletions that are not a unit being removed (the unit comes back)."""

_KINDS = {"Pod": "pods", "Service": "services", "PodGroup": "podgroups", "ControllerRevision": "revisions"}


class SimulationError(Exception):
    """The planners did not settle within a step (a planner bug: they are meant to converge)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch to ``target`` (a copy; ``None`` deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def merge_status(doc: dict[str, Any], share: KubeObject | None) -> None:
    """Merge one reconciler's status share into ``doc`` as server-side apply would (conditions by type)."""
    if share is None:
        return
    status = doc.setdefault("status", {})
    for key, value in share.items():
        if key != "conditions":
            status[key] = copy.deepcopy(value)
            continue
        by_type = {c["type"]: c for c in status.get("conditions") or []}
        for condition in value:
            by_type[condition["type"]] = copy.deepcopy(condition)
        status["conditions"] = list(by_type.values())


@dataclass
class MemoryCluster:
    """The objects one ModelServing owns, by plural and name."""

    objects: dict[str, dict[str, KubeObject]] = field(
        default_factory=lambda: {plural: {} for plural in _KINDS.values()}
    )
    uids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def observed(self) -> Observed:
        """A snapshot for the planners (copies: planners never see later edits)."""
        snapshot = {plural: tuple(copy.deepcopy(list(objs.values()))) for plural, objs in self.objects.items()}
        return Observed(
            pods=snapshot["pods"],
            services=snapshot["services"],
            podgroups=snapshot["podgroups"],
            revisions=snapshot["revisions"],
        )

    def pods(self) -> dict[str, KubeObject]:
        """The pods, by name (the live store: edits show in the next snapshot)."""
        return self.objects["pods"]

    def remove(self, name: str) -> None:
        """Delete a pod at once (as if someone deleted it)."""
        del self.objects["pods"][name]

    def apply(self, plan: Plan, now: float) -> None:
        """Apply a plan's deletes (UID preconditions), updates (merge patches) and creates (fresh UIDs)."""
        for delete in plan.deletes:
            store = self.objects[_KINDS[delete.kind]]
            obj = store.get(delete.name)
            if obj is not None and obj["metadata"].get("uid") == delete.uid:
                del store[delete.name]
        for update in plan.updates:
            store = self.objects[_KINDS[update.kind]]
            obj = store.get(update.name)
            if obj is not None and obj["metadata"].get("uid") == update.uid:
                store[update.name] = merge_patch(obj, update.patch)
        for created in plan.creates:
            store = self.objects[_KINDS[created["kind"]]]
            name = created["metadata"]["name"]
            if name in store:
                continue  # AlreadyExists
            obj = copy.deepcopy(created)
            obj["metadata"]["uid"] = f"uid-{next(self.uids)}"
            obj["metadata"]["creationTimestamp"] = format_time(now)
            if created["kind"] == "Pod":
                obj["status"] = {"phase": PHASE_PENDING}
            store[name] = obj


@dataclass(frozen=True)
class Readiness:
    """Which pending pods become Running and Ready at the end of a step."""

    per_step: int | None = None
    """At most this many units (ServingGroups, or role instances under ``RoleRollingUpdate``) become ready per
    step, lowest group and role ordinal first; ``None``: every pending unit."""
    update_revision: bool = True
    """``False``: no pod of the update revision ever becomes ready (a bad image)."""
    never: frozenset[str] = frozenset()
    """Units whose pods never become ready: ServingGroup names (``<ms>-<g>``) or role instances
    (``<ms>-<g>/<role>-<r>``)."""
    bad_image: str | None = None
    """Pods with a container image containing this text never become ready."""
    stuck_reason: str = "ImagePullBackOff"
    """The container waiting reason a pod that never becomes ready reports."""


@dataclass(frozen=True)
class UnitAction:
    """A unit created in a step, and the revision it was created at."""

    unit: str
    revision: str


@dataclass(frozen=True)
class StepReport:
    """What one step did and the state it left (before its pods became ready)."""

    number: int
    take_down: tuple[str, ...] = ()
    """Outdated units the rollout took down (recreate), in the order chosen."""
    patched: tuple[str, ...] = ()
    """Outdated units the rollout patched in place (``updateMethod: InPlace``)."""
    held: tuple[str, ...] = ()
    """What role coordination held back during the step (``roleCoordination``), with the reason."""
    created: tuple[UnitAction, ...] = ()
    """Units (re)created within ``replicas``."""
    surge: tuple[UnitAction, ...] = ()
    """Units created beyond ``replicas`` (``maxSurge``)."""
    removed: tuple[str, ...] = ()
    """Units scaled away (surplus surge units, replicas lowered, roles no longer in the template)."""
    became_ready: tuple[str, ...] = ()
    """Units whose pods became ready at the end of the step."""
    available: int = 0
    """Complete and ready ServingGroups once the step's reconciles settled."""
    min_available: int = 0
    """The fewest complete and ready ServingGroups after any single plan of the step."""
    updated: int = 0
    """``status.updatedReplicas`` at the end of the step."""
    live: int = 0
    """``status.replicas`` (live ServingGroups) at the end of the step."""
    role_ready: tuple[tuple[str, int, int], ...] = ()
    """Under ``RoleRollingUpdate``: ``(role, ready instances, wanted instances)`` over every group."""
    min_role_ready: tuple[tuple[str, int, int], ...] = ()
    """Under ``RoleRollingUpdate``: the fewest ready instances of each role after any single plan of the step."""
    protected: tuple[str, ...] = ()
    """Outdated units kept by the partition."""
    condition: tuple[str, str, str] | None = None
    """``UpdateInProgress`` as ``(status, reason, message)``, or ``None`` when absent."""

    @property
    def acted(self) -> bool:
        """Whether a unit was taken down, created, removed or became ready."""
        return bool(self.take_down or self.patched or self.created or self.surge or self.removed or self.became_ready)


Outcome = Literal["complete", "partition", "stalled", "unfinished"]


@dataclass(frozen=True)
class RolloutReport:
    """The result of :func:`simulate_rollout`."""

    name: str
    namespace: str
    replicas: int
    role_granularity: bool
    budget: Budget
    """The group-level budget (``ServingGroupRollingUpdate``)."""
    role_budgets: tuple[tuple[str, Budget], ...]
    """The budget of each role (``RoleRollingUpdate``)."""
    old_revision: str
    new_revision: str
    steps: tuple[StepReport, ...]
    outcome: Outcome
    min_available: int
    """The fewest complete and ready ServingGroups at any moment of the rollout."""
    min_role_ready: tuple[tuple[str, int, int], ...] = ()
    """Under ``RoleRollingUpdate``: ``(role, fewest ready instances, wanted instances)`` over the rollout."""


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
        available = _available(state)
        self.min_available = available if self.min_available is None else min(self.min_available, available)
        for role, ready, _ in _role_ready(state):
            self.min_role_ready[role] = min(self.min_role_ready.get(role, ready), ready)


def _role_level(ms: ModelServing) -> bool:
    strategy = ms.spec.rollout_strategy
    return strategy is not None and strategy.type == "RoleRollingUpdate"


class Simulation:
    """One ModelServing document, its in-memory cluster, and the three planners.

    Args:
        doc: The ModelServing document (kept and updated in place: status shares are merged into it).
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
        self.doc = doc
        metadata = doc.setdefault("metadata", {})
        metadata.setdefault("namespace", "default")
        metadata.setdefault("uid", PLACEHOLDER_UID)
        metadata.setdefault("generation", 1)
        self.support = support
        self.readiness = readiness or Readiness()
        self.now = now
        self.cluster = MemoryCluster()
        self.events: list[tuple[str, str, str]] = []
        self._acc: _Acc | None = None

    # --- the planners -------------------------------------------------------------------------------------------

    def parse(self) -> ModelServing:
        """The document as the planners see it."""
        return ModelServing.model_validate(self.doc)

    def ref(self, ms: ModelServing) -> MSRef:
        """The identity of the ModelServing."""
        return MSRef(ms.name, ms.namespace, ms.uid, ms.generation)

    def state(self) -> PlanningState:
        """The planning state of the cluster as it is now."""
        ms = self.parse()
        return build_state(ms, self.ref(ms), self.cluster.observed(), self.support)

    def _record(self, ms: ModelServing, plan: Plan) -> None:
        acc = self._acc
        if acc is None:
            return
        role_level = _role_level(ms)
        replicas = {role.name: role.replicas for role in ms.spec.template.roles}
        pods = self.cluster.pods()
        for delete in plan.deletes:
            pod = pods.get(delete.name)
            if delete.kind == "Pod" and pod is not None and delete.reason not in _NOT_REMOVALS:
                unit = self._unit_of(pod, role_level)
                if unit is not None and unit[0] not in acc.removed:
                    acc.removed.append(unit[0])
        for created in plan.creates:
            if created["kind"] != "Pod":
                continue
            unit = self._unit_of(created, role_level)
            if unit is None:
                continue
            name, group, role, ordinal = unit
            revision = str(created["metadata"]["labels"].get(naming.LABEL_REVISION, ""))
            beyond = ordinal >= replicas.get(role, 0) if role_level else group >= ms.spec.replicas
            (acc.surge if beyond else acc.created).setdefault(name, revision)

    def _unit_of(self, pod: KubeObject, role_level: bool) -> tuple[str, int, str, int] | None:
        labels = pod.get("metadata", {}).get("labels") or {}
        ms_name = str(self.doc["metadata"].get("name", ""))
        group = naming.parse_group_name(ms_name, str(labels.get(naming.LABEL_GROUP_NAME, "")))
        role = str(labels.get(naming.LABEL_ROLE, ""))
        role_id = str(labels.get(naming.LABEL_ROLE_ID, ""))
        ordinal = naming.parse_role_id(role, role_id)
        if group is None or ordinal is None:
            return None
        name = naming.group_name(ms_name, group)
        return (f"{name}/{role_id}" if role_level else name), group, role, ordinal

    def _run(self, ms: ModelServing, plan: Plan) -> bool:
        self._record(ms, plan)
        self.cluster.apply(plan, self.now)
        self.events.extend((e.type, e.reason, e.message) for e in plan.events)
        changed = bool(plan.creates or plan.deletes or plan.updates)
        if plan.status is not None:
            before = copy.deepcopy(self.doc.get("status"))
            merge_status(self.doc, plan.status)
            changed = changed or before != self.doc.get("status")
        self.after_apply()
        return changed

    def after_apply(self) -> None:
        """Called after every plan is applied (records the lowest availability of a step)."""
        if self._acc is not None:
            self._acc.measure(self.state())

    def reconcile(self, *, rollout: bool = True) -> bool:
        """One pass of every reconciler; return whether anything changed (objects or status)."""
        ms = self.parse()
        changed = self._run(ms, plan_podgroups(ms, self.ref(ms), self.cluster.observed(), self.support))
        ms = self.parse()
        plan = plan_servinggroups(ms, self.ref(ms), self.cluster.observed(), self.support, self.now)
        changed = self._run(ms, plan) or changed
        if rollout:
            ms = self.parse()
            plan = plan_rollout(ms, self.ref(ms), self.cluster.observed(), self.support, self.now)
            step = plan.step
            if self._acc is not None and step is not None:
                for unit in step.take_down:
                    chosen = self._acc.patched if unit in step.in_place else self._acc.take_down
                    if unit not in chosen:
                        chosen.append(unit)
                self._acc.held.extend(what for what in step.held if what not in self._acc.held)
            changed = self._run(ms, plan) or changed
        return changed

    # --- pods becoming ready ------------------------------------------------------------------------------------

    def _never_ready(self, pod: KubeObject, unit: str, update_revision: str) -> bool:
        rules = self.readiness
        labels = pod["metadata"].get("labels") or {}
        if unit in rules.never or unit.split("/")[0] in rules.never:
            return True
        if not rules.update_revision and labels.get(naming.LABEL_REVISION) == update_revision:
            return True
        images = [str(c.get("image", "")) for c in pod["spec"].get("containers") or []]
        return rules.bad_image is not None and any(rules.bad_image in image for image in images)

    def tick(self) -> tuple[str, ...]:
        """Let pending pods become Running and Ready (see :class:`Readiness`); return the units made ready.

        Pods that never become ready get the stuck waiting reason instead.
        """
        return self._tick()[0]

    def _tick(self) -> tuple[tuple[str, ...], bool]:
        ms = self.parse()
        role_level = _role_level(ms)
        update_revision = build_state(ms, self.ref(ms), Observed(), self.support).revision
        pending: dict[tuple[int, str, int], tuple[str, list[KubeObject]]] = {}
        stuck = restarted = False
        for pod in self.cluster.pods().values():
            status = pod.get("status") or {}
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if status.get("phase") == PHASE_RUNNING:
                if _image_drift(pod) and not self._never_ready(pod, "", update_revision):
                    # An in-place image patch: the container restarts on the new image (as the kubelet does).
                    restarts = max(
                        (int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []), default=0
                    )
                    pod["status"] = _ready_status(self.now, pod, restarts + 1)
                    restarted = True
                continue
            unit = self._unit_of(pod, role_level)
            if unit is None:
                continue
            name, group, role, ordinal = unit
            if self._never_ready(pod, name, update_revision):
                if not status.get("containerStatuses"):
                    stuck = True
                    waiting = {"waiting": {"reason": self.readiness.stuck_reason}}
                    pod["status"] = {
                        "phase": PHASE_PENDING,
                        "containerStatuses": [{"name": "main", "restartCount": 0, "state": waiting}],
                    }
                continue
            key = (group, role, ordinal) if role_level else (group, "", 0)
            pending.setdefault(key, (name, []))[1].append(pod)
        chosen = sorted(pending)
        if self.readiness.per_step is not None:
            chosen = chosen[: max(0, self.readiness.per_step)]
        made: list[str] = []
        for key in chosen:
            name, pods = pending[key]
            for pod in pods:
                pod["status"] = _ready_status(self.now, pod)
            made.append(name)
        return tuple(made), bool(made) or stuck or restarted

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

    # --- reading the cluster ------------------------------------------------------------------------------------

    def available(self) -> int:
        """Complete and ready ServingGroups (every role has its instances, every pod Running and Ready)."""
        return _available(self.state())

    def condition(self, type_: str = UPDATE_IN_PROGRESS) -> dict[str, Any] | None:
        """A condition of the document's status, or ``None``."""
        for c in (self.doc.get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def set_spec(self, spec: dict[str, Any]) -> None:
        """Replace the spec (a user's edit: ``metadata.generation`` goes up by one)."""
        self.doc["spec"] = copy.deepcopy(spec)
        self.doc["metadata"]["generation"] = int(self.doc["metadata"].get("generation", 1)) + 1

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
        rollout = rollout_step(state)
        available = _available(state)
        role_ready = _role_ready(state)
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
            available=available,
            min_available=available if acc.min_available is None else acc.min_available,
            updated=int(status.get("updatedReplicas") or 0),
            live=int(status.get("replicas") or 0),
            role_ready=role_ready,
            min_role_ready=tuple(
                (role, acc.min_role_ready.get(role, ready), wanted) for role, ready, wanted in role_ready
            ),
            protected=rollout.protected,
            condition=None
            if condition is None
            else (str(condition["status"]), str(condition["reason"]), str(condition["message"])),
        )
        became = self.tick()
        self.now += STEP_SECONDS
        return replace(report, became_ready=became)


def _actions(units: dict[str, str]) -> tuple[UnitAction, ...]:
    return tuple(UnitAction(unit, revision) for unit, revision in units.items())


def _available(state: PlanningState) -> int:
    return sum(1 for group in state.groups.sorted() if group.live and state.group_ready(group))


def _role_ready(state: PlanningState) -> tuple[tuple[str, int, int], ...]:
    if not state.targets.role_granularity:
        return ()
    totals: dict[str, list[int]] = {role.name: [0, 0] for role in state.ms.spec.template.roles}
    for target in state.targets.groups.values():
        for name, rt in target.roles.items():
            counts = totals.setdefault(name, [0, 0])
            counts[0] += sum(1 for view in rt.views if view.ready and view.ordinal in rt.plan.desired)
            counts[1] += rt.role.replicas
    return tuple((name, ready, wanted) for name, (ready, wanted) in totals.items())


def _ready_status(now: float, pod: KubeObject | None = None, restarts: int = 0) -> KubeObject:
    containers = ((pod or {}).get("spec") or {}).get("containers") or [{"name": "main"}]
    return {
        "phase": PHASE_RUNNING,
        "conditions": [{"type": POD_READY, "status": "True", "lastTransitionTime": format_time(now)}],
        "containerStatuses": [
            {"name": c.get("name"), "image": c.get("image"), "ready": True, "restartCount": restarts}
            for c in containers
        ],
    }


def _image_drift(pod: KubeObject) -> bool:
    """A Running pod whose spec images were patched in place and whose status still reports the old ones."""
    seen = {c.get("name"): c.get("image") for c in (pod.get("status") or {}).get("containerStatuses") or []}
    return any(seen.get(c.get("name"), c.get("image")) != c.get("image") for c in pod["spec"].get("containers") or [])


def _document(doc: KubeObject) -> dict[str, Any]:
    """A copy of a ModelServing document as if just created: no status, generation 1."""
    metadata = {k: v for k, v in (doc.get("metadata") or {}).items() if k in ("name", "namespace", "uid", "labels")}
    metadata["annotations"] = (doc.get("metadata") or {}).get("annotations") or {}
    if not metadata["annotations"]:
        del metadata["annotations"]
    metadata["generation"] = 1
    return {
        "apiVersion": doc.get("apiVersion", API_VERSION),
        "kind": "ModelServing",
        "metadata": copy.deepcopy(metadata),
        "spec": copy.deepcopy(doc.get("spec") or {}),
    }


def _budgets(state: PlanningState) -> tuple[Budget, tuple[tuple[str, Budget], ...]]:
    roles: dict[str, Budget] = {}
    for target in state.targets.groups.values():
        for name, rt in target.roles.items():
            roles.setdefault(name, rt.budget)
    return state.targets.budget, tuple(roles.items()) if state.targets.role_granularity else ()


def simulate_rollout(
    old: KubeObject,
    new: KubeObject,
    readiness: Readiness | None = None,
    *,
    support: PodGroupSupport = VOLCANO,
    max_steps: int = 200,
) -> RolloutReport:
    """Simulate the rollout from ``old`` to ``new`` (see the module docstring).

    Args:
        old: The ModelServing as it runs now (its status, if any, is ignored: it starts converged and ready).
        new: The edited ModelServing (only its ``spec`` is used).
        readiness: Which pods become ready per step during the rollout (default: every pending pod).
        support: PodGroup support of the simulated cluster.
        max_steps: Steps before giving up (outcome ``unfinished``).

    Returns:
        The report.

    Raises:
        pydantic.ValidationError: A document is not a valid ModelServing.
        PluginError: A plugin is unknown or misconfigured.
        SimulationError: OLD does not converge, or a step does not settle.
    """
    sim = Simulation(_document(old), support=support)
    sim.settle()
    start = sim.state()
    old_revision = start.revision
    sim.readiness = readiness or Readiness()
    sim.set_spec(new.get("spec") or {})
    state = sim.state()
    budget, role_budgets = _budgets(state)
    lowest = _available(state)
    role_lowest = {role: ready for role, ready, _ in _role_ready(state)}
    steps: list[StepReport] = []
    outcome: Outcome = "unfinished"
    for number in range(1, max_steps + 1):
        report = sim.step(number)
        steps.append(report)
        lowest = min(lowest, report.min_available)
        for role, ready, _ in report.min_role_ready:
            role_lowest[role] = min(role_lowest.get(role, ready), ready)
        if not report.acted or (_finished(report) and not report.became_ready and not report.created):
            outcome = _outcome(report)
            break
    return RolloutReport(
        name=state.ref.name,
        namespace=state.ref.namespace,
        replicas=state.ms.spec.replicas,
        role_granularity=state.targets.role_granularity,
        budget=budget,
        role_budgets=role_budgets,
        old_revision=old_revision,
        new_revision=state.revision,
        steps=tuple(steps),
        outcome=outcome,
        min_available=lowest,
        min_role_ready=tuple((role, role_lowest.get(role, 0), wanted) for role, _, wanted in _role_ready(state)),
    )


def _finished(report: StepReport) -> bool:
    return report.condition is not None and report.condition[0] == "False"


def _outcome(report: StepReport) -> Outcome:
    condition = report.condition
    if condition is None or condition[0] == "False":
        return "partition" if condition is not None and condition[1] == REASON_PARTITION else "complete"
    return "stalled"
