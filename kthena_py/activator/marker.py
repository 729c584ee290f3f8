"""Keeps the activator's state annotation on the ModelServings it serves, for ``kubectl get ms`` to print.

Guarantees:

* Driven by the informers only: a ModelServing is looked at after a change of it, and every ModelServing of a
  namespace after a change of an AutoscalingPolicy there (a policy can opt it in) or of a ModelPool there (a pool
  member is never marked: the pool controller, not the activator, brings it back). Nothing is written before every
  informer has synced, so a restart never acts on a half-read cluster.
* What to write is :mod:`kthena_py.plan.activator.state`'s decision on the cached object. A write is made only
  when the cached annotation differs from it: on a converged cluster a restart makes no write, and a second
  activator that sees the first one's write makes none. The write is a server-side apply of that one annotation as
  :data:`~kthena_py.vocab.labels.ACTIVATOR_FIELD_MANAGER`, with the cached ``resourceVersion`` as precondition.
* A conflict (a stale cache: another activator or a controller wrote first) is not retried from here: the
  informer delivers the newer object and it is looked at again. A write that changes nothing (another field
  manager owns the annotation) brings no event, so it is not repeated until the object changes. Other failures
  are retried with per-object exponential backoff (:data:`BACKOFF_BASE` to :data:`BACKOFF_MAX` seconds), counted
  in ``kthena_activator_state_writes_total`` and logged; nothing here ever fails a request or stops the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from kthena_py.kube import KubeApi
from kthena_py.kube.errors import ApiError, Conflict, NotFound
from kthena_py.kube.objects import KubeObject, name_of, namespace_of
from kthena_py.plan.activator.pools import pool_members
from kthena_py.plan.activator.state import apply_body, desired_state, needs_write
from kthena_py.runtime.ratelimit import ItemExponentialFailureRateLimiter
from kthena_py.runtime.workqueue import RateLimitingQueue, ShutDown
from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER

from . import metrics
from .catalog import Catalog
from .resources import AUTOSCALINGPOLICIES, MODELPOOLS, MODELSERVINGS

__all__ = ["BACKOFF_BASE", "BACKOFF_MAX", "StateMarker"]

BACKOFF_BASE = 0.1
BACKOFF_MAX = 30.0
log = structlog.get_logger("kthena_py.activator.marker")

Key = tuple[str, str]


class _ModelServingEvents:
    def __init__(self, marker: StateMarker) -> None:
        self._marker = marker

    def on_add(self, obj: KubeObject) -> None:
        self._marker.look_at(namespace_of(obj) or "", name_of(obj))

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        self.on_add(new)

    def on_delete(self, obj: KubeObject) -> None:
        self._marker.forget(namespace_of(obj) or "", name_of(obj))


class _PolicyEvents:
    def __init__(self, marker: StateMarker) -> None:
        self._marker = marker

    def on_add(self, obj: KubeObject) -> None:
        self._marker.look_at_namespace(namespace_of(obj) or "")

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        self.on_add(new)

    def on_delete(self, obj: KubeObject) -> None:
        self.on_add(obj)


class StateMarker:
    """Writes the state annotation of the catalog's ModelServings (see the module docstring).

    Build it before the catalog starts (its handlers then see every object the informers list), :meth:`start` it
    after.
    """

    def __init__(self, client: KubeApi, catalog: Catalog) -> None:
        self._client = client
        self._catalog = catalog
        self._queue: RateLimitingQueue[Key] = RateLimitingQueue(
            ItemExponentialFailureRateLimiter(BACKOFF_BASE, BACKOFF_MAX), name="activator-state"
        )
        self._worker: asyncio.Task[None] | None = None
        for cache in catalog.caches:
            cache.informer(MODELSERVINGS).add_handler(_ModelServingEvents(self))
            cache.informer(AUTOSCALINGPOLICIES, optional=True).add_handler(_PolicyEvents(self))
            cache.informer(MODELPOOLS, optional=True).add_handler(_PolicyEvents(self))

    def look_at(self, namespace: str, name: str) -> None:
        """Queue ``namespace/name`` to be looked at."""
        self._queue.add((namespace, name))

    def look_at_namespace(self, namespace: str) -> None:
        """Queue every cached ModelServing of ``namespace``."""
        for ms in self._catalog.modelservings():
            if (namespace_of(ms) or "") == namespace:
                self.look_at(namespace, name_of(ms))

    def forget(self, namespace: str, name: str) -> None:
        """Drop the backoff of a deleted ModelServing."""
        self._queue.forget((namespace, name))

    def start(self) -> None:
        """Start the worker (it waits for the informers to sync before its first write)."""
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="activator-state")

    async def stop(self) -> None:
        """Stop the worker; a write under way is cancelled."""
        self._queue.shutdown()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    async def _run(self) -> None:
        while not await self._catalog.wait_for_sync(60.0):
            log.warning("informers have not synced; state annotations wait")
        while True:
            try:
                key = await self._queue.get()
            except ShutDown:
                return
            try:
                await self._reconcile(key)
            except Exception:  # never let one object stop the worker
                log.exception("state annotation failed", modelserving=f"{key[0]}/{key[1]}")
                self._queue.add_rate_limited(key)
            finally:
                self._queue.done(key)

    async def _reconcile(self, key: Key) -> None:
        namespace, name = key
        ms = self._catalog.modelserving_at(namespace, name)
        if ms is None:
            self._queue.forget(key)
            return
        policies = self._catalog.policies()
        pooled = f"{namespace}/{name}" in pool_members(self._catalog.pools())[0]
        if not needs_write(ms, policies, pooled):
            self._queue.forget(key)
            return
        desired = desired_state(ms, policies, pooled)
        try:
            written = await self._client.apply(
                MODELSERVINGS, apply_body(ms, desired), field_manager=ACTIVATOR_FIELD_MANAGER, namespace=namespace
            )
        except (Conflict, NotFound):
            metrics.STATE_WRITES.labels(namespace, name, "conflict").inc()
            self._queue.forget(key)
            return
        except ApiError as exc:
            metrics.STATE_WRITES.labels(namespace, name, "error").inc()
            log.warning("state annotation write failed", modelserving=f"{namespace}/{name}", error=str(exc))
            self._queue.add_rate_limited(key)
            return
        metrics.STATE_WRITES.labels(namespace, name, "written").inc()
        self._queue.forget(key)
        if needs_write(written, policies, pooled):
            log.warning("state annotation is held by another field manager", modelserving=f"{namespace}/{name}")
        else:
            log.info("state annotation written", modelserving=f"{namespace}/{name}", state=desired)
