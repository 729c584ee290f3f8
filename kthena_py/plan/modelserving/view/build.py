"""Build the ``kthena-py status`` tree of one ModelServing from the objects a client read.

Guarantees:

* Pure: objects in, a :class:`~kthena_py.plan.modelserving.view.model.StatusView` out; no I/O, no clock (ages are
  relative to the ``now`` passed in), the inputs are never mutated. Equal inputs give equal trees.
* Objects controlled by another UID (a deleted predecessor of the same name) are left out; objects without a
  controller reference are taken as the ModelServing's.
* Membership is the planners': pods are parsed into ServingGroups, role instances and pods by
  :func:`~kthena_py.plan.modelserving.core.state.build_state` (so a pod the controller would not recognise is not
  shown), and readiness, wanted ordinals, partition protection and updated-ness are its targets'. Readiness is the
  pods' (complete, Running and Ready, with the instance's headless Service): a unit the eviction tracker records as
  disrupted is not shown as unready for it, the record is a note of its own. Wanted groups
  and role instances without any pod are shown as missing.
* A pod's revision is its ``revision`` label compared with ``status.updateRevision`` (``updated``) and
  ``status.currentRevision`` (``current``); any other is ``old``.
* Every pod that is not Running and Ready (or is terminating) gets one :class:`Why`, first match wins: terminating
  (``eviction`` when the eviction tracker records a grant for it), a terminal phase, an image that cannot be
  pulled, a crash loop (with restarts and the last exit), another stuck container, a failed in-place update, a
  scheduling wait (unscheduled and Pending), starting (scheduled and Pending), an in-place update being verified,
  not Ready.
* A scheduling wait says what the pod waits for. The scheduler's own verdict on the pod (``PodScheduled=False``
  naming ``Insufficient <resource>``) comes first: an extended resource (a name with a domain, e.g.
  ``nvidia.com/gpu``) is a wait for GPUs, anything else for resources, with the pod's request of it. Else the
  ModelServing's ``Scheduled`` condition (written by the scheduling reconciler) says which wait it is
  (``InsufficientGPU``, ``InsufficientResources``, ``QueueFull``/``NotEnqueued``, ``Unschedulable``,
  ``Scheduling``); else the pod's own message makes it ``unschedulable``; else it waits for the scheduler. The
  queue position is read from the ``Scheduled`` message (``position N``) and shown on every waiting pod.
* Holds are notes of the group or instance: partition protection while a rollout is in progress, an outdated unit
  waiting for its turn, a unit the eviction tracker records as disrupted (with how long it still counts), a unit
  that is no longer wanted (scale down or surge). The ModelServing's own notes: a status the controller has not
  caught up with (``observedGeneration``), the partition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from kthena_py.api.modelcache import ModelCache
from kthena_py.api.modelserving import ModelServing
from kthena_py.api.podspec import sum_resources
from kthena_py.api.quantity import QuantityFormat, format_quantity
from kthena_py.plan.modelcache.metadata import describe_model, gguf_of, model_config_of
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import GroupState, InstanceState, PodState
from kthena_py.plan.modelserving.core.modelcache import CacheGate, decide_gate, templates_of
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.targets import GroupTarget, RoleTargets
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef, Observed, PodGroupSupport
from kthena_py.plan.modelserving.eviction.tracker import (
    TrackerEntry,
    group_key,
    role_key,
    tracker_entries,
)
from kthena_py.vocab.conditions import (
    POD_SCHEDULED,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_NOT_ENQUEUED,
    REASON_QUEUE_FULL,
    REASON_SCHEDULING,
    REASON_UNSCHEDULABLE,
    SCHEDULED,
    UPDATE_IN_PROGRESS,
)
from kthena_py.vocab.labels import ADAPTER_LABEL_PREFIX, ENTRY_VALUE, SERVING_ENTRY, VOLCANO_QUEUE
from kthena_py.vocab.owners import controller_uid
from kthena_py.vocab.pods import CRASH_LOOP, IMAGE_PULL_REASONS, PHASE_PENDING, TERMINAL_PHASES
from kthena_py.vocab.times import parse_time

from .model import (
    ConditionView,
    GroupView,
    InstanceView,
    ModelCacheView,
    NoteKind,
    PodView,
    RevisionState,
    StatusView,
    Why,
)
from .render import format_age

__all__ = ["build_view", "queue_position", "scheduling_kind"]

_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9][A-Za-z0-9._/-]*[A-Za-z0-9])")
_POSITION = re.compile(r"\bposition (\d+)")
_BINARY = frozenset({"memory", "ephemeral-storage"})
_STATUS_FIELDS = ("observedGeneration", "currentRevision", "updateRevision", "collisionCount")

_SCHEDULING_KINDS: dict[str, NoteKind] = {
    REASON_INSUFFICIENT_GPU: "gpu",
    REASON_INSUFFICIENT_RESOURCES: "resources",
    REASON_QUEUE_FULL: "queue",
    REASON_NOT_ENQUEUED: "queue",
    REASON_UNSCHEDULABLE: "unschedulable",
    REASON_SCHEDULING: "scheduling",
}


def scheduling_kind(reason: str) -> NoteKind:
    """The kind of wait a ``Scheduled=False`` reason names (an unknown reason: ``scheduling``)."""
    return _SCHEDULING_KINDS.get(reason, "scheduling")


def queue_position(message: str) -> int | None:
    """The queue position a ``Scheduled`` message gives (``... position N ...``), else ``None``."""
    match = _POSITION.search(message)
    return int(match.group(1)) if match else None


# --- small readers ---------------------------------------------------------------------------------------------


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _age(now: float, stamp: Any) -> float | None:
    when = parse_time(stamp)
    return None if when is None else max(0.0, now - when)


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in _list(_dict(obj.get("status")).get("conditions")) if isinstance(c, Mapping)]


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == kind), None)


def _revision_state(revision: str, current: str, update: str) -> RevisionState:
    if not revision:
        return ""
    if revision == update:
        return "updated"
    return "current" if revision == current else "old"


# --- the context one tree is built in --------------------------------------------------------------------------


class _Context:
    def __init__(
        self,
        ms_obj: Mapping[str, Any],
        state: PlanningState,
        podgroups: Sequence[KubeObject],
        entries: Mapping[str, TrackerEntry],
        now: float,
        adapters: Mapping[str, str] | None = None,
    ) -> None:
        status = _dict(ms_obj.get("status"))
        self.adapters = dict(adapters or {})
        self.state = state
        self.now = now
        self.current = _str(status.get("currentRevision"))
        self.update = _str(status.get("updateRevision")) or state.revision
        self.entries = dict(entries)
        self.podgroups = {_str(_dict(pg.get("metadata")).get("name")): pg for pg in podgroups}
        scheduled = _condition(ms_obj, SCHEDULED)
        self.wait: Mapping[str, Any] | None = scheduled if scheduled and scheduled.get("status") == "False" else None
        rollout = _condition(ms_obj, UPDATE_IN_PROGRESS)
        self.rolling = state.targets.rollout_in_progress or bool(rollout and rollout.get("status") == "True")
        annotations = _dict(_dict(ms_obj.get("metadata")).get("annotations"))
        self.queue = _str(annotations.get(VOLCANO_QUEUE)) or next(
            (_str(_dict(pg.get("spec")).get("queue")) for pg in podgroups if _dict(pg.get("spec")).get("queue")), ""
        )

    @property
    def ref(self) -> MSRef:
        return self.state.ref

    def group_key(self, group: str) -> str:
        return group_key(self.ref.namespace, self.ref.name, group)

    def role_key(self, group: str, role: str, ordinal: int) -> str:
        return role_key(self.ref.namespace, self.ref.name, group, role, naming.role_id(role, ordinal))

    def evicted(self, pod: PodState) -> TrackerEntry | None:
        return next(
            (e for e in self.entries.values() if pod.uid in e.granted or (pod.name and e.trigger_pod_name == pod.name)),
            None,
        )

    def eviction_note(self, key: str) -> Why | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        left = format_age(entry.expires_at - self.now)
        pod = f" of pod {entry.trigger_pod_name}" if entry.trigger_pod_name else ""
        return Why("eviction", f"eviction{pod} granted: counts as disrupted for {left} more")


# --- pods ------------------------------------------------------------------------------------------------------


def _waiting(raw: Mapping[str, Any], reasons: frozenset[str] | None = None) -> Mapping[str, Any]:
    status = _dict(raw.get("status"))
    for key in ("initContainerStatuses", "containerStatuses"):
        for item in _list(status.get(key)):
            waiting = _dict(_dict(_dict(item).get("state")).get("waiting"))
            if waiting and (reasons is None or waiting.get("reason") in reasons):
                return waiting
    return {}


def _last_exit(raw: Mapping[str, Any]) -> str:
    for item in _list(_dict(raw.get("status")).get("containerStatuses")):
        terminated = _dict(_dict(_dict(item).get("lastState")).get("terminated"))
        if terminated:
            reason = _str(terminated.get("reason")) or "exited"
            code = terminated.get("exitCode")
            return f"{reason} (exit code {code})" if isinstance(code, int) else reason
    return ""


def _request(raw: Mapping[str, Any], resource: str) -> str:
    containers = [c for c in _list(_dict(raw.get("spec")).get("containers")) if isinstance(c, dict)]
    amount = sum_resources(containers).get(resource) or sum_resources(containers, "limits").get(resource)
    if amount is None or amount == Decimal(0):
        return ""
    return format_quantity(amount, QuantityFormat.BINARY_SI if resource in _BINARY else QuantityFormat.DECIMAL_SI)


def _queue_text(ctx: _Context, reason: str) -> str:
    queue = f"queue {ctx.queue}" if ctx.queue else "the queue"
    return f"waiting in {queue} ({'full' if reason == REASON_QUEUE_FULL else 'not enqueued'})"


_WAIT_TEXT: dict[NoteKind, str] = {
    "gpu": "waiting for GPUs",
    "resources": "waiting for resources",
    "unschedulable": "unschedulable",
    "scheduling": "waiting for the scheduler",
}


def _podgroup_message(ctx: _Context, group: str) -> str:
    podgroup = ctx.podgroups.get(group)
    if podgroup is None:
        return ""
    condition = next((c for c in _conditions(podgroup) if c.get("type") == REASON_UNSCHEDULABLE), None)
    return _str(condition.get("message")) if condition and condition.get("status") == "True" else ""


def _scheduling_why(ctx: _Context, pod: PodState, raw: Mapping[str, Any]) -> Why:
    condition = _condition(raw, POD_SCHEDULED)
    own = _str(condition.get("message")) if condition and condition.get("status") == "False" else ""
    wait_message = _str(ctx.wait.get("message")) if ctx.wait else ""
    position = queue_position(wait_message) if ctx.wait else None
    found = _INSUFFICIENT.search(own)
    if found:
        resource = found.group(1)
        kind: NoteKind = "gpu" if "/" in resource else "resources"
        amount = _request(raw, resource)
        text = f"{_WAIT_TEXT[kind]}: {resource}" + (f" {amount} per pod" if amount else "")
        detail = own
    elif ctx.wait is not None:
        reason = _str(ctx.wait.get("reason"))
        kind = scheduling_kind(reason)
        text = _queue_text(ctx, reason) if kind == "queue" else _WAIT_TEXT[kind]
        detail = own or _podgroup_message(ctx, naming.group_name(ctx.ref.name, pod.group)) or wait_message
    elif own or (detail := _podgroup_message(ctx, naming.group_name(ctx.ref.name, pod.group))):
        kind, text, detail = "unschedulable", _WAIT_TEXT["unschedulable"], own or detail
    else:
        kind, text, detail = "scheduling", _WAIT_TEXT["scheduling"], ""
    if position is not None:
        text += f", position {position}" if kind == "queue" else f", queue position {position}"
    return Why(kind, text, detail, position)


def _pod_why(ctx: _Context, pod: PodState, raw: Mapping[str, Any]) -> Why | None:
    status = _dict(raw.get("status"))
    if pod.terminating:
        if ctx.evicted(pod) is not None:
            return Why("eviction", "evicted (the eviction budget granted it)")
        return Why("terminating", "terminating")
    if pod.phase in TERMINAL_PHASES:
        what = " ".join(x for x in (_str(status.get("reason")), _str(status.get("message"))) if x)
        return Why("failed", f"{pod.phase}" + (f": {what}" if what else ""))
    if pod.problem in IMAGE_PULL_REASONS:
        waiting = _waiting(raw, IMAGE_PULL_REASONS)
        return Why("image", f"image pull: {pod.problem}", _str(waiting.get("message")))
    if pod.problem == CRASH_LOOP:
        last = _last_exit(raw)
        text = "crash loop" + (f": last exit {last}" if last else "")
        return Why("crash", text, _str(_waiting(raw, frozenset({CRASH_LOOP})).get("message")))
    if pod.problem:
        return Why("container", pod.problem, _str(_waiting(raw, frozenset({pod.problem})).get("message")))
    if pod.inplace_failed:
        return Why("updating", f"in-place update failed: {pod.inplace_failed}")
    if pod.phase in (PHASE_PENDING, "") and not _str(_dict(raw.get("spec")).get("nodeName")):
        return _scheduling_why(ctx, pod, raw)
    if pod.phase in (PHASE_PENDING, ""):
        reason = _str(_waiting(raw).get("reason"))
        return Why("starting", "starting" + (f" ({reason})" if reason else ""))
    if pod.updating:
        return Why("updating", "in-place update: waiting for it to be Ready on the new template")
    if not pod.ready:
        return Why("not-ready", "not ready")
    return None


def _pod_view(ctx: _Context, pod: PodState) -> PodView:
    raw = ctx.state.raw_pods.get(pod.name, {})
    return PodView(
        name=pod.name,
        index=pod.index,
        phase=pod.phase or PHASE_PENDING,
        ready=pod.ready,
        revision=pod.revision,
        revision_state=_revision_state(pod.revision, ctx.current, ctx.update),
        node=_str(_dict(raw.get("spec")).get("nodeName")),
        restarts=pod.restarts,
        age=None if pod.created_at is None else max(0.0, ctx.now - pod.created_at),
        terminating=pod.terminating,
        why=_pod_why(ctx, pod, raw),
        **_pod_adapters(ctx, raw),
    )


def _pod_adapters(ctx: _Context, raw: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    labels = _dict(_dict(raw.get("metadata")).get("labels"))
    loaded = tuple(
        sorted(
            name
            for key, digest in labels.items()
            if str(key).startswith(ADAPTER_LABEL_PREFIX)
            and ctx.adapters.get(name := str(key)[len(ADAPTER_LABEL_PREFIX) :], digest) == digest
        )
    )
    entry = labels.get(SERVING_ENTRY) == ENTRY_VALUE
    missing = tuple(name for name in ctx.adapters if name not in loaded) if entry else ()
    return {"adapters": loaded, "adapters_missing": missing}


# --- instances and groups --------------------------------------------------------------------------------------


def _expected_pods(rt: RoleTargets | None, ordinal: int, instance: InstanceState | None) -> int:
    if rt is None:
        return len(instance.pods) if instance is not None else 0
    target = rt.instances.get(ordinal)
    role = target.role if target is not None and target.role is not None else rt.role
    return role.worker_replicas + 1


def _instance_view(
    ctx: _Context, group: GroupState | None, group_name: str, role: str, ordinal: int, rt: RoleTargets | None
) -> InstanceView:
    instance = group.instances.get((role, ordinal)) if group is not None else None
    pods = tuple(_pod_view(ctx, pod) for pod in instance.sorted_pods()) if instance is not None else ()
    notes: list[Why] = []
    view = next((v for v in rt.views if v.ordinal == ordinal), None) if rt is not None else None
    if rt is not None and ctx.state.targets.role_granularity and instance is not None and instance.live:
        target = rt.instances.get(ordinal)
        if ordinal not in rt.plan.desired:
            notes.append(Why("scale-down", "no longer wanted: being removed"))
        elif target is not None and not target.updated and ctx.rolling:
            if target.protected:
                notes.append(Why("rollout", f"held by the role's partition {rt.budget.partition}"))
            else:
                notes.append(Why("rollout", "outdated: waiting for its turn in the rollout"))
    live = instance is not None and instance.live
    if rt is not None and live and instance is not None and instance.service is None and naming.needs_service(rt.role):
        notes.append(Why("missing", "its headless Service is missing"))
    eviction = ctx.eviction_note(ctx.role_key(group_name, role, ordinal))
    if eviction is not None:
        notes.append(eviction)
    missing = instance is None or not instance.pods
    if missing:
        notes.append(Why("missing", "no pod yet"))
    return InstanceView(
        role=role,
        ordinal=ordinal,
        name=naming.role_id(role, ordinal),
        ready_pods=sum(1 for pod in (instance.pods.values() if instance else ()) if pod.healthy_ready),
        expected_pods=_expected_pods(rt, ordinal, instance),
        ready=bool(view and view.ready),
        pods=pods,
        notes=tuple(notes),
        missing=missing,
    )


def _group_notes(ctx: _Context, ordinal: int, group: GroupState | None, target: GroupTarget | None) -> list[Why]:
    targets = ctx.state.targets
    notes: list[Why] = []
    live = group is not None and group.live
    if live and ordinal not in targets.plan.desired:
        notes.append(Why("scale-down", "no longer wanted (scale down or surge): being removed"))
    elif live and target is not None and not target.updated and ctx.rolling and not targets.role_granularity:
        if ordinal in targets.plan.protected:
            notes.append(Why("rollout", f"held by partition {targets.budget.partition}: keeps its revision"))
        else:
            notes.append(Why("rollout", "outdated: waiting for its turn in the rollout"))
    eviction = ctx.eviction_note(ctx.group_key(naming.group_name(ctx.ref.name, ordinal)))
    if eviction is not None:
        notes.append(eviction)
    if group is None or not group.has_pods:
        notes.append(Why("missing", "no pod yet"))
    return notes


def _group_view(ctx: _Context, ordinal: int) -> GroupView:
    state = ctx.state
    group = state.groups.get(ordinal)
    target = state.targets.groups.get(ordinal) or state.targets.observed.get(ordinal)
    observed_target = state.targets.observed.get(ordinal)
    name = naming.group_name(ctx.ref.name, ordinal)
    role_targets = target.roles if target is not None else {}
    keys: set[tuple[str, int]] = set(group.instances) if group is not None else set()
    for role, rt in role_targets.items():
        keys.update((role, r) for r in rt.plan.desired)
    order = {role: i for i, role in enumerate(role_targets)}
    instances = tuple(
        _instance_view(ctx, group, name, role, r, role_targets.get(role))
        for role, r in sorted(keys, key=lambda k: (order.get(k[0], len(order)), k[0], k[1]))
    )
    roles = tuple(
        (role, sum(1 for view in rt.views if view.ready), rt.role.replicas) for role, rt in role_targets.items()
    )
    revision = (group.revision(ctx.update) if group is not None else None) or (target.revision if target else None)
    podgroup = ctx.podgroups.get(name)
    return GroupView(
        ordinal=ordinal,
        name=name,
        ready=bool(group is not None and observed_target is not None and observed_target.ready),
        revision=revision or "",
        revision_state=_revision_state(revision or "", ctx.current, ctx.update),
        roles=roles,
        instances=instances,
        podgroup_phase=_str(_dict(podgroup.get("status")).get("phase")) if podgroup is not None else "",
        notes=tuple(_group_notes(ctx, ordinal, group, target)),
        missing=group is None or not group.has_pods,
    )


# --- the ModelServing ------------------------------------------------------------------------------------------


def _parse(ms_obj: Mapping[str, Any]) -> ModelServing:
    status = _dict(ms_obj.get("status"))
    body = {key: ms_obj[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in ms_obj}
    body["status"] = {key: status[key] for key in _STATUS_FIELDS if key in status}
    return ModelServing.model_validate(body)


def _ms_notes(ctx: _Context, ms_obj: Mapping[str, Any], ms: ModelServing) -> list[Why]:
    notes: list[Why] = []
    observed = _int(_dict(ms_obj.get("status")).get("observedGeneration"))
    if ms.generation and observed < ms.generation:
        notes.append(
            Why(
                "rollout",
                f"the controller has not observed this spec yet (generation {ms.generation}, observed {observed})",
            )
        )
    targets = ctx.state.targets
    if targets.budget.partition and ctx.rolling:
        kept = [naming.group_name(ms.name, o) for o in sorted(targets.plan.protected)]
        verb = "keeps its" if len(kept) == 1 else "keep their"
        notes.append(Why("rollout", f"partition {targets.budget.partition}: {', '.join(kept)} {verb} revision"))
    if ctx.entries:
        soonest = min(entry.expires_at for entry in ctx.entries.values())
        units = len(ctx.entries)
        noun = "unit" if units == 1 else "units"
        notes.append(
            Why(
                "eviction",
                f"eviction tracker: {units} {noun} recorded as disrupted (the first record ends in "
                f"{format_age(soonest - ctx.now)})",
            )
        )
    return notes


def build_view(
    ms_obj: Mapping[str, Any],
    pods: Sequence[KubeObject],
    *,
    now: float,
    services: Sequence[KubeObject] = (),
    podgroups: Sequence[KubeObject] = (),
    revisions: Sequence[KubeObject] = (),
    tracker: Mapping[str, Any] | None = None,
    model_cache: Mapping[str, Any] | None = None,
    scale_from_zero: bool = False,
    adapters: Mapping[str, str] | None = None,
    model_pools: Sequence[str] = (),
) -> StatusView:
    """Build the status tree of one ModelServing.

    Args:
        ms_obj: The ModelServing as the API server returned it.
        pods: Its pods (label ``modelserving.volcano.sh/name``); pods the controller would not recognise are left
            out.
        now: The time ages are measured to, epoch seconds.
        services: Its headless Services (a role instance with workers is ready only with its Service).
        podgroups: Its Volcano PodGroups, if any.
        revisions: Its ControllerRevisions (they resolve the revisions of groups not on the update revision).
        tracker: Its eviction tracker ConfigMap, if any.
        model_cache: The ModelCache its annotation names, if it names one and it exists (the gate then enters the
            update revision as in the controller, and the view shows the cache).
        scale_from_zero: Whether the activator may wake it from zero (shown as "scaled to zero (activator)" at
            zero replicas).
        adapters: Its LoRA adapter set, name -> source digest (each pod then shows the adapters it has loaded with
            the desired source, and an entry pod the ones it misses).
        model_pools: The names of the ModelPools (its namespace's) that list it as a member. A member at zero
            replicas is shown as not resident in its pool, never as scaled to zero by the activator
            (``scale_from_zero`` is then ignored: the pool controller, not the activator, brings a member up).

    Returns:
        The tree.

    Raises:
        ValueError: The ModelServing's metadata or spec cannot be read (a pydantic validation error).
    """
    ms = _parse(ms_obj)
    ref = MSRef(ms.name, ms.namespace, ms.uid, ms.generation)
    entries = {key: e for key, e in tracker_entries(tracker, ms.uid or None).items() if now < e.expires_at}

    def owned(objects: Sequence[KubeObject]) -> tuple[KubeObject, ...]:
        return tuple(obj for obj in objects if controller_uid(obj) in (None, ms.uid) or not ms.uid)

    podgroups = owned(podgroups)
    gate = _gate(ms, model_cache)
    observed = Observed(
        pods=owned(pods), services=owned(services), podgroups=podgroups, revisions=owned(revisions), model_cache=gate
    )
    state = build_state(ms, ref, observed, PodGroupSupport(crd_served=bool(podgroups)))
    ctx = _Context(ms_obj, state, podgroups, entries, now, adapters)
    status = _dict(ms_obj.get("status"))
    ordinals = sorted(set(state.targets.groups) | set(state.groups.groups))
    conditions = tuple(
        ConditionView(
            type=_str(c.get("type")),
            status=_str(c.get("status")),
            reason=_str(c.get("reason")),
            message=_str(c.get("message")),
            age=_age(now, c.get("lastTransitionTime")),
        )
        for c in _conditions(ms_obj)
    )
    return StatusView(
        name=ms.name,
        namespace=ms.namespace,
        desired=ms.spec.replicas,
        ready=_int(status.get("availableReplicas")),
        updated=_int(status.get("updatedReplicas")),
        live=_int(status.get("replicas")),
        current_revision=ctx.current,
        update_revision=ctx.update,
        age=_age(now, _dict(ms_obj.get("metadata")).get("creationTimestamp")),
        conditions=conditions,
        groups=tuple(_group_view(ctx, ordinal) for ordinal in ordinals),
        notes=tuple(_ms_notes(ctx, ms_obj, ms)),
        partition=state.targets.budget.partition,
        queue=ctx.queue,
        model_cache=_cache_view(gate, model_cache),
        scale_from_zero=scale_from_zero and not model_pools,
        model_pools=tuple(sorted(set(model_pools))),
    )


def _gate(ms: ModelServing, obj: Mapping[str, Any] | None) -> CacheGate | None:
    cache: ModelCache | None = None
    unreadable: str | None = None
    if obj is not None:
        try:
            cache = ModelCache.model_validate(obj)
        except ValueError as err:
            unreadable = str(err).splitlines()[0]
    return decide_gate((ms.metadata or {}).get("annotations"), templates_of(ms), cache, unreadable=unreadable)


def _cache_view(gate: CacheGate | None, obj: Mapping[str, Any] | None) -> ModelCacheView | None:
    if gate is None:
        return None
    phase = gate.phase or ("NotFound" if not gate.mount.resolved else "")
    status = _dict((obj or {}).get("status"))
    model = describe_model(gguf_of(status.get("gguf")), model_config_of(status.get("modelConfig")))
    return ModelCacheView(gate.name, phase, gate.open, gate.reason, gate.message, gate.progress or "", model)
