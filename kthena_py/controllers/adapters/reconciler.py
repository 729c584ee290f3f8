"""The adapter reconciler: keeps a ModelServing's LoRA adapter set loaded on its Ready entry pods.

One reconcile looks at one ModelServing and all its entry pods (planned by :func:`~kthena_py.plan.adapters.plan.
plan_pod`), sends the loads and unloads, writes each pod's labels, and summarises in the ``AdaptersLoaded``
condition.

Guarantees:

* **The state lives on the pods.** A loaded adapter is the pod label ``adapter.kthena-py.io/<name>`` = source
  digest, written (merge patch, field manager ``kthena-py-adapters``, UID-guarded) right after the load answered;
  with every write the pod's restart count is recorded (``serving.kthena-py.io/lora-restarts``), so a restart is
  noticed and the set reloaded. A restarted manager resumes from the pods alone.
* **No double load after a crash**: before a load is sent its intent (digest, time, this process's
  ``identity``) is written on the pod (``serving.kthena-py.io/lora-loading``); a manager that finds an intent
  watches the engine's ``/v1/models``: an adapter listed with the expected root is labelled without a load; an
  intent another process wrote that is still not listed ``intent_grace`` after it was written is sent again (its
  writer died before sending it), one of its own is waited for up to the load timeout.
* **Nothing in doubt is left behind**: an adapter whose load was in doubt and that left the set meanwhile is
  unloaded once the engine lists it (its intent is kept until then, or until it is known lost).
* **Bounded**: loads on one pod go one at a time; at most ``max_loads`` loads of one ModelServing are in flight
  (the work queue already runs one reconcile per ModelServing at a time).
* **Failures back off** (1 s doubling to 5 min, per pod, adapter and source, kept in memory: a restarted manager
  retries at once) and each one is a Warning Event ``AdapterLoadFailed`` / ``AdapterUnloadFailed`` naming the pod,
  the adapter and the engine's message; the condition says ``False``/``AdapterLoadFailed`` naming the pod until it
  loads. A new source (the annotation fixed) is tried at once.
* **Owned condition**: ``AdaptersLoaded`` is written by server-side apply of the status under
  ``kthena-py-adapters`` alone in its share (nobody else's conditions are dropped), only when it changes; it is
  removed when the ModelServing drops its adapters (and no pod holds one).
* The reconcile asks to be looked at again at the earliest retry, wait poll or wait expiry.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from kthena_py.kube import KubeApi
from kthena_py.kube.errors import Conflict, Invalid, NotFound
from kthena_py.kube.objects import KubeObject, is_deleting, meta
from kthena_py.kube.resources import PODS
from kthena_py.plan.activator.targets import port_of
from kthena_py.plan.adapters.condition import PodOutcome, adapters_condition
from kthena_py.plan.adapters.desired import Adapter, adapter_label, adapters_of
from kthena_py.plan.adapters.endpoint import LoadEndpoint, endpoint_of
from kthena_py.plan.adapters.plan import (
    INTENT_GRACE_SECONDS,
    LOAD_TIMEOUT_SECONDS,
    Failure,
    PodPlan,
    plan_pod,
    retry_delay,
)
from kthena_py.plan.adapters.pods import LoadIntent, PodView, format_intents, pod_view
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.runtime.statuswrite import StatusWriter
from kthena_py.vocab.conditions import (
    ADAPTERS_LOADED,
    REASON_ADAPTER_LOAD_FAILED,
    REASON_ADAPTER_UNLOAD_FAILED,
    REASON_ADAPTERS_LOADED,
)
from kthena_py.vocab.labels import ADAPTERS_FIELD_MANAGER, LORA_LOADING, LORA_RESTARTS

from ..resources import MODELSERVINGS
from .engine import AdapterEngine, EngineCallFailed
from .metrics import CALLS, IN_FLIGHT, LOAD_SECONDS, forget, forget_namespaces, set_pods

__all__ = ["MAX_LOADS_PER_MODELSERVING", "AdapterReconciler"]

MAX_LOADS_PER_MODELSERVING = 4
_MIN_REQUEUE = 0.2

log = structlog.get_logger("kthena_py.adapters")

_Key = tuple[str, str]


def _condition_of(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


class _PodWork:
    """One pod's pass: its plan carried out, its label and annotation changes gathered into patches."""

    def __init__(self, namespace: str, view: PodView, plan: PodPlan) -> None:
        self.namespace = namespace
        self.view = view
        self.plan = plan
        self.labels: dict[str, str | None] = {}
        self.intents: dict[str, LoadIntent] = {} if plan.stale else dict(view.intents)
        for name in plan.drop_intents:
            self.intents.pop(name, None)
        for name in plan.drop_labels:
            self.labels[adapter_label(name)] = None
        for adapter in plan.adopt:
            self.labels[adapter.label] = adapter.digest
        self.loaded: set[str] = set(plan.loaded) | {a.name for a in plan.adopt}
        self.failed: dict[str, str] = {}
        self.wake: float | None = plan.wake_at

    def body(self) -> dict[str, Any]:
        annotations: dict[str, str | None] = {
            LORA_LOADING: format_intents(self.intents),
            LORA_RESTARTS: str(self.view.restarts),
        }
        return {"metadata": {"uid": self.view.uid, "labels": dict(self.labels), "annotations": annotations}}


class AdapterReconciler:
    """Loads, unloads and labels the LoRA adapters of one ModelServing's pods (see the module docstring)."""

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        engine: AdapterEngine,
        *,
        max_loads: int = MAX_LOADS_PER_MODELSERVING,
        load_timeout: float = LOAD_TIMEOUT_SECONDS,
        intent_grace: float = INTENT_GRACE_SECONDS,
        identity: str | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self.engine = engine
        self.max_loads = max(1, max_loads)
        self.load_timeout = load_timeout
        self.intent_grace = intent_grace
        self.identity = identity or uuid.uuid4().hex[:16]
        """Written as the owner of this process's intents (a new one per process: a restart is another writer)."""
        self.writer = StatusWriter(client, MODELSERVINGS, ADAPTERS_FIELD_MANAGER)
        self._now = wall_clock
        self._failures: dict[_Key, dict[str, dict[str, Failure]]] = {}
        """ModelServing -> pod UID -> adapter name -> its last failure (in memory only)."""

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: drop what is kept for them here."""
        forget_namespaces(leaving)

    async def reconcile(self, request: Request) -> Result | None:
        """One pass over one ModelServing's entry pods."""
        key = (request.namespace, request.name)
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            self._failures.pop(key, None)
            forget(*key)
            return None
        desired = adapters_of(obj)
        views = [v for p in self.cache.owned_by(PODS, str(meta(obj).get("uid"))) if (v := pod_view(p)) is not None]
        previous = _condition_of(obj, ADAPTERS_LOADED)
        if not desired and not any(v.labels or v.intents for v in views):
            self._failures.pop(key, None)
            forget(*key)
            if previous is not None:
                await self.writer.apply(obj, {"conditions": []}, always=True)
            return None
        engine_port = port_of(obj)
        endpoint, _ = endpoint_of(obj, engine_port)
        failures = self._failures.setdefault(key, {})
        for uid in set(failures) - {v.uid for v in views}:
            del failures[uid]
        slots = asyncio.Semaphore(self.max_loads)
        now = self._now()
        works = await asyncio.gather(
            *(self._pod(obj, view, desired, endpoint, engine_port, slots, now) for view in sorted(views, key=_name))
        )
        outcomes = [
            PodOutcome(
                w.view.name,
                w.plan.ready,
                tuple(a.name for a in desired if a.name not in w.loaded),
                self._current_failures(key, w.view.uid, desired, w.failed),
            )
            for w in works
        ]
        ready = [o for o in outcomes if o.ready]
        set_pods(*key, sum(1 for o in ready if not o.missing), sum(1 for o in ready if o.missing))
        if desired:
            await self._write_condition(obj, outcomes, previous)
        elif previous is not None:
            await self.writer.apply(obj, {"conditions": []}, always=True)
        wakes = [w.wake for w in works if w.wake is not None]
        if not wakes:
            return None
        return Result(requeue_after=max(_MIN_REQUEUE, min(wakes) - self._now()))

    def _current_failures(
        self, key: _Key, uid: str, desired: Sequence[Adapter], fresh: Mapping[str, str]
    ) -> dict[str, str]:
        held = self._failures.get(key, {}).get(uid, {})
        digests = {a.name: a.digest for a in desired}
        found = {name: f.message for name, f in held.items() if digests.get(name) == f.digest}
        return found | dict(fresh)

    async def _pod(
        self,
        obj: KubeObject,
        view: PodView,
        desired: Sequence[Adapter],
        endpoint: LoadEndpoint,
        engine_port: int,
        slots: asyncio.Semaphore,
        now: float,
    ) -> _PodWork:
        failures = self._failures.setdefault((str(meta(obj).get("namespace")), str(meta(obj).get("name"))), {})
        held = failures.setdefault(view.uid, {})
        plan = self._plan(desired, endpoint, view, now, held)
        if plan.needs_inventory:
            plan = self._plan(desired, endpoint, view, now, held, await self.engine.inventory(view.ip, engine_port))
        namespace, name = str(meta(obj).get("namespace")), str(meta(obj).get("name"))
        work = _PodWork(namespace, view, plan)
        for adapter in plan.adopt:
            CALLS.labels(namespace, name, "adopt", "ok").inc()
            log.info(
                "adapter found loaded, labelled", namespace=namespace, name=name, pod=view.name, adapter=adapter.name
            )
        adopted = {a.name for a in plan.adopt}
        for dropped in plan.drop_intents:
            if dropped not in adopted and not plan.stale and (intent := view.intents.get(dropped)) is not None:
                log.info(
                    "adapter load in doubt given up: the engine does not list it",
                    namespace=namespace,
                    name=name,
                    pod=view.name,
                    adapter=dropped,
                    written_by=intent.owner or "unknown",
                    age=round(now - intent.since, 3),
                    sent_again=dropped in {a.name for a in plan.loads},
                )
        still_loaded: set[str] = set()
        wanted = {a.name: a.digest for a in desired}
        for unload in plan.unloads:
            orphan = view.intents.get(unload)
            if orphan is not None and wanted.get(unload) == orphan.digest:
                orphan = None
            digest = view.labels.get(unload) or (orphan.digest if orphan is not None else "")
            try:
                await self.engine.unload(view.ip, endpoint, unload)
            except EngineCallFailed as exc:
                self._failed(obj, work, held, unload, digest, str(exc), endpoint, REASON_ADAPTER_UNLOAD_FAILED)
                still_loaded.add(unload)  # a new source of this name cannot be loaded over it
                continue
            CALLS.labels(namespace, name, "unload", "ok").inc()
            held.pop(unload, None)
            if orphan is not None:
                work.intents.pop(unload, None)  # the load in doubt landed and is undone
                log.info("adapter loaded in doubt and no longer wanted, unloaded", pod=view.name, adapter=unload)
            work.labels[adapter_label(unload)] = None
            work.loaded.discard(unload)
        if (work.labels or plan.writes or _unrecorded(view)) and not await self._patch(view, work):
            return work
        for adapter in plan.loads:
            if adapter.name in still_loaded:
                continue
            work.intents[adapter.name] = LoadIntent(adapter.digest, self._now(), self.identity)
            if not await self._patch(view, work):
                return work
            async with slots:
                ok = await self._load(obj, work, held, adapter, endpoint)
            work.intents.pop(adapter.name, None)
            if ok:
                work.labels[adapter.label] = adapter.digest
                work.loaded.add(adapter.name)
            if not await self._patch(view, work):
                return work
        return work

    def _plan(
        self,
        desired: Sequence[Adapter],
        endpoint: LoadEndpoint,
        view: PodView,
        now: float,
        held: Mapping[str, Failure],
        *inventory: dict[str, str] | None,
    ) -> PodPlan:
        """The pod's plan, without the inventory or (one argument more) with what the probe read."""
        return plan_pod(
            desired,
            endpoint,
            view,
            now=now,
            failures=held,
            inventory=inventory[0] if inventory else None,
            probed=bool(inventory),
            load_timeout=self.load_timeout,
            intent_grace=self.intent_grace,
            me=self.identity,
        )

    async def _load(
        self, obj: KubeObject, work: _PodWork, held: dict[str, Failure], adapter: Adapter, endpoint: LoadEndpoint
    ) -> bool:
        namespace, name = str(meta(obj).get("namespace")), str(meta(obj).get("name"))
        started = time.monotonic()
        IN_FLIGHT.inc()
        try:
            await self.engine.load(work.view.ip, endpoint, adapter)
        except EngineCallFailed as exc:
            self._failed(obj, work, held, adapter.name, adapter.digest, str(exc), endpoint, REASON_ADAPTER_LOAD_FAILED)
            return False
        finally:
            IN_FLIGHT.dec()
            LOAD_SECONDS.observe(time.monotonic() - started)
        CALLS.labels(namespace, name, "load", "ok").inc()
        held.pop(adapter.name, None)
        log.info(
            "adapter loaded",
            namespace=namespace,
            name=name,
            pod=work.view.name,
            adapter=adapter.name,
            endpoint=endpoint.kind,
            seconds=round(time.monotonic() - started, 3),
        )
        return True

    def _failed(
        self,
        obj: KubeObject,
        work: _PodWork,
        held: dict[str, Failure],
        adapter: str,
        digest: str,
        message: str,
        endpoint: LoadEndpoint,
        reason: str,
    ) -> None:
        namespace, name = str(meta(obj).get("namespace")), str(meta(obj).get("name"))
        call = "load" if reason == REASON_ADAPTER_LOAD_FAILED else "unload"
        CALLS.labels(namespace, name, call, "failed").inc()
        before = held.get(adapter)
        attempts = before.attempts + 1 if before is not None and before.digest == digest else 1
        failure = Failure(digest, attempts, self._now(), message)
        held[adapter] = failure
        if call == "load":
            work.failed[adapter] = message
        work.wake = failure.retry_at if work.wake is None else min(work.wake, failure.retry_at)
        delay = retry_delay(attempts)
        text = (
            f"pod {work.view.name}: the {endpoint.kind} did not {call} adapter {adapter}: {message} "
            f"(attempt {attempts}, next in {delay:g}s)"
        )
        self.recorder.event(obj, "Warning", reason, text, join=False)
        log.warning(
            f"adapter {call} failed",
            namespace=namespace,
            name=name,
            pod=work.view.name,
            adapter=adapter,
            message=message,
            attempts=attempts,
        )

    async def _patch(self, view: PodView, work: _PodWork) -> bool:
        """Write the pod's labels and annotations; ``False`` when the pod is gone or was replaced."""
        try:
            await self.client.patch(
                PODS,
                view.name,
                work.body(),
                work.namespace,
                field_manager=ADAPTERS_FIELD_MANAGER,
            )
        except (NotFound, Conflict, Invalid) as exc:
            log.info("pod gone before its adapter labels were written", pod=view.name, error=str(exc))
            return False
        work.labels = {}
        return True

    async def _write_condition(
        self, obj: KubeObject, outcomes: Sequence[PodOutcome], previous: Mapping[str, Any] | None
    ) -> None:
        condition = adapters_condition(outcomes, previous, int(meta(obj).get("generation") or 0), self._now())
        outcome = await self.writer.apply(obj, {"conditions": [condition]})
        if not outcome.written:
            return
        if outcome.object is not None:
            self.cache.record_write(MODELSERVINGS, outcome.object)
        if condition["reason"] == REASON_ADAPTERS_LOADED and (previous is None or previous.get("status") != "True"):
            self.recorder.event(obj, "Normal", REASON_ADAPTERS_LOADED, condition["message"], join=False)
        log.info(
            "wrote the AdaptersLoaded condition",
            namespace=meta(obj).get("namespace"),
            name=meta(obj).get("name"),
            status=condition["status"],
            reason=condition["reason"],
            message=condition["message"],
        )


def _name(view: PodView) -> str:
    return view.name


def _unrecorded(view: PodView) -> bool:
    """Whether the pod holds adapter labels without the restart count they were written at (to be recorded)."""
    return bool(view.labels) and view.recorded_restarts is None
