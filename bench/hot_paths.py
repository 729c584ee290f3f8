"""Benchmark: the manager's CPU per unit of its hottest paths, each against its former self (printed, never asserted).

Issue 33 cut the manager's CPU where every ModelServing pays it many times over. Each path is measured here in this
process, in alternating rounds, against the way it used to be done, kept callable for the comparison:

* ``plan``: microseconds per :func:`~kthena_py.plan.modelserving.groups.servinggroups.plan_servinggroups` of a
  settled ModelServing (2 groups x 2 roles x 2 pods, the converge benchmark's shape), with the pod-state memo,
  against the same with the memo emptied before each call (every pod parsed again, as before);
* ``targets``: microseconds per ``plan_servinggroups`` of the same settled ModelServing, with each observed group's
  first-pass target reused as its wanted target (``targets.REUSE_OBSERVED_TARGETS``), against deciding every wanted
  group again (as before);
* ``cache lookup``: nanoseconds to find a type's informer, by type (how a cache read finds it now) against by a
  ``(type, field selector)`` key object (how it did before);
* ``reconcile bookkeeping``: microseconds per ``Controller._process`` of a reconciler that does nothing (the
  engine's own work around every reconcile: log context, metrics), against the way it was done before (a UUID per
  reconcile, a bound logger built each time, every metric child looked up by its labels), restated here;
* ``watch counting``: nanoseconds to count one watch event (its bytes and its type) in the lock-free tallies,
  against prometheus-client ``Counter`` children (as before);
* ``metric updates``: nanoseconds of the twelve metric updates of one reconcile that sends one request (the work
  queue's, the controller's and the request's), in the lock-free metrics of :mod:`kthena_py.kube.tally`, against the
  same metrics as prometheus-client's ``Counter``, ``Gauge`` and ``Histogram`` (as before);
* ``watch decoding``: microseconds to decode one pod's watch event (a settled pod of the converge benchmark's shape,
  with field-ownership records shaped as the API server keeps them: its creator's metadata and spec, the kubelet's
  status) with ``metadata.managedFields`` cut out of the bytes first (:mod:`kthena_py.kube.managedfields`), against
  decoding it whole (as before; the cache then dropped them);
* ``store update``: microseconds to file a pod's status update in an informer's store with the manager's pod
  indices (namespace, owners, ServingGroup and ModelServing labels): each index's values computed for both versions
  and the buckets left alone when they agree, labels read without a copy, against unfiling the old version and
  filing the new one with labels copied per read (as before);
* ``pod event fan-out``: microseconds per pod watch event through the manager's pod informer (its store and every
  handler the manager attaches: the ServingGroup, rollout, scheduling, adapter and pool watches, the ``Running``
  notifier, the cache's waiters), over 800 pods of the converge benchmark's shape going Pending, bound, Running and
  Ready, with the questions every handler asks answered once per event (:mod:`kthena_py.runtime.perevent`), against
  each handler asking them afresh (the kept answers forgotten before every handler; the side as it is now forgets
  answers no one asks for, so both pay the same relay).

Usage: python bench/hot_paths.py [--plans N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic_core import from_json, to_json

from kthena_py.controllers import register_all
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.managedfields import without_managed_fields
from kthena_py.kube.metrics import REQUEST_SECONDS_BUCKETS as _SECONDS
from kthena_py.kube.objects import KubeObject, label_of, labels_of, namespace_of, object_key, owner_uids
from kthena_py.kube.resources import PODS
from kthena_py.kube.tally import Tally, TallyGauge, TallyHistogram
from kthena_py.plan.modelserving.core import groups as pod_states
from kthena_py.plan.modelserving.core import targets
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.runtime import metrics
from kthena_py.runtime.cache import NAMESPACE_INDEX, OWNER_INDEX, SharedCache, _Key, label_index_name
from kthena_py.runtime.controller import Controller, _Handler, became_ready_only, owner_mapper, pod_state_changed
from kthena_py.runtime.informer import EventHandler, Informer
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.perevent import PerEvent, PerObject
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.runtime.store import IndexFunc, Store
from kthena_py.simulation import VOLCANO, Simulation
from kthena_py.testing.fake import FakeKube
from kthena_py.vocab.labels import SERVING_GROUP_NAME, SERVING_NAME

sys.path.insert(0, str(Path(__file__).resolve().parent))
from converge import modelserving  # the converge benchmark's ModelServing: both price one shape


def settled_plan() -> Callable[[], object]:
    """``plan_servinggroups`` of one settled ModelServing of the converge benchmark's shape, ready to call."""
    sim = Simulation(modelserving(1))
    sim.settle()
    ms = sim.parse()
    ref, observed = sim.ref(ms), sim.observed()
    return lambda: plan_servinggroups(ms, ref, observed, VOLCANO, sim.now)


def alternate(
    name: str, n: int, rounds: int, now: Callable[[], object], before: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """Microseconds per call of ``now`` and of ``before``, in alternating rounds."""
    first: list[float] = []
    second: list[float] = []
    for r in range(rounds):
        a = timeit.timeit(now, number=n) * 1e6 / n
        b = timeit.timeit(before, number=n) * 1e6 / n
        first.append(a)
        second.append(b)
        print(f"  {name} round {r + 1}: now {a:.0f} us, before {b:.0f} us ({a / b:.2f})")
    return first, second


def plans(n: int, rounds: int) -> tuple[list[float], list[float]]:
    plan = settled_plan()

    def parsed_again() -> object:
        pod_states._POD_STATES.clear()
        pod_states._SERVICE_STATES.clear()
        return plan()

    return alternate("plan (memoised / parsed again)", n, rounds, plan, parsed_again)


def target_reuse(n: int, rounds: int) -> tuple[list[float], list[float]]:
    plan = settled_plan()

    def reused() -> object:
        targets.REUSE_OBSERVED_TARGETS = True
        return plan()

    def decided_again() -> object:
        targets.REUSE_OBSERVED_TARGETS = False
        return plan()

    try:
        return alternate("targets (reused / decided again)", n, rounds, reused, decided_again)
    finally:
        targets.REUSE_OBSERVED_TARGETS = True


def lookups(rounds: int) -> tuple[list[float], list[float]]:
    by_type = {PODS: object()}
    by_key = {_Key(PODS, None): object()}
    n = 200_000
    direct: list[float] = []
    keyed: list[float] = []
    for _ in range(rounds):
        direct.append(timeit.timeit(lambda: by_type.get(PODS), number=n) * 1e9 / n)
        keyed.append(timeit.timeit(lambda: by_key.get(_Key(PODS, None)), number=n) * 1e9 / n)
    return direct, keyed


class _Idle:
    """A reconciler that does nothing: what is left of a reconcile is the engine's bookkeeping."""

    async def reconcile(self, req: Request) -> Result | None:
        return None


def _run(coro: object) -> None:
    """Drive a coroutine that never suspends to its end, without an event loop."""
    try:
        coro.send(None)  # type: ignore[attr-defined]
    except StopIteration:
        return
    raise RuntimeError("the coroutine suspended")


def bookkeeping(n: int, rounds: int) -> tuple[list[float], list[float]]:
    ctrl = Controller("bench-bookkeeping", _Idle(), SharedCache(FakeKube()))
    req = Request("default", "ms-0")
    log = structlog.get_logger("bench")
    name = ctrl.name
    former = _PrometheusClientMetrics()

    def now() -> object:
        _run(ctrl._process(req))
        return None

    def before() -> object:
        # The former _process around a reconcile that returns None, restated: what it built and looked up.
        reconcile_id = uuid.uuid4().hex[:12]
        log.bind(controller=name, namespace=req.namespace, name=req.name, reconcile_id=reconcile_id)
        structlog.contextvars.bind_contextvars(
            controller=name, namespace=req.namespace, name=req.name, reconcile_id=reconcile_id
        )
        former.active.labels(name).set(1)
        started = ctrl._clock.now()
        _run(ctrl.reconciler.reconcile(req))
        ctrl.queue.forget(req)
        former.total.labels(name, metrics.RESULT_SUCCESS).inc()
        former.active.labels(name).set(0)
        former.time.labels(name).observe(max(0.0, ctrl._clock.now() - started))
        structlog.contextvars.clear_contextvars()
        return None

    return alternate("reconcile bookkeeping (now / before)", n, rounds, now, before)


_QUEUE_BUCKETS = metrics.WORKQUEUE_DURATION_BUCKETS


class _PrometheusClientMetrics:
    """The reconcile and request metrics as prometheus-client metrics (as they were before the lock-free ones)."""

    def __init__(self) -> None:
        registry = CollectorRegistry()
        queue = ("name", "controller")
        self.active = Gauge("controller_runtime_active_workers", "A.", ("controller",), registry=registry)
        self.total = Counter("controller_runtime_reconcile_total", "T.", ("controller", "result"), registry=registry)
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds", "T.", ("controller",), registry=registry, buckets=_SECONDS
        )
        self.depth = Gauge("workqueue_depth", "D.", queue, registry=registry)
        self.adds = Counter("workqueue_adds_total", "A.", queue, registry=registry)
        self.queued = Histogram(
            "workqueue_queue_duration_seconds",
            "Q.",
            queue,
            registry=registry,
            buckets=_QUEUE_BUCKETS,
        )
        self.worked = Histogram(
            "workqueue_work_duration_seconds",
            "W.",
            queue,
            registry=registry,
            buckets=_QUEUE_BUCKETS,
        )
        self.requests = Counter("rest_client_requests_total", "R.", ("code", "method", "host"), registry=registry)
        self.latency = Histogram(
            "rest_client_request_duration_seconds", "L.", ("verb", "host"), registry=registry, buckets=_SECONDS
        )
        self.wait = Histogram(
            "rest_client_rate_limiter_duration_seconds", "W.", ("verb", "host"), registry=registry, buckets=_SECONDS
        )


class _LockFreeMetrics:
    """The same metrics as the manager keeps them now (:mod:`kthena_py.kube.tally`), in a registry of their own."""

    def __init__(self) -> None:
        queue = ("name", "controller")
        self.active = TallyGauge("controller_runtime_active_workers", "A.", ("controller",))
        self.total = Tally("controller_runtime_reconcile_total", "T.", ("controller", "result"))
        self.time = TallyHistogram("controller_runtime_reconcile_time_seconds", "T.", ("controller",), _SECONDS)
        self.depth = TallyGauge("workqueue_depth", "D.", queue)
        self.adds = Tally("workqueue_adds_total", "A.", queue)
        self.queued = TallyHistogram(
            "workqueue_queue_duration_seconds", "Q.", queue, metrics.WORKQUEUE_DURATION_BUCKETS
        )
        self.worked = TallyHistogram("workqueue_work_duration_seconds", "W.", queue, _QUEUE_BUCKETS)
        self.requests = Tally("rest_client_requests_total", "R.", ("code", "method", "host"))
        self.latency = TallyHistogram("rest_client_request_duration_seconds", "L.", ("verb", "host"), _SECONDS)
        self.wait = TallyHistogram("rest_client_rate_limiter_duration_seconds", "W.", ("verb", "host"), _SECONDS)


def metric_updates(rounds: int) -> tuple[list[float], list[float]]:
    """Nanoseconds of the metric updates of one reconcile that sends one request, lock-free against prometheus-client.

    One reconcile's queue and controller updates (an add, the depth set twice, the queue and work durations, the
    active workers set twice, the reconcile's count and time) and one request's (its count, latency and wait), each
    on a child kept as the manager keeps them.
    """
    n = 100_000
    lock_free: list[float] = []
    locked: list[float] = []

    def bound(m: _LockFreeMetrics | _PrometheusClientMetrics) -> Callable[[], None]:
        q = ("bench", "bench")
        depth, adds, queued, worked = m.depth.labels(*q), m.adds.labels(*q), m.queued.labels(*q), m.worked.labels(*q)
        active, total, time_ = m.active.labels("bench"), m.total.labels("bench", "success"), m.time.labels("bench")
        requests = m.requests.labels("201", "POST", "https://127.0.0.1:6443")
        latency, wait = (
            m.latency.labels("POST", "https://127.0.0.1:6443"),
            m.wait.labels("POST", "https://127.0.0.1:6443"),
        )

        def one() -> None:
            adds.inc()
            depth.set(1)
            depth.set(0)
            queued.observe(0.0012)
            active.set(1)
            wait.observe(0.00003)
            requests.inc()
            latency.observe(0.004)
            active.set(0)
            total.inc()
            time_.observe(0.006)
            worked.observe(0.006)

        return one

    now, before = bound(_LockFreeMetrics()), bound(_PrometheusClientMetrics())
    for _ in range(rounds):
        lock_free.append(timeit.timeit(now, number=n) * 1e9 / n)
        locked.append(timeit.timeit(before, number=n) * 1e9 / n)
    return lock_free, locked


def watch_counting(rounds: int) -> tuple[list[float], list[float]]:
    registry = CollectorRegistry()
    tally_bytes = Tally("bench_bytes_total", "Bytes.", ("resource",)).labels("pods")
    tally_events = Tally("bench_events_total", "Events.", ("resource", "type")).labels("pods", "MODIFIED")
    counter_bytes = Counter("bench_bytes_total", "Bytes.", ("resource",), registry=registry).labels("pods")
    counter_events = Counter("bench_events_total", "Events.", ("resource", "type"), registry=registry).labels(
        "pods", "MODIFIED"
    )
    n = 200_000
    tallied: list[float] = []
    counted: list[float] = []

    def tally() -> None:
        tally_bytes.inc(4096)
        tally_events.inc()

    def counter() -> None:
        counter_bytes.inc(4096)
        counter_events.inc()

    for _ in range(rounds):
        tallied.append(timeit.timeit(tally, number=n) * 1e9 / n)
        counted.append(timeit.timeit(counter, number=n) * 1e9 / n)
    return tallied, counted


def _fields(value: object) -> object:
    """``value``'s field set as ``fieldsV1`` records it: ``f:`` per key, ``k:`` per item of a list keyed by name."""
    if isinstance(value, dict):
        return {f"f:{key}": _fields(item) for key, item in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, dict) and "name" in item for item in value):
        return {
            f"k:{to_json({'name': item['name']}).decode()}": {".": {}, **_fields(item)}  # type: ignore[dict-item]
            for item in value
        }
    return {}


def pod_event() -> bytes:
    """One pod's watch event as the API server sends it: managedFields last in metadata, then spec and status."""
    sim = Simulation(modelserving(1))
    sim.settle()
    pod = dict(sim.observed().pods[0])
    metadata = dict(pod["metadata"])
    spec_owner = {"f:metadata": _fields({k: metadata[k] for k in ("labels", "annotations") if k in metadata})}
    metadata["managedFields"] = [
        {"manager": "kthena-py-servinggroups", "operation": "Update", "apiVersion": "v1",
         "time": "2026-12-05T12:42:45Z", "fieldsType": "FieldsV1",
         "fieldsV1": {**spec_owner, "f:spec": _fields(pod.get("spec"))}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-12-05T12:42:47Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:status": _fields(pod.get("status"))}, "subresource": "status"},
    ]  # fmt: skip
    ordered = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": pod.get("spec"),
        "status": pod.get("status"),
    }
    return to_json({"type": "MODIFIED", "object": ordered})


def watch_decoding(n: int, rounds: int) -> tuple[list[float], list[float]]:
    event = pod_event()
    assert without_managed_fields(event) is not event, "the benchmark's event must be one the cut applies to"
    return alternate(
        f"watch decoding of a pod event, {len(event)} bytes (cut / whole)",
        n,
        rounds,
        lambda: from_json(without_managed_fields(event)),
        lambda: from_json(event),
    )


class _RefilingStore(Store):
    """The store as it was: every update unfiled the old version and filed the new one, whatever changed."""

    def upsert(self, obj: KubeObject) -> KubeObject | None:
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._index(key, obj)
        return old


def _pod_indexers(read_label: Callable[[KubeObject, str], str | None]) -> dict[str, IndexFunc]:
    def by_label(label: str) -> IndexFunc:
        def values(obj: KubeObject) -> list[str]:
            value = read_label(obj, label)
            return [] if value is None else [value]

        return values

    return {
        NAMESPACE_INDEX: lambda o: [namespace_of(o)],
        OWNER_INDEX: owner_uids,
        label_index_name(SERVING_GROUP_NAME): by_label(SERVING_GROUP_NAME),
        label_index_name(SERVING_NAME): by_label(SERVING_NAME),
    }


def store_updates(n: int, rounds: int) -> tuple[list[float], list[float]]:
    sim = Simulation(modelserving(1))
    sim.settle()
    pod = dict(sim.observed().pods[0])
    status = dict(pod.get("status") or {})
    versions = [{**pod, "status": {**status, "phase": phase}} for phase in ("Pending", "Running")]
    now = Store(_pod_indexers(label_of))
    before = _RefilingStore(_pod_indexers(lambda o, label: labels_of(o).get(label)))
    step = iter(range(1 << 62))
    return alternate(
        "store update of a pod's status (values compared / refiled)",
        n,
        rounds,
        lambda: now.upsert(versions[next(step) & 1]),
        lambda: before.upsert(versions[next(step) & 1]),
    )


class _Relay:
    """An informer handler that forgets some kept answers, then hands the event on."""

    def __init__(self, handler: EventHandler, memos: tuple[PerEvent[Any, Any, Any] | PerObject[Any, Any], ...]) -> None:
        self._handler = handler
        self._memos = memos

    def on_add(self, obj: KubeObject) -> None:
        for m in self._memos:
            m.forget()
        self._handler.on_add(obj)

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        for m in self._memos:
            m.forget()
        self._handler.on_update(old, new)

    def on_delete(self, obj: KubeObject) -> None:
        for m in self._memos:
            m.forget()
        self._handler.on_delete(obj)


def _pod_versions(pod: KubeObject) -> list[KubeObject]:
    """A settled pod as it goes: created (Pending, unbound), bound, Running but not Ready, Ready."""
    spec = dict(pod["spec"])
    status = dict(pod.get("status") or {})
    unbound = {k: v for k, v in spec.items() if k != "nodeName"}
    not_ready = [c if c.get("type") != "Ready" else {**c, "status": "False"} for c in status.get("conditions") or []]
    return [
        {**pod, "spec": unbound, "status": {"phase": "Pending"}},
        {**pod, "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}},
        {**pod, "status": {**status, "conditions": not_ready}},
        pod,
    ]


def _fanout_informer(memos: tuple[PerEvent[Any, Any, Any] | PerObject[Any, Any], ...]) -> tuple[Informer, Informer]:
    """The pod and ModelServing informers of a manager with every controller registered, handlers behind relays."""
    manager = Manager(FakeKube())
    register_all(manager)
    for c in manager.controllers:  # what Controller.start attaches, without starting workers
        for w in c._watches:
            manager.cache.informer(w.rt, field_selector=w.field_selector).add_handler(
                _Handler(w, c.queue, c.name, c._owns)
            )
    pods = manager.cache.informer(PODS)
    pods._handlers = [_Relay(h, memos) for h in pods._handlers]
    return pods, manager.cache.informer(MODELSERVINGS)


async def _fanout(n: int, rounds: int) -> tuple[list[float], list[float]]:
    shared = (pod_state_changed, became_ready_only, owner_mapper(MODELSERVINGS))
    unused = (PerEvent(lambda a, b: None), PerEvent(lambda a, b: None), PerObject(lambda a: None))
    now, now_ms = _fanout_informer(unused)
    before, before_ms = _fanout_informer(shared)
    fleet: list[list[KubeObject]] = []
    for i in range(100):
        sim = Simulation(modelserving(i))
        sim.settle()
        for informer in (now_ms, before_ms):
            informer.observe("ADDED", sim.doc)
        fleet += [_pod_versions(p) for p in sim.observed().pods]
    events: list[tuple[str, KubeObject]] = []
    for step in range(4):
        for versions in fleet:
            events.append(("ADDED" if step == 0 else "MODIFIED", versions[step]))
    delete = [("DELETED", versions[3]) for versions in fleet]

    def through(informer: Informer) -> Callable[[], object]:
        position = iter(range(1 << 62))
        cycle = events + delete

        def one() -> object:
            type_, obj = cycle[next(position) % len(cycle)]
            informer.observe(type_, {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}})
            return None

        return one

    return alternate("pod event fan-out (answered once / afresh)", n, rounds, through(now), through(before))


def handler_fanout(n: int, rounds: int) -> tuple[list[float], list[float]]:
    return asyncio.run(_fanout(n, rounds))


def _figure(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def line(name: str, unit: str, now: list[float], before: list[float]) -> str:
    med = statistics.median
    paired = " ".join(f"{a / b:.2f}" for a, b in zip(now, before, strict=True))
    return (
        f"  {name}: {_figure(med(now))} {unit} now, {_figure(med(before))} {unit} before; "
        f"ratio of medians {med(now) / med(before):.2f}, paired {paired}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=2000, help="plans per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    memo, parsed = plans(args.plans, args.rounds)
    reused, again = target_reuse(args.plans, args.rounds)
    by_type, by_key = lookups(args.rounds)
    kept, rebuilt = bookkeeping(args.plans * 10, args.rounds)
    tallied, counted = watch_counting(args.rounds)
    unlocked, locked = metric_updates(args.rounds)
    cut, whole = watch_decoding(args.plans * 10, args.rounds)
    compared, refiled = store_updates(args.plans * 10, args.rounds)
    once, afresh = handler_fanout(args.plans * 10, args.rounds)
    print("summary (medians; ratio < 1: the path as it is now costs less):")
    print(line("plan_servinggroups (settled, 8 pods)", "us", memo, parsed))
    print(line("plan_servinggroups, targets reused (settled, 8 pods)", "us", reused, again))
    print(line("informer lookup", "ns", by_type, by_key))
    print(line("reconcile bookkeeping (a reconcile that does nothing)", "us", kept, rebuilt))
    print(line("watch counting (bytes and type of one event)", "ns", tallied, counted))
    print(line("metric updates of a reconcile and a request (lock-free / prometheus-client)", "ns", unlocked, locked))
    print(line("watch decoding (one pod event, managedFields cut out / decoded whole)", "us", cut, whole))
    print(line("store update (a pod's status, four indices: values compared / refiled)", "us", compared, refiled))
    print(line("pod event fan-out (store and every handler: answered once per event / afresh)", "us", once, afresh))


if __name__ == "__main__":
    main()
