"""Scale a ModelServing 0 -> 1, once per wake-up, safely next to other activators.

Guarantees:

* At most one write is under way per ModelServing in this process: requests that find it at zero while a wake-up
  runs join that wake-up (:meth:`Waker.wake` is single-flight).
* The write is a merge patch of the ``scale`` subresource setting ``spec.replicas: 1`` with the ModelServing's
  ``resourceVersion`` as a precondition and :data:`~kthena_py.vocab.labels.ACTIVATOR_FIELD_MANAGER` as field
  manager. It is sent only when the replicas read are 0 (:func:`~kthena_py.plan.activator.scaling.needs_wake`).
* A 409 (someone wrote first: another activator, the autoscaler, a user) is followed by a fresh read from the API
  server, and a write only if that read still says 0; so several activator replicas make one write per wake-up.
  At most :data:`MAX_ATTEMPTS` writes per wake-up.
* Every outcome is counted in ``kthena_activator_scale_writes_total`` and logged; a failure never fails a request
  by itself (the request keeps waiting within its budget).
* A wake-up that ends with the target still at zero (an API error, or :data:`MAX_ATTEMPTS` conflicts in a row with
  writers that kept changing the object but not its replicas) is looked at again: after :data:`RETRY_BASE` seconds,
  doubling per failure up to :data:`RETRY_MAX`, the catalog wakes the target's held requests, which start the next
  wake-up if it is still at zero. Nothing is written when no request is held; a written wake-up resets the delay.
  Without this, held requests waited for an unrelated change of the ModelServing, or their budget ran out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from kthena_py.kube import KubeApi
from kthena_py.kube.errors import ApiError, Conflict
from kthena_py.plan.activator.scaling import WAKE_REPLICAS, needs_wake
from kthena_py.plan.activator.targets import Target
from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER

from . import metrics
from .catalog import Catalog
from .resources import MODELSERVINGS

__all__ = ["MAX_ATTEMPTS", "RETRY_BASE", "RETRY_MAX", "Waker"]

MAX_ATTEMPTS = 3
RETRY_BASE = 0.25
RETRY_MAX = 8.0
STILL_AT_ZERO = frozenset({"error", "exhausted"})
"""Outcomes after which the target may still be at zero: looked at again after a backoff."""
log = structlog.get_logger("kthena_py.activator.waker")


def _replicas(ms: Mapping[str, Any]) -> int:
    value = (ms.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) else 1


def _resource_version(ms: Mapping[str, Any]) -> str:
    return str((ms.get("metadata") or {}).get("resourceVersion") or "")


class Waker:
    """Single-flight 0 -> 1 scale writes (see the module docstring)."""

    def __init__(self, client: KubeApi, catalog: Catalog) -> None:
        self._client = client
        self._catalog = catalog
        self._running: dict[str, asyncio.Task[str]] = {}
        self._failures: dict[str, int] = {}
        self._retries: dict[str, asyncio.TimerHandle] = {}

    def wake(self, target: Target) -> asyncio.Task[str] | None:
        """Start (or join) the wake-up of ``target`` if the cache shows it at zero; the task's result is the outcome."""
        task = self._running.get(target.key)
        if task is not None:
            return task
        ms = self._catalog.modelserving(target)
        if ms is None or not needs_wake(_replicas(ms), target.scale_from_zero):
            return None
        task = asyncio.create_task(self._wake(target, ms), name=f"activator-wake:{target.key}")
        self._running[target.key] = task
        task.add_done_callback(lambda done: self._ended(target.key, done))
        return task

    def stop(self) -> None:
        """Cancel the pending looks-again (wake-ups under way end with their requests)."""
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()

    def _ended(self, key: str, task: asyncio.Task[str]) -> None:
        self._running.pop(key, None)
        outcome = "cancelled" if task.cancelled() else ("error" if task.exception() else task.result())
        if outcome not in STILL_AT_ZERO:
            self._failures.pop(key, None)
            return
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay = min(RETRY_MAX, RETRY_BASE * 2 ** (failures - 1))
        previous = self._retries.pop(key, None)
        if previous is not None:
            previous.cancel()
        self._retries[key] = asyncio.get_running_loop().call_later(delay, self._look_again, key)
        log.warning("wake-up did not leave zero; looking again", target=key, outcome=outcome, retry_in=delay)

    def _look_again(self, key: str) -> None:
        self._retries.pop(key, None)
        self._catalog.wake(key)

    async def _wake(self, target: Target, ms: Mapping[str, Any]) -> str:
        labels = (target.namespace, target.name)
        for _ in range(MAX_ATTEMPTS):
            body = {"metadata": {"resourceVersion": _resource_version(ms)}, "spec": {"replicas": WAKE_REPLICAS}}
            try:
                await self._client.patch(
                    MODELSERVINGS,
                    target.name,
                    body,
                    target.namespace,
                    subresource="scale",
                    field_manager=ACTIVATOR_FIELD_MANAGER,
                )
            except Conflict:
                metrics.SCALE_WRITES.labels(*labels, "conflict").inc()
                try:
                    ms = await self._client.get(MODELSERVINGS, target.name, target.namespace)
                except ApiError as exc:
                    log.warning("wake-up re-read failed", target=target.key, error=str(exc))
                    return "error"
                if not needs_wake(_replicas(ms), target.scale_from_zero):
                    log.info("someone else woke it", target=target.key, replicas=_replicas(ms))
                    return "conflict"
                continue
            except ApiError as exc:
                metrics.SCALE_WRITES.labels(*labels, "error").inc()
                log.warning("scale write failed", target=target.key, error=str(exc))
                return "error"
            metrics.SCALE_WRITES.labels(*labels, "written").inc()
            log.info("scaled from zero", target=target.key, replicas=WAKE_REPLICAS)
            return "written"
        return "exhausted"
