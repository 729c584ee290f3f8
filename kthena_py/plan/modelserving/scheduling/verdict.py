"""Decide a ModelServing's ``Scheduled`` condition from the schedulers' own verdicts (pure: no I/O, no clock).

Guarantees:

* **Which wait it is.** Every live pod (not terminating, not finished) is placed once it has ``spec.nodeName``.
  Under gang scheduling (a PodGroup per ServingGroup) a group is judged by its PodGroup first:

  - every pod of the group bound, with the phase ``Running``/``Completed`` or at least ``minMember`` pods (Volcano
    may not have moved the phase yet): scheduled;
  - phase ``Pending`` (not admitted to its queue): ``NotEnqueued`` when the Volcano Queue does not exist or is not
    ``Open``; ``QueueFull`` when the queue's ``spec.capability`` cannot hold the gang's ``minResources`` on top of
    ``status.allocated``; ``NotEnqueued`` when Volcano gave a verdict (an ``Unschedulable`` condition) without
    admitting it; else ``Scheduling`` (no verdict yet);
  - phase ``Inqueue`` (or ``Running`` with pods still unbound): the PodGroup's ``Unschedulable`` condition when
    Volcano set one, else the pods' ``PodScheduled=False`` conditions, else ``Scheduling``.

  Without a PodGroup the pods' ``PodScheduled=False`` conditions decide (kube-scheduler's or Volcano's message).
  A message naming ``Insufficient <resource>`` is ``InsufficientGPU`` when one of the named resources is an
  accelerator (:func:`is_accelerator`), else ``InsufficientResources``; any other refusal (taints, selectors,
  affinity, topology, scheduling gates) is ``Unschedulable``.
* **One reason for the ModelServing**: the first of ``QueueFull``, ``NotEnqueued``, ``InsufficientGPU``,
  ``InsufficientResources``, ``Unschedulable``, ``Scheduling`` that any group has; ``AllScheduled`` (status
  ``True``) when every pod is placed, or when the ModelServing wants no pods at all.
* **The message** of a blocking reason names the resource and the largest per-pod request of it among the waiting pods
  (``waiting for nvidia.com/gpu: 16 per pod``), the largest allocatable of any node (``largest node offers 8``,
  when the caller passed the nodes: :attr:`SchedulingDecision.needs_nodes` asks for them), the affected
  ServingGroups, the queue position and effective priority of the best-placed waiting gang
  (:func:`queue_position`), and the scheduler's message shortened (:func:`shorten`). It depends only on the
  inputs, so a restarted manager computes the same message and writes nothing.
* **Transitions** follow Kubernetes' convention: ``lastTransitionTime`` moves only when ``status`` does. A Warning
  Event (reason: the condition reason) is planned when the condition enters a blocking reason (any but
  ``Scheduling``) from anything that was not blocking; a Normal Event ``Scheduled`` when it turns ``True`` after a
  blocking reason, with how long it had been ``False``. Both are decided from the previous condition in the
  cluster, never from memory, so a restart repeats neither. How long it waited ends when the last live pod was
  bound (the latest ``PodScheduled=True`` transition, which the API server stamps at binding), not when the
  decision is made: a look that comes seconds after the binding (changes are gathered before a look) does not
  lengthen the wait it reports. Without such a time for every live pod it ends ``now``.
* **A young ModelServing's first ``Scheduling`` is not written**: while it has no ``Scheduled`` condition yet and is
  younger than ``SchedulingInputs.grace`` seconds (from ``creationTimestamp``), a ``Scheduling`` decision is held
  (:attr:`SchedulingDecision.hold`: look again then); any other decision, a blocking reason or ``AllScheduled``, is
  written at once. A fleet placed within the grace costs one write of the condition per ModelServing, not two; one
  whose pods stay unplaced shows ``Scheduling`` once the grace is over. Decided from ``now`` and the stored
  creation time, so a restart holds exactly as long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kthena_py.api.quantity import Quantity, QuantityError, QuantityFormat, format_quantity
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.memo import ObjectMemo
from kthena_py.plan.modelserving.core.types import KubeObject, PlannedEvent
from kthena_py.vocab.conditions import (
    POD_SCHEDULED,
    PODGROUP_UNSCHEDULABLE,
    REASON_ALL_SCHEDULED,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_NOT_ENQUEUED,
    REASON_QUEUE_FULL,
    REASON_SCHEDULING,
    REASON_SCHEDULING_GATED,
    REASON_UNSCHEDULABLE,
    SCHEDULED,
)
from kthena_py.vocab.pods import TERMINAL_PHASES, is_terminating, phase_of
from kthena_py.vocab.times import format_time, parse_time

__all__ = [
    "BLOCKING_REASONS",
    "DEFAULT_QUEUE",
    "GroupWait",
    "SchedulingDecision",
    "SchedulingInputs",
    "decide_scheduled",
    "is_accelerator",
    "queue_position",
    "shorten",
    "waiting_in_queue",
]

BLOCKING_REASONS = (
    REASON_QUEUE_FULL,
    REASON_NOT_ENQUEUED,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_UNSCHEDULABLE,
)
"""The reasons a ModelServing is *waiting* (the Warning Event, the gauge), most telling first."""
_RANK = {reason: i for i, reason in enumerate((*BLOCKING_REASONS, REASON_SCHEDULING))}

DEFAULT_QUEUE = "default"
"""The Volcano queue of a PodGroup without ``spec.queue``."""
SCHEDULED_MESSAGE = "every pod is placed on a node"
NO_PODS_MESSAGE = "no pods to place"
SCHEDULING_MESSAGE = "waiting for pods to be created and placed"
"""The one message of ``Scheduling`` (pods not created yet, or no verdict yet): it never changes while pods are
created and bound, so a new ModelServing costs two writes of the condition (``Scheduling``, then ``True``)."""
MAX_SHORT = 240
"""Longest scheduler message quoted in the condition (longer ones are cut with ``...``)."""
MAX_GROUPS = 5
"""ServingGroups named in the message; more are counted (``and N more``)."""

_PLACED_PHASES = frozenset({"Running", "Completed"})
_PENDING_PHASES = frozenset({"", "Pending", "Unknown"})
_OPEN = "Open"
_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?)")
_GANG_HEAD = re.compile(r"^(\d+/\d+ tasks in gang unschedulable): ")
_ORIGIN = re.compile(r"Origin reason is(?: [^\s:]+)?: (.*)$", re.DOTALL)
_NOT_ACCELERATOR_DOMAINS = ("kubernetes.io", "k8s.io")


def is_accelerator(resource: str) -> bool:
    """Whether ``resource`` is an extended accelerator resource: one with a domain prefix outside Kubernetes'.

    ``nvidia.com/gpu``, ``amd.com/gpu``, ``gpu.intel.com/i915``, ``habana.ai/gaudi``, ``aws.amazon.com/neuron``,
    ``nvidia.com/mig-1g.5gb`` are; ``cpu``, ``memory``, ``ephemeral-storage``, ``hugepages-2Mi``, ``pods`` and
    anything under ``kubernetes.io``/``k8s.io`` (``*.kubernetes.io/...``) are not. Every device-plugin resource
    counts (an RDMA NIC waits the same way a GPU does).
    """
    domain, slash, name = resource.partition("/")
    if not slash or not domain or not name:
        return False
    return not any(domain == d or domain.endswith("." + d) for d in _NOT_ACCELERATOR_DOMAINS)


def shorten(message: str) -> str:
    """The scheduler's message without what a user does not need.

    Volcano's ``x/y tasks in gang unschedulable: pod group is not ready, ...; Pending: ... Origin reason is <pod>:
    0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu.`` becomes ``x/y tasks in gang unschedulable: 0/4
    nodes are unavailable: 4 Insufficient nvidia.com/gpu.``; kube-scheduler's ``... preemption: ...`` tail is
    dropped; the result is at most :data:`MAX_SHORT` characters, whitespace collapsed.
    """
    text = " ".join(message.split())
    head = _GANG_HEAD.match(text)
    origin = _ORIGIN.search(text)
    if origin is not None:
        text = f"{head.group(1)}: {origin.group(1)}" if head is not None else origin.group(1)
    cut = text.find(" preemption: ")
    if cut > 0:
        text = text[:cut]
    if len(text) > MAX_SHORT:
        text = text[: MAX_SHORT - 3].rstrip() + "..."
    return text


def _insufficient(message: str) -> list[str]:
    return list(dict.fromkeys(_INSUFFICIENT.findall(message)))


def _classify(message: str) -> tuple[str, str]:
    """(reason, resource) of a refusal message."""
    named = _insufficient(message)
    accelerators = [r for r in named if is_accelerator(r)]
    if accelerators:
        return REASON_INSUFFICIENT_GPU, accelerators[0]
    if named:
        return REASON_INSUFFICIENT_RESOURCES, named[0]
    return REASON_UNSCHEDULABLE, ""


# -- reading objects -----------------------------------------------------------------------------------------


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    return md if isinstance(md, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for condition in _status(obj).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == type_:
            return condition
    return None


def _name(obj: Mapping[str, Any]) -> str:
    return str(_md(obj).get("name") or "")


def _group_of(pod: Mapping[str, Any]) -> str:
    labels = _md(pod).get("labels")
    return str(labels.get(naming.LABEL_GROUP_NAME) or "") if isinstance(labels, Mapping) else ""


def _live(pod: Mapping[str, Any]) -> bool:
    return not is_terminating(pod) and phase_of(pod) not in TERMINAL_PHASES


def _bound(pod: Mapping[str, Any]) -> bool:
    return bool(_spec(pod).get("nodeName"))


def _quantity(raw: Any) -> Quantity | None:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    try:
        return Quantity(raw)
    except QuantityError:
        return None


def _container_request(container: Any, resource: str) -> Quantity | None:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    if not isinstance(resources, Mapping):
        return None
    for kind in ("requests", "limits"):  # a missing request defaults to the limit
        section = resources.get(kind)
        if isinstance(section, Mapping) and resource in section:
            return _quantity(section[resource])
    return None


def pod_request(pod: Mapping[str, Any], resource: str) -> Quantity | None:
    """The effective request of ``resource`` of one pod: Σ containers, at least the largest init container."""
    spec = _spec(pod)
    total, fmt, seen = Decimal(0), QuantityFormat.DECIMAL_SI, False
    for container in spec.get("containers") or []:
        q = _container_request(container, resource)
        if q is not None:
            total, fmt, seen = total + q.value, q.format, True
    for container in spec.get("initContainers") or []:
        q = _container_request(container, resource)
        if q is not None and q.value > total:
            total, fmt, seen = q.value, q.format, True
    return Quantity(format_quantity(total, fmt)) if seen else None


def _largest(values: Iterable[Quantity | None]) -> Quantity | None:
    present = [v for v in values if v is not None]
    return max(present, key=lambda q: q.value) if present else None


def waiting_in_queue(pg: Mapping[str, Any]) -> bool:
    """Whether a PodGroup waits for Volcano (not ``Running``/``Completed``, not being deleted)."""
    return not is_terminating(pg) and str(_status(pg).get("phase") or "") not in _PLACED_PHASES


def queue_of(pg: Mapping[str, Any]) -> str:
    """The Volcano queue of a PodGroup (``default`` when unset)."""
    return str(_spec(pg).get("queue") or DEFAULT_QUEUE)


def _priority(pg: Mapping[str, Any], classes: Mapping[str, int], default: int) -> int:
    name = _spec(pg).get("priorityClassName")
    if isinstance(name, str) and name:
        return int(classes.get(name, default))
    return default


def queue_position(
    pg: Mapping[str, Any], candidates: Iterable[Mapping[str, Any]], classes: Mapping[str, int], default: int = 0
) -> tuple[int, int] | None:
    """1-based position of ``pg`` among the waiting PodGroups of its queue, and how many wait there.

    Ordered as Volcano's ``priority`` job order serves them: higher effective priority (the PriorityClass value of
    ``spec.priorityClassName``, ``default`` without one) first, then older ``creationTimestamp``, then namespace
    and name. ``None`` when ``pg`` itself does not wait. A queue of N waiting PodGroups costs one pass over them
    (no sort), each PodGroup object's facts read once while it lives (:func:`_queue_facts`).
    """
    facts = _queue_facts(pg)
    if facts is None:
        return None
    queue = facts[0]
    waiting: dict[tuple[str, str], tuple[int, float, str, str]] = {}
    for other in [*candidates, pg]:
        seen = _queue_facts(other)
        if seen is None or seen[0] != queue:
            continue
        _, class_name, created, namespace, name = seen
        priority = int(classes.get(class_name, default)) if class_name else default
        waiting[(namespace, name)] = (-priority, created, namespace, name)
    mine = waiting[(facts[3], facts[4])]
    return 1 + sum(1 for order in waiting.values() if order < mine), len(waiting)


_QueueFacts = tuple[str, str, float, str, str]
"""A waiting PodGroup's queue, PriorityClass name, creation time (0 when unreadable), namespace and name."""

QUEUE_FACTS_MEMO = 2048
"""PodGroup objects whose queue facts are kept (first in, first out): the entries hold their objects, replaced ones
included, so few are kept (a queue of 1,000 waiting PodGroups fits twice)."""

_QUEUE_FACTS: ObjectMemo[_QueueFacts | None] = ObjectMemo(QUEUE_FACTS_MEMO)


def _queue_facts(pg: Mapping[str, Any]) -> _QueueFacts | None:
    """What :func:`queue_position` orders ``pg`` by (``None``: it does not wait), once per object (by identity).

    The cache replaces an object on every change and never modifies one in place, so an object's facts never
    change while it lives; an entry holds its object, so its ``id`` cannot be reused meanwhile.
    """
    return _QUEUE_FACTS.get(pg, None, lambda: _read_queue_facts(pg))


def _read_queue_facts(pg: Mapping[str, Any]) -> _QueueFacts | None:
    if not waiting_in_queue(pg):
        return None
    md = _md(pg)
    class_name = _spec(pg).get("priorityClassName")
    created = parse_time(md.get("creationTimestamp"))
    return (
        queue_of(pg),
        class_name if isinstance(class_name, str) else "",
        created if created is not None else 0.0,
        str(md.get("namespace") or ""),
        _name(pg),
    )


# -- inputs and decision -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulingInputs:
    """Everything :func:`decide_scheduled` looks at (the caller reads it from its cache; objects are not changed)."""

    pods: tuple[KubeObject, ...]
    """The ModelServing's pods."""
    podgroups: tuple[KubeObject, ...] = ()
    """Its PodGroups (empty when gang scheduling does not apply)."""
    previous: Mapping[str, Any] | None = None
    """The ``Scheduled`` condition the ModelServing has now."""
    now: float = 0.0
    """Epoch seconds."""
    generation: int = 0
    wants_pods: bool = True
    """Whether the spec asks for any pod (``replicas`` > 0)."""
    queues: Mapping[str, KubeObject] | None = None
    """Volcano Queues by name (``None``: unknown, no queue is judged)."""
    queue_podgroups: tuple[KubeObject, ...] = ()
    """Every PodGroup the caller sees, for queue positions."""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    """PriorityClass values by name."""
    default_priority: int = 0
    """The value of the ``globalDefault`` PriorityClass (0 without one)."""
    nodes: tuple[KubeObject, ...] | None = None
    """The cluster's nodes (``None``: not read; the message then leaves out what nodes offer)."""
    created: float | None = None
    """The ModelServing's ``creationTimestamp`` (epoch seconds; ``None``: unknown, nothing is held)."""
    grace: float = 0.0
    """Seconds after creation during which a first ``Scheduling`` is held, not written (module docstring)."""


@dataclass(frozen=True)
class GroupWait:
    """Why one ServingGroup (or a pod without a ServingGroup label) is not placed."""

    group: str
    reason: str
    resource: str = ""
    detail: str = ""
    """What the scheduler or the queue says, shortened."""
    pods: tuple[KubeObject, ...] = ()
    """Its pods that are not placed."""
    podgroup: KubeObject | None = None


@dataclass(frozen=True)
class SchedulingDecision:
    """The ``Scheduled`` condition to hold and what its transition means."""

    condition: KubeObject
    waits: tuple[GroupWait, ...] = ()
    event: PlannedEvent | None = None
    """The Event of this transition (``None``: no transition worth one)."""
    waited: float | None = None
    """Seconds the condition was ``False``, when it turns ``True`` now (a time-to-schedule sample)."""
    waited_reason: str = ""
    """The reason it was ``False`` with, when it turns ``True`` now."""
    needs_nodes: bool = False
    """The message would name what the largest node offers: decide again with :attr:`SchedulingInputs.nodes`."""
    hold: float | None = None
    """Seconds to wait before writing anything (a young ModelServing's first ``Scheduling``); ``None``: write now."""

    @property
    def reason(self) -> str:
        """The condition's reason."""
        return str(self.condition.get("reason") or "")

    @property
    def blocking(self) -> bool:
        """Whether the ModelServing waits for something (a reason of :data:`BLOCKING_REASONS`)."""
        return self.reason in BLOCKING_REASONS

    @property
    def resource(self) -> str:
        """The resource the top wait names ('' when none)."""
        top = [w for w in self.waits if w.reason == self.reason]
        return top[0].resource if top else ""


def _pod_wait(group: str, pods: Sequence[KubeObject]) -> GroupWait:
    """The wait of a group judged from its unbound pods' ``PodScheduled`` conditions."""
    best: GroupWait | None = None
    for pod in pods:
        condition = _condition(pod, POD_SCHEDULED)
        if condition is None or condition.get("status") != "False":
            continue
        message = str(condition.get("message") or "")
        if condition.get("reason") == REASON_SCHEDULING_GATED:
            reason, resource = REASON_UNSCHEDULABLE, ""
            message = message or "the pod has scheduling gates"
        else:
            reason, resource = _classify(message)
        wait = GroupWait(group, reason, resource, shorten(message), tuple(pods))
        if best is None or _RANK[reason] < _RANK[best.reason]:
            best = wait
    return best or GroupWait(group, REASON_SCHEDULING, pods=tuple(pods))


def _queue_wait(pg: KubeObject, queues: Mapping[str, KubeObject] | None) -> tuple[str, str, str] | None:
    """(reason, resource, detail) of a Pending PodGroup whose queue refuses it, if the queue says so."""
    if queues is None:
        return None
    name = queue_of(pg)
    queue = queues.get(name)
    if queue is None:
        return REASON_NOT_ENQUEUED, "", f"Volcano queue {name} does not exist"
    state = str(_status(queue).get("state") or "")
    if state != _OPEN:
        return REASON_NOT_ENQUEUED, "", f"Volcano queue {name} is {state or 'not Open'}"
    capability = _spec(queue).get("capability")
    needs = _spec(pg).get("minResources")
    if not isinstance(capability, Mapping) or not isinstance(needs, Mapping):
        return None
    allocated = _status(queue).get("allocated")
    allocated = allocated if isinstance(allocated, Mapping) else {}
    for resource in sorted(needs):
        cap, need = _quantity(capability.get(resource)), _quantity(needs[resource])
        if cap is None or need is None:
            continue
        used = _quantity(allocated.get(resource)) or Quantity(0)
        if used.value + need.value > cap.value:
            detail = (
                f"Volcano queue {name} has no room: {resource} capability {cap}, allocated {used}, "
                f"the gang needs {need}"
            )
            return REASON_QUEUE_FULL, resource, detail
    return None


def _min_member(pg: Mapping[str, Any]) -> int:
    value = _spec(pg).get("minMember")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _gang_wait(pg: KubeObject, pods: Sequence[KubeObject], queues: Mapping[str, KubeObject] | None) -> GroupWait | None:
    group = _name(pg)
    unbound = tuple(p for p in pods if not _bound(p))
    phase = str(_status(pg).get("phase") or "")
    if not unbound and (phase in _PLACED_PHASES or (pods and len(pods) >= _min_member(pg))):
        return None  # every pod is bound (Volcano may not have moved the phase to Running yet)
    verdict = _condition(pg, PODGROUP_UNSCHEDULABLE)
    verdict = verdict if verdict is not None and verdict.get("status") == "True" else None
    if phase in _PENDING_PHASES:
        refused = _queue_wait(pg, queues)
        if refused is not None:
            reason, resource, detail = refused
            return GroupWait(group, reason, resource, detail, unbound, pg)
        if verdict is not None:
            detail = f"Volcano has not admitted the gang to queue {queue_of(pg)}"
            message = shorten(str(verdict.get("message") or ""))
            return GroupWait(group, REASON_NOT_ENQUEUED, "", f"{detail}: {message}" if message else detail, unbound, pg)
        return GroupWait(group, REASON_SCHEDULING, pods=unbound, podgroup=pg)
    if verdict is not None and phase not in _PLACED_PHASES:
        message = str(verdict.get("message") or "")
        reason, resource = _classify(message)
        return GroupWait(group, reason, resource, shorten(message), unbound, pg)
    wait = _pod_wait(group, unbound)
    return GroupWait(wait.group, wait.reason, wait.resource, wait.detail, wait.pods, pg)


def _waits(inputs: SchedulingInputs) -> list[GroupWait]:
    live = [p for p in inputs.pods if _live(p)]
    by_group: dict[str, list[KubeObject]] = {}
    for pod in live:
        by_group.setdefault(_group_of(pod), []).append(pod)
    waits: list[GroupWait] = []
    judged: set[str] = set()
    for pg in sorted(inputs.podgroups, key=_name):
        if is_terminating(pg):
            continue
        judged.add(_name(pg))
        wait = _gang_wait(pg, by_group.get(_name(pg), []), inputs.queues)
        if wait is not None:
            waits.append(wait)
    for group, pods in sorted(by_group.items()):
        unbound = [p for p in pods if not _bound(p)]
        if group in judged or not unbound:
            continue
        waits.append(_pod_wait(group or _name(unbound[0]), unbound))
    return waits


def _amount(resource: str, waits: Sequence[GroupWait], nodes: tuple[KubeObject, ...] | None) -> list[str]:
    if not resource:
        return ["waiting for resources"]
    per_pod = _largest(pod_request(p, resource) for w in waits for p in w.pods)
    parts = [f"waiting for {resource}: {per_pod} per pod" if per_pod is not None else f"waiting for {resource}"]
    if nodes is not None:
        offer = _largest(_quantity((_status(n).get("allocatable") or {}).get(resource)) for n in nodes)
        parts.append(f"largest node offers {offer}" if offer is not None and offer.value else "no node offers it")
    return parts


def _groups(waits: Sequence[GroupWait]) -> str:
    names = [w.group for w in waits]
    shown = ", ".join(names[:MAX_GROUPS])
    more = f" and {len(names) - MAX_GROUPS} more" if len(names) > MAX_GROUPS else ""
    return f"ServingGroup{'s' if len(names) > 1 else ''} {shown}{more}"


def _position(waits: Sequence[GroupWait], inputs: SchedulingInputs) -> str:
    best: tuple[int, int, KubeObject] | None = None
    for wait in waits:
        if wait.podgroup is None:
            continue
        place = queue_position(wait.podgroup, inputs.queue_podgroups, inputs.priority_classes, inputs.default_priority)
        if place is not None and (best is None or place[0] < best[0]):
            best = (place[0], place[1], wait.podgroup)
    if best is None:
        return ""
    position, total, pg = best
    priority = _priority(pg, inputs.priority_classes, inputs.default_priority)
    return f"queue {queue_of(pg)}: position {position} of {total}, priority {priority}"


def _message(reason: str, waits: Sequence[GroupWait], inputs: SchedulingInputs) -> tuple[str, bool]:
    """The condition message for ``reason`` and whether it would name the nodes' offer (they were not given)."""
    if reason == REASON_SCHEDULING:
        return SCHEDULING_MESSAGE, False  # transient: one message, so creating and binding pods costs no rewrites
    top = [w for w in waits if w.reason == reason]
    parts: list[str] = []
    needs_nodes = False
    if reason in (REASON_INSUFFICIENT_GPU, REASON_INSUFFICIENT_RESOURCES):
        resource = top[0].resource
        parts.extend(_amount(resource, top, inputs.nodes))
        needs_nodes = bool(resource) and inputs.nodes is None
    elif reason == REASON_UNSCHEDULABLE:
        parts.append("no node fits")
    details = list(dict.fromkeys(w.detail for w in top if w.detail))
    queue_wait = reason in (REASON_QUEUE_FULL, REASON_NOT_ENQUEUED)
    if details and queue_wait:
        parts.append(details[0])  # what the queue says comes first
    parts.append(_groups(top))
    position = _position(top, inputs)
    if position:
        parts.append(position)
    if details and not queue_wait:
        parts.append(f"scheduler: {details[0]}")
    others = sorted({w.reason for w in waits if w.reason != reason}, key=_RANK.__getitem__)
    for other in others:
        parts.append(f"also {other}: {', '.join(w.group for w in waits if w.reason == other)}")
    return "; ".join(parts), needs_nodes


def _placed_at(pods: Sequence[KubeObject], now: float) -> float:
    """When the last live pod was bound (its ``PodScheduled=True`` transition); ``now`` when a pod does not say."""
    latest: float | None = None
    for pod in pods:
        if not _live(pod):
            continue
        condition = _condition(pod, POD_SCHEDULED)
        bound_at = (
            parse_time(condition.get("lastTransitionTime")) if condition and condition.get("status") == "True" else None
        )
        if bound_at is None:
            return now
        latest = bound_at if latest is None else max(latest, bound_at)
    return now if latest is None else min(latest, now)


def _since(previous: Mapping[str, Any] | None, status: str, now: float) -> str:
    if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
        return str(previous["lastTransitionTime"])
    return format_time(now)


def _duration(seconds: float) -> str:
    whole = int(max(0.0, seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def decide_scheduled(inputs: SchedulingInputs) -> SchedulingDecision:
    """Decide the ``Scheduled`` condition (see the module docstring)."""
    waits = _waits(inputs)
    live = [p for p in inputs.pods if _live(p)]
    needs_nodes = False
    if waits:
        reason = min((w.reason for w in waits), key=_RANK.__getitem__)
        status = "False"
        message, needs_nodes = _message(reason, waits, inputs)
    elif not live and not any(not is_terminating(pg) for pg in inputs.podgroups) and inputs.wants_pods:
        status, reason, message = "False", REASON_SCHEDULING, SCHEDULING_MESSAGE
    else:
        status, reason = "True", REASON_ALL_SCHEDULED
        message = SCHEDULED_MESSAGE if live else NO_PODS_MESSAGE
    previous = inputs.previous
    if previous is None and status == "False" and reason == REASON_SCHEDULING and inputs.created is not None:
        left = inputs.created + inputs.grace - inputs.now
        if left > 0:
            held: KubeObject = {"type": SCHEDULED, "status": status, "reason": reason, "message": message}
            return SchedulingDecision(held, tuple(waits), hold=left)
    condition: KubeObject = {
        "type": SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _since(previous, status, inputs.now),
        "observedGeneration": inputs.generation,
    }
    was_blocking = (
        previous is not None and previous.get("status") == "False" and previous.get("reason") in (BLOCKING_REASONS)
    )
    event: PlannedEvent | None = None
    waited: float | None = None
    waited_reason = ""
    if status == "False" and reason in BLOCKING_REASONS and not was_blocking:
        event = PlannedEvent("Warning", reason, message)
    if status == "True" and previous is not None and previous.get("status") == "False":
        since = parse_time(previous.get("lastTransitionTime"))
        waited = max(0.0, _placed_at(inputs.pods, inputs.now) - since) if since is not None else None
        waited_reason = str(previous.get("reason") or "")
        if was_blocking:
            after = f" after waiting {_duration(waited)}" if waited is not None else ""
            event = PlannedEvent("Normal", SCHEDULED, f"every pod is placed{after} ({waited_reason})")
    return SchedulingDecision(condition, tuple(waits), event, waited, waited_reason, needs_nodes)
