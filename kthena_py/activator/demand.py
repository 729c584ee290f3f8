"""Records demand for ModelPool members on their pool, for the pool controller to swap them in.

Guarantees:

* The record is a JSON merge patch of the one annotation ``demand.modelpool.kthena-py.io/<member>`` on the pool
  (:func:`~kthena_py.plan.activator.demand.demand_patch`), field manager
  :data:`~kthena_py.vocab.labels.ACTIVATOR_FIELD_MANAGER`; the activator never writes a member's replicas.
* When to write is :mod:`kthena_py.plan.activator.demand`'s decision: a held request records at once unless the
  latest record is at most 1 s old, a background refresh rewrites it every ``DEMAND_REFRESH_SECONDS`` while any
  request for the member is held (it stops with the last one), and a request served by a resident member records
  at most every ``RESIDENT_RECENCY_SECONDS``. The latest record is the later of the cached pool's annotation (any
  activator's write) and this process's own last write.
* A member the pool controller swapped out (its ``released.modelpool.kthena-py.io/<member>`` annotation) does not
  count records made at or before that time: a held request whose latest record is not after the release writes
  at once, and the time written is after the release. The proxy re-checks this for its held requests on every
  cached change (:meth:`DemandWriter.hold_continues`), so a release while requests wait is answered at once,
  not at the next refresh.
* At most one write per member is under way in this process; a request never waits for a write (writes run in
  their own task) and a failed write never fails a request: it is counted
  (``kthena_activator_demand_writes_total{result}``), logged, and forgotten, so the next request or refresh tries
  again.
* The per-request cost for a resident member is one dict lookup and a comparison while its last record is recent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import structlog

from kthena_py.kube import KubeApi
from kthena_py.kube.errors import ApiError, NotFound
from kthena_py.plan.activator.demand import (
    HELD,
    REFRESH,
    RESIDENT,
    DemandKind,
    demand_due_in,
    demand_patch,
    latest_record,
    record_time,
)
from kthena_py.plan.activator.targets import Target
from kthena_py.plan.modelpool.demand import DEMAND_REFRESH_SECONDS, demand_of, parse_demand_time, released_annotation
from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER

from . import metrics
from .catalog import Catalog
from .resources import MODELPOOLS

__all__ = ["DemandWriter"]

log = structlog.get_logger("kthena_py.activator.demand")

Key = tuple[str, str, str]
"""(namespace, pool, member)."""


class DemandWriter:
    """Rate-limited demand records for pool members (see the module docstring)."""

    def __init__(
        self,
        client: KubeApi,
        catalog: Catalog,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Write through ``client`` and read cached records from ``catalog``; ``clock``/``sleep`` are for tests."""
        self._client = client
        self._catalog = catalog
        self._clock = clock
        self._sleep = sleep
        self._known: dict[Key, float] = {}
        """The latest record known per member (own writes, and cached records read when one looked due)."""
        self._writing: dict[Key, asyncio.Task[None]] = {}
        self._held: Counter[Key] = Counter()
        self._refreshers: dict[Key, asyncio.Task[None]] = {}

    @staticmethod
    def _key(target: Target) -> Key | None:
        pool = target.pool
        return None if pool is None else (pool.namespace, pool.name, target.name)

    def served(self, target: Target) -> None:
        """A request for ``target`` (a pool member) goes to a Ready backend: record recency if due."""
        key = self._key(target)
        if key is not None:
            self._maybe_write(key, RESIDENT)

    def hold_started(self, target: Target) -> None:
        """A request for ``target`` starts to wait: record demand if due, and refresh it while requests wait."""
        key = self._key(target)
        if key is None:
            return
        self._held[key] += 1
        self._maybe_write(key, HELD)
        if key not in self._refreshers:
            self._refreshers[key] = asyncio.create_task(self._refresh(key), name=f"activator-demand:{'/'.join(key)}")

    def hold_continues(self, target: Target) -> None:
        """Requests for ``target`` are still held after a change: record demand if due (e.g. it was released)."""
        key = self._key(target)
        if key is not None and key in self._held:
            self._maybe_write(key, REFRESH)

    def hold_ended(self, target: Target) -> None:
        """A request for ``target`` stopped waiting (served, timed out or gone)."""
        key = self._key(target)
        if key is None:
            return
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]
            task = self._refreshers.pop(key, None)
            if task is not None:
                task.cancel()

    async def stop(self) -> None:
        """Cancel refreshes and writes under way."""
        tasks = [*self._refreshers.values(), *self._writing.values()]
        self._refreshers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _latest(self, key: Key) -> float | None:
        pool = self._catalog.pool_at(key[0], key[1])
        cached = demand_of(pool).get(key[2]) if pool is not None else None
        latest = latest_record(cached, self._known.get(key))
        if latest is not None:
            self._known[key] = latest
        return latest

    def _released(self, key: Key) -> float | None:
        pool = self._catalog.pool_at(key[0], key[1])
        annotations = pool.get("metadata", {}).get("annotations") if pool is not None else None
        return parse_demand_time(annotations.get(released_annotation(key[2]))) if annotations else None

    def _maybe_write(self, key: Key, kind: DemandKind) -> None:
        if key in self._writing:
            return
        now = self._clock()
        released = None if kind == RESIDENT else self._released(key)
        known = self._known.get(key)
        if known is not None and demand_due_in(known, now, kind, released) > 0:
            return  # the fast path: a recent record this process knows of
        if demand_due_in(self._latest(key), now, kind, released) > 0:
            return
        when = record_time(now, released)
        task = asyncio.create_task(self._write(key, when, kind), name=f"activator-demand-write:{'/'.join(key)}")
        self._writing[key] = task
        task.add_done_callback(lambda _: self._writing.pop(key, None))

    async def _refresh(self, key: Key) -> None:
        while True:
            delay = demand_due_in(self._latest(key), self._clock(), REFRESH, self._released(key))
            if delay <= 0:
                self._maybe_write(key, REFRESH)
                delay = DEMAND_REFRESH_SECONDS
            await self._sleep(delay)

    async def _write(self, key: Key, now: float, kind: DemandKind) -> None:
        namespace, pool, member = key
        previous = self._known.get(key)
        self._known[key] = now  # before the write: requests meanwhile see it recorded
        try:
            await self._client.patch(
                MODELPOOLS, pool, demand_patch(member, now), namespace, field_manager=ACTIVATOR_FIELD_MANAGER
            )
        except NotFound:
            metrics.DEMAND_WRITES.labels(namespace, member, pool, "gone").inc()
            log.info("pool gone; demand not recorded", pool=f"{namespace}/{pool}", member=member)
            self._restore(key, now, previous)
            return
        except (ApiError, OSError, TimeoutError) as exc:
            metrics.DEMAND_WRITES.labels(namespace, member, pool, "error").inc()
            log.warning("demand write failed", pool=f"{namespace}/{pool}", member=member, kind=kind, error=str(exc))
            self._restore(key, now, previous)
            return
        metrics.DEMAND_WRITES.labels(namespace, member, pool, "written").inc()
        if kind != RESIDENT:
            log.info("demand recorded", pool=f"{namespace}/{pool}", member=member, kind=kind)

    def _restore(self, key: Key, now: float, previous: float | None) -> None:
        if self._known.get(key) != now:
            return
        if previous is None:
            self._known.pop(key, None)
        else:
            self._known[key] = previous
