"""The ``Scheduled`` condition of a ModelServing: decided, written and woken for (reconciler in :mod:`.scheduled`).

Guarantees:

* **Owned, not shared.** The condition is written by server-side apply on the status subresource under
  :data:`FIELD_MANAGER` (``kthena-py-scheduling``), alone in its apply body: the other reconcilers' conditions
  and fields stay theirs. It is written only when its status, reason, message or observedGeneration differ from
  the cached one, so a converged cluster (or a restarted manager looking at one) costs no write.
* **Decided purely** by :func:`~kthena_py.plan.modelserving.scheduling.decide_scheduled` from the informer cache:
  the ModelServing's pods and PodGroups, the Volcano Queues and the PriorityClasses (both cluster-scoped and few,
  so cached whole), the cached PodGroups waiting in its queues (for queue positions: the cache holds the
  PodGroups of ModelServings, so positions count those, see docs/modelserving.md). Nodes may be many and change
  often, so they are **not** cached: they are listed (``resourceVersion=0``, from the API server's watch cache)
  only when a decision names a resource some pod lacks, at most once per :data:`NODES_TTL` seconds, and only name
  and allocatable are kept; such a ModelServing is looked at again every :data:`NODES_TTL` seconds while it waits,
  so what the message says of the nodes follows added or resized nodes.
* **Woken for what it reads, no more**: a pod when it is added, bound, refused by a scheduler, fails or goes; a
  PodGroup's owner when Volcano's phase or verdict changes, and the owners waiting in the same queue only while
  their condition shows a position (the transient ``Scheduling`` shows none, so a converging fleet does not wake
  every waiting ModelServing for every PodGroup); a Queue's waiting owners when its state or spec changes, or its
  allocation while it has a capability. Pod and PodGroup changes are gathered for :data:`SCHEDULING_COALESCE`
  seconds (the condition reports a wait, it gates nothing), so a burst of creations and bindings is one look. Two
  cache indexes (waiting PodGroups by queue, ModelServings showing a position) keep each wake-up from walking
  every PodGroup.
* A refused write is logged and tried again after :data:`WRITE_RETRY` seconds; it never fails the PodGroup
  reconcile it rides on.
* **Events and metrics from transitions in the cluster, not from memory**: the Warning Event of a wait and the
  Normal Event of its end (with how long it lasted) are recorded only after the write that makes the transition
  succeeded; a restart finds the condition already there and records nothing again. The time-to-schedule sample
  is taken with the Normal transition; the gauge of waiting ModelServings follows every decision
  (:mod:`.metrics`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from kthena_py.api.modelserving import ModelServing
from kthena_py.kube import ApiError, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, controller_ref, is_deleting, meta, namespace_of
from kthena_py.kube.resources import NODES, PODGROUPS, PRIORITY_CLASSES, QUEUES
from kthena_py.plan.modelserving.core.naming import ANNOTATION_QUEUE
from kthena_py.plan.modelserving.core.types import Observed
from kthena_py.plan.modelserving.scheduling import SchedulingDecision, SchedulingInputs, decide_scheduled
from kthena_py.plan.modelserving.scheduling.verdict import DEFAULT_QUEUE, queue_of, waiting_in_queue
from kthena_py.runtime.cache import CacheReader, SharedCache
from kthena_py.runtime.controller import Mapper
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request
from kthena_py.vocab.conditions import (
    POD_SCHEDULED,
    PODGROUP_UNSCHEDULABLE,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_SCHEDULING,
    SCHEDULED,
)
from kthena_py.vocab.pods import TERMINAL_PHASES
from kthena_py.vocab.times import parse_time

from ..resources import MODELSERVINGS
from .failures import condition_of
from .metrics import SERIES, TIME_TO_SCHEDULE, WaitingSeries

__all__ = [
    "FIELD_MANAGER",
    "NODES_TTL",
    "POSITION_SHOWN_INDEX",
    "SCHEDULING_COALESCE",
    "SCHEDULING_GRACE",
    "WAITING_IN_QUEUE_INDEX",
    "WRITE_RETRY",
    "NodeView",
    "SchedulingReporter",
    "podgroup_requests",
    "podgroup_verdict_changed",
    "queue_changed",
    "queue_requests",
    "register_scheduling_informers",
    "scheduling_changed",
]

FIELD_MANAGER = "kthena-py-scheduling"
NODES_TTL = 30.0
"""Seconds a live read of the nodes is reused."""
WRITE_RETRY = 5.0
"""Seconds before a refused write of the condition is tried again."""
SCHEDULING_COALESCE = 5.0
"""Seconds the scheduling reconciler lets pod and PodGroup changes gather before it looks (one look per burst).

The condition reports a wait that lasts seconds to hours and gates nothing, and the wait it reports ends at the
last pod's binding, not at the look (:func:`~kthena_py.plan.modelserving.scheduling.decide_scheduled`), so the lag
costs a reader a few seconds of a column, never a wrong duration. Replayed over a converge's recorded wake-ups
(``bench/converge.py --stages --keep``, 200 ModelServings, 2026-12-06): 1,260 looks at 1 s, 1,053 at 2 s (the
looks the run made), 966 at 3 s, 760 at 5 s, 600 at 10 s. Volcano binds a gang, and moves its PodGroup through
its phases, over several of its scheduling sessions: five seconds gathers most of one gang's progress in a look."""
SCHEDULING_GRACE = 30.0
"""Seconds after its creation during which a ModelServing's first, transient ``Scheduling`` is not written."""

log = structlog.get_logger("kthena_py.modelserving.scheduling")


WAITING_IN_QUEUE_INDEX = "scheduling:waiting-in-queue"
"""PodGroups that wait for Volcano, filed by their queue's name."""
POSITION_SHOWN_INDEX = "scheduling:position-shown"
"""ModelServings whose ``Scheduled`` condition may show a queue position, filed by the Volcano queue they ask for."""


def register_scheduling_informers(cache: SharedCache) -> None:
    """Cache what the decision reads besides the ModelServing's own objects, and the indexes its wake-ups use.

    Queues (optional CRD), PriorityClasses; PodGroups by the queue they wait in; ModelServings whose condition may
    show a queue position. PodGroups stay whole on a sharded replica that selects its namespaces
    (:meth:`~kthena_py.runtime.cache.SharedCache.keep_whole`): a queue position counts the gangs of every namespace
    waiting in the queue, and a change of any of them moves the positions this replica shows.
    """
    cache.keep_whole(PODGROUPS)
    cache.informer(QUEUES, optional=True)
    cache.informer(PRIORITY_CLASSES)
    _register_indexes(cache)


def _register_indexes(cache: SharedCache) -> None:
    cache.index(PODGROUPS, WAITING_IN_QUEUE_INDEX, _waiting_queue)
    cache.index(MODELSERVINGS, POSITION_SHOWN_INDEX, _position_shown)


def _waiting_queue(pg: KubeObject) -> list[str]:
    return [queue_of(pg)] if waiting_in_queue(pg) else []


def _position_shown(obj: KubeObject) -> list[str]:
    """``[queue]`` when the ``Scheduled`` condition is False for a reason whose message may carry a queue position.

    The queue is the one the ModelServing's PodGroups are rendered with (annotation
    ``scheduling.volcano.sh/queue-name``, Volcano's ``default`` without it).

    Every False reason but the transient ``Scheduling`` does (:func:`~kthena_py.plan.modelserving.scheduling.
    decide_scheduled`); ``Scheduling`` and ``AllScheduled`` never show one.
    """
    condition = condition_of(obj, SCHEDULED)
    if condition is None or condition.get("status") != "False" or condition.get("reason") == REASON_SCHEDULING:
        return []
    return [str((meta(obj).get("annotations") or {}).get(ANNOTATION_QUEUE) or DEFAULT_QUEUE)]


# -- what wakes the scheduling reconciler ---------------------------------------------------------------------


def _pod_key(pod: KubeObject) -> tuple[Any, ...]:
    """What of a pod the decision reads: bound or not, a ``PodScheduled=False`` verdict, a terminal phase, deletion.

    A pod that turns Running or Ready, or gets ``PodScheduled=True`` after its binding, changes none of them.
    """
    status = pod.get("status") or {}
    verdict = next(
        (
            (c.get("reason"), c.get("message"))
            for c in status.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == POD_SCHEDULED and c.get("status") == "False"
        ),
        None,
    )
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    return (bound, verdict, status.get("phase") in TERMINAL_PHASES, is_deleting(pod))


def scheduling_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Pods: additions, binding, ``PodScheduled=False`` verdicts, a terminal phase, deletion (not Running, Ready...)."""
    return old is None or _pod_key(old) != _pod_key(new)


def _podgroup_key(pg: KubeObject) -> tuple[Any, ...]:
    status = pg.get("status") or {}
    verdict = next(
        (
            (c.get("status"), c.get("reason"), c.get("message"))
            for c in status.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == PODGROUP_UNSCHEDULABLE
        ),
        None,
    )
    spec = pg.get("spec") or {}
    return (status.get("phase"), verdict, spec.get("queue"), spec.get("priorityClassName"), is_deleting(pg))


def podgroup_verdict_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """PodGroups: Volcano's phase or ``Unschedulable`` verdict changed (not the times it rewrites every session)."""
    return old is None or _podgroup_key(old) != _podgroup_key(new)


def _owner_request(obj: KubeObject) -> Request | None:
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != MODELSERVINGS.kind:
        return None
    return Request(namespace_of(obj), str(ref.get("name") or ""))


def _waiting_owners(cache: CacheReader, queue: str) -> Iterable[Request]:
    for pg in cache.by_index(PODGROUPS, WAITING_IN_QUEUE_INDEX, queue):
        request = _owner_request(pg)
        if request is not None:
            yield request


def podgroup_requests(cache: CacheReader) -> Mapper:
    """A PodGroup's owner, and the ModelServings of its queue whose condition shows a position (it may move).

    A change of one PodGroup moves positions and the count of waiting gangs in its queue; only conditions that
    show a position depend on those (the transient ``Scheduling`` shows none), so only their ModelServings are
    asked to look again, read from an index by queue (no walk over the queue's PodGroups): a fleet converging
    wakes each ModelServing for its own PodGroups only.
    """

    def mapper(pg: KubeObject) -> Iterable[Request]:
        own = _owner_request(pg)
        requests = [own] if own is not None else []
        requests.extend(
            Request(namespace_of(ms), str(meta(ms).get("name") or ""))
            for ms in cache.by_index(MODELSERVINGS, POSITION_SHOWN_INDEX, queue_of(pg))
        )
        return list(dict.fromkeys(requests))

    return mapper


def _capability(queue: KubeObject | None) -> Any:
    return ((queue or {}).get("spec") or {}).get("capability")


def queue_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Queues: state or spec (capability, ...) changed, or the allocated resources of a queue with a capability.

    Allocated resources matter only against a capability (a gang that does not fit waits as ``QueueFull``); a
    queue without one changes its allocation with every gang placed, which no condition shows.
    """
    if old is None:
        return True
    o, n = old.get("status") or {}, new.get("status") or {}
    if old.get("spec") != new.get("spec") or o.get("state") != n.get("state"):
        return True
    return bool(_capability(new)) and o.get("allocated") != n.get("allocated")


def queue_requests(cache: CacheReader) -> Mapper:
    """The owners of every PodGroup waiting in a queue."""

    def mapper(queue: KubeObject) -> Iterable[Request]:
        return list(dict.fromkeys(_waiting_owners(cache, str(meta(queue).get("name") or ""))))

    return mapper


# -- nodes ---------------------------------------------------------------------------------------------------


class NodeView:
    """The nodes' allocatable, read live only when asked and reused for ``ttl`` seconds (see the module docstring).

    Args:
        client: The API client.
        ttl: Seconds a read is reused.
        clock: Monotonic seconds.
    """

    def __init__(self, client: KubeApi, *, ttl: float = NODES_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl = ttl
        self._clock = clock
        self._nodes: tuple[KubeObject, ...] | None = None
        self._read_at = 0.0

    async def nodes(self) -> tuple[KubeObject, ...] | None:
        """The nodes (name and ``status.allocatable`` only); the last read on failure (``None``: none yet)."""
        now = self._clock()
        if self._nodes is not None and now - self._read_at < self.ttl:
            return self._nodes
        try:
            listed = await self.client.list(NODES, resource_version="0")
        except ApiError as exc:
            log.info("cannot read the nodes; the message leaves out what they offer", error=str(exc))
            return self._nodes
        self._nodes = tuple(
            {
                "metadata": {"name": meta(n).get("name")},
                "status": {"allocatable": dict((n.get("status") or {}).get("allocatable") or {})},
            }
            for n in listed.items
        )
        self._read_at = now
        return self._nodes


# -- the reporter --------------------------------------------------------------------------------------------


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("status", "reason", "message", "observedGeneration"))


class SchedulingReporter:
    """Keeps the ``Scheduled`` condition of ModelServings, with its Events and metrics.

    Args:
        client: The API client.
        cache: The informer cache.
        recorder: Where Events go.
        nodes: The live node reads (default: a :class:`NodeView` of ``client``).
        series: The waiting gauge's bookkeeping (default: the process's).
        wall_clock: Epoch seconds (transition times, waits).
        grace: Seconds after creation a first ``Scheduling`` is held (:data:`SCHEDULING_GRACE`; 0 writes it at once).
    """

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        *,
        nodes: NodeView | None = None,
        series: WaitingSeries | None = None,
        wall_clock: Callable[[], float] = time.time,
        grace: float = SCHEDULING_GRACE,
    ) -> None:
        self.client = client
        self.cache = cache
        _register_indexes(cache)  # what the positions are read from (idempotent)
        self.recorder = recorder
        self.nodes = nodes or NodeView(client)
        self.series = series or SERIES
        self.grace = grace
        self._now = wall_clock

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: drop what is kept for them here."""
        self.series.forget_namespaces(leaving)

    def forget(self, request: Request) -> None:
        """The ModelServing is gone (or being deleted): it waits for nothing any more."""
        self.series.forget(request.namespace, request.name)

    def _queues(self) -> dict[str, KubeObject] | None:
        queues = {str(meta(q).get("name") or ""): q for q in self.cache.list(QUEUES)}
        return queues or None  # Volcano always has "default": none at all means unknown

    def _priorities(self) -> tuple[dict[str, int], int]:
        values: dict[str, int] = {}
        default = 0
        for pc in self.cache.list(PRIORITY_CLASSES):
            value = pc.get("value")
            if isinstance(value, int) and not isinstance(value, bool):
                values[str(meta(pc).get("name") or "")] = value
                if pc.get("globalDefault") is True:
                    default = value
        return values, default

    def _queue_podgroups(self, observed: Observed) -> tuple[KubeObject, ...]:
        """The waiting PodGroups of the queues the ModelServing's own PodGroups are in (what positions count)."""
        queues = sorted({queue_of(pg) for pg in observed.podgroups})
        return tuple(pg for q in queues for pg in self.cache.by_index(PODGROUPS, WAITING_IN_QUEUE_INDEX, q))

    def inputs(self, obj: KubeObject, ms: ModelServing, observed: Observed, gang: bool) -> SchedulingInputs:
        """What the decision for ``obj`` looks at, from the cache."""
        priorities, default = self._priorities()
        md = meta(obj)
        return SchedulingInputs(
            pods=observed.pods,
            podgroups=observed.podgroups if gang else (),
            previous=condition_of(obj, SCHEDULED),
            now=self._now(),
            generation=int(meta(obj).get("generation") or 0),
            wants_pods=ms.spec.replicas > 0,
            queues=self._queues() if gang else None,
            queue_podgroups=(),  # read in decide() only when the message shows a position
            priority_classes=priorities,
            default_priority=default,
            created=parse_time(md.get("creationTimestamp")),
            grace=self.grace,
        )

    async def decide(self, obj: KubeObject, ms: ModelServing, observed: Observed, gang: bool) -> SchedulingDecision:
        """The decision for ``obj``, with the nodes read when it names a resource pods lack.

        The queue's waiting PodGroups are read only when the message shows a position (every False reason but
        ``Scheduling``): most decisions, ``Scheduling`` and ``AllScheduled``, never walk the queue.
        """
        inputs = self.inputs(obj, ms, observed, gang)
        decision = decide_scheduled(inputs)
        if gang and decision.condition.get("status") == "False" and decision.reason != REASON_SCHEDULING:
            inputs = replace(inputs, queue_podgroups=self._queue_podgroups(observed))
            decision = decide_scheduled(inputs)
        if decision.needs_nodes:
            nodes = await self.nodes.nodes()
            if nodes is not None:
                decision = decide_scheduled(replace(inputs, nodes=nodes))
        return decision

    async def report(self, obj: KubeObject, ms: ModelServing, observed: Observed, gang: bool) -> float | None:
        """Bring the condition of the cached ModelServing ``obj`` in line.

        Returns:
            ``None``, or the seconds after which to look again: :data:`WRITE_RETRY` when the write was refused (it
            is logged; the PodGroups' own outcome is not affected, and no Event is recorded for a transition not
            written), :data:`NODES_TTL` while the message names what nodes offer (nodes are not watched: a node
            added or resized shows in the message within about twice that).
        """
        md = meta(obj)
        decision = await self.decide(obj, ms, observed, gang)
        if decision.hold is not None:
            self.series.set(str(md.get("namespace") or ""), str(md.get("name") or ""), None)
            return decision.hold  # a young ModelServing's first Scheduling: nothing to say yet
        wait = (decision.reason, decision.resource) if decision.blocking else None
        self.series.set(str(md.get("namespace") or ""), str(md.get("name") or ""), wait)
        previous = condition_of(obj, SCHEDULED)
        refresh = NODES_TTL if decision.reason in (REASON_INSUFFICIENT_GPU, REASON_INSUFFICIENT_RESOURCES) else None
        if previous is not None and _same(decision.condition, previous):
            return refresh
        try:
            written = await self._apply(obj, decision.condition)
        except ApiError as exc:
            log.warning("cannot write the Scheduled condition", error=str(exc), retry_in=WRITE_RETRY)
            return WRITE_RETRY
        if written is None:
            return None  # the ModelServing is gone
        self.cache.record_write(MODELSERVINGS, written)
        log.info(
            "wrote the Scheduled condition",
            namespace=md.get("namespace"),
            name=md.get("name"),
            status=decision.condition["status"],
            reason=decision.reason,
            was=(previous or {}).get("reason"),
            recorded=decision.event.reason if decision.event is not None else None,
        )
        if decision.event is not None:
            event = decision.event
            self.recorder.event(obj, event.type, event.reason, event.message, join=False)
        if decision.waited is not None:
            TIME_TO_SCHEDULE.labels(decision.waited_reason).observe(decision.waited)
        return refresh

    async def _apply(self, obj: KubeObject, condition: KubeObject) -> KubeObject | None:
        md = meta(obj)
        body = {
            "apiVersion": MODELSERVINGS.api_version,
            "kind": MODELSERVINGS.kind,
            "metadata": {"name": md.get("name"), "namespace": md.get("namespace"), "uid": md.get("uid")},
            "status": {"conditions": [condition]},
        }
        try:
            return await self.client.apply(
                MODELSERVINGS, body, field_manager=FIELD_MANAGER, subresource="status", force=True
            )
        except NotFound:
            return None
