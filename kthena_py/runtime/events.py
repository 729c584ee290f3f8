"""Kubernetes Events for the objects controllers act on.

Guarantees:

* Recording never blocks or fails a reconcile: events are written by background tasks, and a
  failure to write one is logged, not raised.
* Repeated events (same object, type, reason and message) are aggregated into one Event object
  whose ``count`` and ``lastTimestamp`` grow, as ``kubectl describe`` expects. The Event's name is
  derived from those fields, so aggregation needs no memory of past events and survives restarts.
  A repeat of an Event this process wrote costs one request: a patch of its count guarded by the
  resourceVersion last written (the last 4,096 Events are remembered). A forgotten Event, or one
  changed since, costs three: the refused create, a read, the patch (also guarded; read again if
  another writer raised the count meanwhile). Writes of one Event take turns, so no count is lost.
* Events about one object with the same type and reason recorded within ``coalesce_seconds`` are
  written as one Event whose message joins theirs (``"; "``, in order, duplicates once, at most
  1024 characters; a message that does not fit starts a new Event): same information, a fraction of
  the API writes. An event recorded with ``join=False`` is never joined with another message: it is
  one Event per distinct message (tools that parse a message as one sentence keep working), and a
  repeat of it within the window is still absorbed. :meth:`EventRecorder.flush` writes what
  is waiting at once; :meth:`EventRecorder.discard` drops it (a replica that lost its lease writes
  nothing more).
* At most ``max_pending`` events wait or are in flight; beyond that, events are dropped with a log
  line rather than piling up.
* Events yield to the controllers' own writes: at most ``max_in_flight`` Event writes are sent at a time, so a
  burst of Events (hundreds of ``RoleCreating`` while a fleet is created) trails the pods and Services it
  reports on instead of competing with them for the connection pool and the API server. A waiting event keeps
  only the reference fields of its object, not the object.
* Every write the window produces then goes through client-go's correlator
  (:mod:`kthena_py.runtime.eventcorrelator`, with client-go's defaults), as Kthena's Go manager's Events do: from
  the tenth distinct message about one object, type and reason within ten minutes, writes become the one
  ``(combined from similar events): ...`` Event of that object, type and reason (named without the message, so
  repeats raise its ``count`` and refresh its message); and each object and type may send a burst of 25 writes,
  then one every five minutes; the rest are filtered.
* Every Event written or given up is counted in ``kthena_events_written_total{component,type,outcome}``:
  ``created`` (a new Event), ``counted`` (a repeat raised an existing Event's ``count``), ``failed`` (the API
  server refused it or it could not be sent), ``dropped`` (too many were pending, or it was discarded when the
  replica stopped leading), ``filtered`` (the per-object burst was spent). Messages joined or absorbed in the
  window are part of one write, not writes.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol

import structlog
from prometheus_client import Counter

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeApi, NotFound
from kthena_py.kube.objects import meta
from kthena_py.kube.resources import EVENTS
from kthena_py.vocab.times import format_time

from .eventcorrelator import COMBINED_PREFIX, EventCorrelator, Recent
from .metrics import REGISTRY

EventType = Literal["Normal", "Warning"]
MAX_MESSAGE = 1024
SEPARATOR = "; "

log = structlog.get_logger("kthena_py.events")

EVENTS_WRITTEN: Final = Counter(
    "kthena_events_written_total",
    "Event writes by the recorder, by outcome: created (a new Event), counted (a repeat raised an Event's count), "
    "failed (refused or not sent), dropped (too many pending, or discarded on losing the lease), "
    "filtered (the object's burst of Events was spent).",
    ("component", "type", "outcome"),
    registry=REGISTRY,
)

_Outcome = Literal["created", "counted", "failed", "dropped", "filtered"]
"""How an Event write ended (the ``outcome`` label of ``kthena_events_written_total``)."""

_Key = tuple[str, str, str, str, str, str | None]
"""Namespace, name, UID, type, reason, and the message of an event that is not joined (else None)."""
REMEMBERED_EVENTS: Final = 4096
"""Events whose count and resourceVersion a recorder remembers, so that a repeat is one patch."""
_READ_ATTEMPTS: Final = 3
"""Reads of an Event whose count another writer raised between the read and the patch, before giving up."""


class _NameTurn:
    """Writes of one Event name take turns, so that each finds the count the one before it left."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.writers = 0


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What an Event's ``involvedObject`` needs of ``obj``."""
    md = meta(obj)
    keep = ("name", "namespace", "uid", "resourceVersion")
    return {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "metadata": {k: md[k] for k in keep if k in md},
    }


def _now() -> str:
    return format_time(time.time())


class _Batch:
    """Events about one object, type and reason waiting to be written as one Event."""

    def __init__(self, obj: dict[str, Any], type_: EventType, reason: str, message: str) -> None:
        self.obj = obj
        self.type = type_
        self.reason = reason
        self.messages = [message]
        self.length = len(message)
        self.timer: asyncio.TimerHandle | None = None

    def try_add(self, message: str) -> bool:
        """Add ``message`` if it fits (a repeat of a waiting message is absorbed)."""
        if message in self.messages:
            return True
        if self.length + len(SEPARATOR) + len(message) > MAX_MESSAGE:
            return False
        self.messages.append(message)
        self.length += len(SEPARATOR) + len(message)
        return True


class EventSink(Protocol):
    """Where controllers record Events: what they use of :class:`EventRecorder` (tests pass a recording fake)."""

    def event(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str, *, join: bool = True) -> None:
        """Record an event about ``obj`` (see :meth:`EventRecorder.event`)."""
        ...


class EventRecorder:
    """Writes core/v1 Events as ``component`` (the ``source`` / ``reportingComponent``).

    Args:
        client: The API client.
        component: ``source.component`` / ``reportingComponent`` of every Event.
        instance: ``reportingInstance`` (default: the component).
        max_pending: Events waiting or being written beyond which new ones are dropped.
        max_in_flight: Event writes sent at a time.
        coalesce_seconds: How long an event waits for others of the same object, type and reason
            (``0``: only those recorded in the same event-loop iteration are joined).
        correlator: What combines similar writes and filters bursts (default: client-go's defaults).
    """

    def __init__(
        self,
        client: KubeApi,
        component: str,
        *,
        instance: str = "",
        max_pending: int = 10_000,
        coalesce_seconds: float = 1.0,
        max_in_flight: int = 8,
        correlator: EventCorrelator | None = None,
    ) -> None:
        self._client = client
        self.component = component
        self.instance = instance
        self._max_pending = max_pending
        self._coalesce = coalesce_seconds
        self._pending: set[asyncio.Task[None]] = set()
        self._batches: dict[_Key, _Batch] = {}
        self._in_flight = asyncio.Semaphore(max(1, max_in_flight))
        self._correlator = correlator if correlator is not None else EventCorrelator()
        self._written: Recent[tuple[str, str], tuple[int, str]] = Recent(REMEMBERED_EVENTS)
        """(namespace, name) of Events this recorder wrote -> their count and resourceVersion then."""
        self._writing: dict[tuple[str, str], _NameTurn] = {}
        """Events being written -> the turn writes of the same Event take (a combined Event has many writers)."""

    def event(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str, *, join: bool = True) -> None:
        """Record an event about ``obj`` (any object with apiVersion, kind and metadata).

        Args:
            obj: The object the event is about.
            type_: ``Normal`` or ``Warning``.
            reason: The event's reason.
            message: The event's message.
            join: Whether the message may be joined with others of the same object, type and reason
                (``False``: an Event of its own, with exactly this message).
        """
        message = message[:MAX_MESSAGE]
        md = meta(obj)
        separate = None if join else message
        key = (str(md.get("namespace", "")), str(md.get("name", "")), str(md.get("uid", "")), type_, reason, separate)
        batch = self._batches.get(key)
        if batch is not None and batch.try_add(message):
            return
        if batch is not None:
            self._write_batch(key)
        if len(self._pending) + len(self._batches) >= self._max_pending:
            log.warning("dropping event, too many pending", reason=reason, message=message)
            EVENTS_WRITTEN.labels(self.component, type_, "dropped").inc()
            return
        batch = _Batch(_reference(obj), type_, reason, message)
        self._batches[key] = batch
        batch.timer = asyncio.get_running_loop().call_later(self._coalesce, self._write_batch, key)

    def _write_batch(self, key: _Key) -> None:
        batch = self._batches.pop(key, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        message = SEPARATOR.join(batch.messages)
        involved = (str(batch.obj.get("apiVersion", "")), str(batch.obj.get("kind", "")), *key[:3])
        verdict = self._correlator.correlate(involved, batch.type, batch.reason, message, time.monotonic())
        if not verdict.send:
            log.debug("event filtered, the object's burst is spent", reason=batch.reason, object=key[1])
            EVENTS_WRITTEN.labels(self.component, batch.type, "filtered").inc()
            return
        identity = COMBINED_PREFIX if verdict.combined else message
        text = verdict.message[:MAX_MESSAGE]
        task = asyncio.create_task(self._write(batch.obj, batch.type, batch.reason, text, identity))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def discard(self) -> None:
        """Drop every waiting event and cancel the writes in flight."""
        for batch in self._batches.values():
            if batch.timer is not None:
                batch.timer.cancel()
            EVENTS_WRITTEN.labels(self.component, batch.type, "dropped").inc()
        self._batches.clear()
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def flush(self) -> None:
        """Write every waiting event now and wait until all have been written (or have failed)."""
        for key in list(self._batches):
            self._write_batch(key)
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _write(self, obj: dict[str, Any], type_: EventType, reason: str, message: str, identity: str) -> None:
        """Write one Event, named by the object, type, reason and ``identity`` (the message or the combined prefix)."""
        md = meta(obj)
        namespace = str(md.get("namespace") or "default")
        digest = hashlib.sha256(
            "\x00".join([str(md.get("uid", "")), type_, reason, identity, self.component]).encode()
        ).hexdigest()[:16]
        name = f"{md.get('name', 'unknown')}.{digest}"
        now = _now()
        body = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": md.get("name", ""),
                "namespace": md.get("namespace", ""),
                "uid": md.get("uid", ""),
                "resourceVersion": md.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance or self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        outcome: _Outcome = "dropped"  # unless it is sent: cancelled (discarded) while waiting or in flight
        event_key = (namespace, name)
        turn = self._writing.get(event_key)
        if turn is None:
            turn = self._writing[event_key] = _NameTurn()
        turn.writers += 1
        try:
            async with turn.lock, self._in_flight:
                outcome = await self._send(body, name, namespace, reason, now, refresh=identity != message)
        finally:
            turn.writers -= 1
            if not turn.writers:
                del self._writing[event_key]
            EVENTS_WRITTEN.labels(self.component, type_, outcome).inc()

    async def _send(
        self, body: dict[str, Any], name: str, namespace: str, reason: str, now: str, *, refresh: bool
    ) -> _Outcome:
        """Create the Event, or raise the count of the one already named so; never raises but a cancellation.

        ``refresh``: a raised count also sets the Event's message to this one's (a combined Event shows the latest).
        """
        try:
            change: dict[str, Any] = {"lastTimestamp": now}
            if refresh:
                change["message"] = body["message"]
            known = self._written.pop((namespace, name))
            if known is not None:
                try:
                    return await self._raise_count(name, namespace, change, *known)
                except NotFound:
                    known = None  # expired: created again below
                except Conflict:
                    pass  # changed since (another writer raised it): read below
            if known is None:
                try:
                    self._remember(await self._client.create(EVENTS, body, namespace))
                    return "created"
                except AlreadyExists:
                    pass
            reads_left = _READ_ATTEMPTS
            while True:
                existing = await self._client.get(EVENTS, name, namespace)
                count, version = int(existing.get("count") or 1), str(meta(existing).get("resourceVersion") or "")
                try:
                    return await self._raise_count(name, namespace, change, count, version)
                except Conflict:
                    reads_left -= 1
                    if not reads_left:
                        raise
        except ApiError as exc:
            log.warning("cannot write event", reason=reason, error=str(exc))
        except Exception:
            log.exception("cannot write event", reason=reason)
        return "failed"

    async def _raise_count(
        self, name: str, namespace: str, change: dict[str, Any], count: int, version: str
    ) -> _Outcome:
        """Patch the Event's count to ``count + 1`` (and ``change``), only if it is still at ``version``."""
        guarded = {**change, "count": count + 1}
        if version:
            guarded["metadata"] = {"resourceVersion": version}
        self._remember(await self._client.patch(EVENTS, name, guarded, namespace))
        return "counted"

    def _remember(self, event: Mapping[str, Any]) -> None:
        """Keep the count and resourceVersion the API server answered a write of ``event`` with."""
        md = meta(event)
        version = str(md.get("resourceVersion") or "")
        if version:
            key = (str(md.get("namespace", "")), str(md.get("name", "")))
            self._written.put(key, (int(event.get("count") or 1), version))
