"""Kubernetes Events for the objects controllers act on.

Guarantees:

* Recording never blocks or fails a reconcile: events are written by background tasks, and a
  failure to write one is logged, not raised.
* Repeated events (same object, type, reason and message) are aggregated into one Event object
  whose ``count`` and ``lastTimestamp`` grow, as ``kubectl describe`` expects. The Event's name is
  derived from those fields, so aggregation needs no memory of past events and survives restarts.
* At most ``max_pending`` writes are in flight; beyond that, events are dropped with a log line
  rather than piling up.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import structlog

from kthena_py.kube import AlreadyExists, ApiError, KubeClient
from kthena_py.kube.objects import meta
from kthena_py.kube.resources import EVENTS

EventType = Literal["Normal", "Warning"]

log = structlog.get_logger("kthena_py.events")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Writes core/v1 Events as ``component`` (the ``source`` / ``reportingComponent``)."""

    def __init__(self, client: KubeClient, component: str, *, instance: str = "", max_pending: int = 500) -> None:
        self._client = client
        self.component = component
        self.instance = instance
        self._max_pending = max_pending
        self._pending: set[asyncio.Task[None]] = set()

    def event(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        """Record an event about ``obj`` (any object with apiVersion, kind and metadata)."""
        if len(self._pending) >= self._max_pending:
            log.warning("dropping event, too many pending", reason=reason, message=message)
            return
        task = asyncio.create_task(self._write(dict(obj), type_, reason, message[:1024]))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Wait until every event recorded so far has been written (or has failed)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _write(self, obj: dict[str, Any], type_: EventType, reason: str, message: str) -> None:
        md = meta(obj)
        namespace = str(md.get("namespace") or "default")
        digest = hashlib.sha256(
            "\x00".join([str(md.get("uid", "")), type_, reason, message, self.component]).encode()
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
        try:
            try:
                await self._client.create(EVENTS, body, namespace)
            except AlreadyExists:
                existing = await self._client.get(EVENTS, name, namespace)
                count = int(existing.get("count") or 1) + 1
                await self._client.patch(EVENTS, name, {"count": count, "lastTimestamp": now}, namespace)
        except ApiError as exc:
            log.warning("cannot write event", reason=reason, error=str(exc))
        except Exception:
            log.exception("cannot write event", reason=reason)
