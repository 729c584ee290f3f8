"""The manager: one shared cache, the controllers, leader election, probes, metrics and shutdown.

Guarantees:

* The shared cache runs on every replica (so a standby is warm and ``/readyz`` reflects cache
  sync); controllers and other leader-only runnables run only while this replica leads.
* When leadership is lost, every leader-only task is cancelled at once (no drain, no further
  writes) and :meth:`Manager.run` returns exit code 1, like controller-runtime, so the process is
  restarted clean.
* On a stop request (SIGTERM/SIGINT) controllers drain in-flight reconciles (bounded by
  ``shutdown_timeout``), then the lease is released, then the cache and servers stop; ``run``
  returns 0.
* Runnables that must serve on every replica (admission webhooks) are started on all replicas.
* Closers (:meth:`Manager.add_closer`: client sessions and other resources the controllers share) run once when
  ``run`` ends, after the controllers and runnables have stopped (on a stop request or a lost lease, nothing uses
  what they close any more), in registration order; one that fails is logged and the others still run.
* Events: one recorder per source component (:meth:`Manager.recorder_for`), so each controller's Events carry
  its own ``source.component``; all of them are flushed on a clean stop and discarded when the lease is lost.
* **Sharded** (``sharding``, issue 31): instead of one leader, every replica is a member of a lease group
  (:class:`~.shards.ShardMember`) and runs every controller, each reconciling only the namespaces whose hash slots
  the replica owns (:meth:`~.controller.Controller.shard_by`; cluster-scoped objects go with the slot of ``""``).
  Slots taken over are resynced from the cache; slots given up are drained first (for at most ``retry_period``, so
  the renewals are not held up), or cancelled at once when the replica's renew deadline has passed. A stop drains
  every controller, then releases the slots and deletes the replica's Lease. Requests are always filtered on this
  side too; whether the API server filters lists and watches (``ShardedListAndWatch``) is asked at start, logged
  and exported (``kthena_shard_server_filtering``), see docs/sharding.md.
* **Per-range informers** (``shard_informers``, on by default with ``sharding``): slots are ranges of the API
  server's raw namespace hash cut where the cluster's namespaces are (the member's raw cuts; the Namespaces are
  cached whole for it). Where the API server filters, every namespaced informer but those kept whole lists and
  watches only the ranges of the owned slots: nothing before the first slots are taken; on a take the selection
  widens and the new slots' namespaces are reconciled only once every informer holds their objects (then resynced);
  on a release it narrows after the drain. A reselection runs in its own task, so the member's renewals never wait
  for a relist. Where the API server does not filter, the cache stays whole and the raw cuts only decide ownership.
* Every replica gives memory freed after a burst of work back to the operating system (:mod:`.memory`) and
  measures how late its event loop runs what is due (:mod:`.looplag`).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import Gauge, Histogram

from kthena_py.kube import KubeClient, WatchApi
from kthena_py.kube.objects import name_of
from kthena_py.kube.resources import NAMESPACES

from . import looplag, memory, metrics
from .cache import SharedCache
from .clock import Clock, RealClock
from .controller import Controller
from .eventcorrelator import DEFAULT_BURST, DEFAULT_MAX_SIMILAR, EventCorrelator
from .events import EventRecorder
from .httpserver import ProbeServer
from .leader import LeaderElector
from .shards import ShardMember
from .shards.selector import shard_selector

Runnable = Callable[[], Coroutine[Any, Any, None]]
Closer = Callable[[], Awaitable[None]]

log = structlog.get_logger("kthena_py.manager")


SERVER_FILTERING = Gauge(
    "kthena_shard_server_filtering",
    "1 when the API server filters list and watch by shardSelector (ShardedListAndWatch), 0 when it does not; "
    "with per-range informers (the default) the informers then list only the owned ranges, else the replica filters "
    "on its side.",
    registry=metrics.REGISTRY,
)
OWNED_OBJECTS = Gauge(
    "kthena_shard_owned_objects",
    "Cached objects of each kind in the namespaces this sharded replica owns (computed when scraped).",
    ("kind",),
    registry=metrics.REGISTRY,
)
RELEASE_SECONDS = Histogram(
    "kthena_shard_release_seconds",
    "How long giving up slots took: the drain of their in-flight reconciles, before the release is written.",
    registry=metrics.REGISTRY,
    buckets=(0.001, 0.01, 0.05, 0.1, 0.5, 1, 2, 5),
)
SELECTION_SECONDS = Histogram(
    "kthena_shard_selection_seconds",
    "Time from a new shard selection of the informers (slots taken or released) until every store listed it.",
    registry=metrics.REGISTRY,
)


def default_identity() -> str:
    """A unique identity for leader election: ``<hostname>_<pid>``."""
    return f"{socket.gethostname()}_{os.getpid()}"


@dataclass
class ManagerOptions:
    """How the manager runs; every field has an operator-facing command-line flag."""

    namespace: str | None = None
    leader_elect: bool = False
    leader_election_id: str = "kthena-py-controller-manager"
    leader_election_namespace: str = "kthena-system"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_bind_address: str = "127.0.0.1:8080"
    health_probe_bind_address: str = "127.0.0.1:8081"
    shutdown_timeout: float = 30.0
    component: str = "kthena-py-controller-manager"
    sharding: bool = False
    lease_group: str = "kthena-py-controller-manager"
    shard_informers: bool = True
    event_burst: int = DEFAULT_BURST
    """Events about one object and type written at once (0: no limit); the correlator's burst."""
    event_combine_after: int = DEFAULT_MAX_SIMILAR
    """Distinct messages per object, type and reason from which Events are combined (0: never)."""


class Manager:
    """Owns everything a controller-manager process runs."""

    def __init__(self, client: WatchApi, options: ManagerOptions | None = None, *, clock: Clock | None = None):
        self.client = client
        self.options = options or ManagerOptions()
        self.clock = clock or RealClock()
        self._per_range = self.options.sharding and self.options.shard_informers
        self.cache = SharedCache(client, namespace=self.options.namespace, clock=self.clock, sharded=self._per_range)
        if self._per_range:
            self.cache.informer(NAMESPACES)  # the member cuts the hash space where the namespaces are
        self._selecting = False
        """Informers list only the owned ranges (per-range informers on an API server that filters)."""
        self._listed: frozenset[int] = frozenset()
        """Owned slots whose objects every selected informer holds (only these are reconciled while selecting)."""
        self._selection_task: asyncio.Task[None] | None = None
        self._recorders: dict[str, EventRecorder] = {}
        self.recorder = self.recorder_for(self.options.component)
        self.probes = ProbeServer()
        self.probes.add_readiness_check("informers-synced", lambda: self.cache.synced)
        self.controllers: list[Controller] = []
        self._leader_runnables: list[Runnable] = []
        self._everywhere_runnables: list[Runnable] = []
        self._leader_tasks: list[asyncio.Task[None]] = []
        self._other_tasks: list[asyncio.Task[None]] = []
        self._closers: list[Closer] = []
        self.elector: LeaderElector | None = None
        self.shard_member: ShardMember | None = None
        self.leading = asyncio.Event()
        self.add_runnable(memory.trim_when_idle, needs_leader=False)
        self.add_runnable(looplag.watch_lag, needs_leader=False)

    @property
    def caches_own_namespaces_only(self) -> bool:
        """Whether the cache holds only this replica's namespaces (sharded, per-range, on a filtering API server).

        Known once :meth:`run` has asked the API server (before any controller starts). Readers across namespaces
        must then read live, keep their type whole, or refuse (docs/sharding.md).
        """
        return self._selecting

    def recorder_for(self, component: str) -> EventRecorder:
        """The event recorder whose Events carry ``component`` as their source (one per component)."""
        recorder = self._recorders.get(component)
        if recorder is None:
            correlator = EventCorrelator(max_similar=self.options.event_combine_after, burst=self.options.event_burst)
            recorder = EventRecorder(self.client, component, instance=self.options.identity, correlator=correlator)
            self._recorders[component] = recorder
        return recorder

    def responsible_for(self, namespace: str) -> bool:
        """Whether this replica acts on ``namespace`` now: it leads, and (``--sharding``) owns the namespace's slot.

        For work done outside a controller (e.g. an informer handler recording Events), so that one replica acts.
        """
        if not self.leading.is_set():
            return False
        return self._owns(namespace)

    def _owns(self, namespace: str) -> bool:
        """Whether this replica reconciles ``namespace`` now (not sharded, or its slot is owned and listed)."""
        member = self.shard_member
        if member is None:
            return True
        if not member.owns(namespace):
            return False
        return not self._selecting or member.slot_of(namespace) in self._listed

    def add_controller(self, controller: Controller) -> None:
        """Register a controller (runs only while leading)."""
        self.controllers.append(controller)

    def add_runnable(self, runnable: Runnable, *, needs_leader: bool) -> None:
        """Register a long-running coroutine function."""
        (self._leader_runnables if needs_leader else self._everywhere_runnables).append(runnable)

    def add_closer(self, close: Closer) -> None:
        """Register a coroutine function that releases a resource when :meth:`run` ends (see the module docstring)."""
        self._closers.append(close)

    async def _close(self) -> None:
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                await close()
            except Exception as exc:  # one resource that fails to close must not keep the others open
                log.warning("closing failed", closer=getattr(close, "__qualname__", repr(close)), error=str(exc))

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (returns 0) or leadership is lost (returns 1)."""
        lost = asyncio.Event()
        await self.probes.start(
            health_address=self.options.health_probe_bind_address,
            metrics_address=self.options.metrics_bind_address,
        )
        if self._per_range and isinstance(self.client, KubeClient):
            from .shards.detect import server_filters_shards

            self._selecting = await server_filters_shards(self.client)
            if self._selecting:
                self.cache.select_shards("")  # nothing until slots are taken
        await self.cache.start()
        self._other_tasks = [asyncio.create_task(r()) for r in self._everywhere_runnables]
        elector_task: asyncio.Task[None] | None = None
        try:
            if self.options.sharding:
                member_task = await self._start_sharded()
                elector_task = member_task
                member_task.add_done_callback(lambda _: lost.set())  # the membership never ends on its own
            elif self.options.leader_elect:
                self.elector = LeaderElector(
                    self.client,
                    name=self.options.leader_election_id,
                    namespace=self.options.leader_election_namespace,
                    identity=self.options.identity,
                    lease_duration=self.options.lease_duration,
                    renew_deadline=self.options.renew_deadline,
                    retry_period=self.options.retry_period,
                    clock=self.clock,
                )

                async def on_lost() -> None:
                    await self._stop_leader_work(drain=False)
                    # no write of any kind after the lease is gone
                    await asyncio.gather(*(r.discard() for r in self._recorders.values()))
                    lost.set()

                elector_task = asyncio.create_task(self.elector.run(self._start_leader_work, on_lost))
            else:
                await self._start_leader_work()

            waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(lost.wait())]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
            if lost.is_set():
                if self.shard_member is not None:
                    log.error("the shard membership ended; stopping without a drain")
                    await self._stop_leader_work(drain=False)
                    await asyncio.gather(*(r.discard() for r in self._recorders.values()))
                return 1
            log.info("shutting down")
            await self._stop_leader_work(drain=True)
            if elector_task is not None and self.shard_member is not None:
                elector_task.cancel()  # after the drain: release the slots, delete this replica's Lease
                await asyncio.gather(elector_task, return_exceptions=True)
            return 0
        finally:
            if elector_task is not None:
                elector_task.cancel()
                await asyncio.gather(elector_task, return_exceptions=True)
            if self._selection_task is not None:
                self._other_tasks.append(self._selection_task)
            for t in self._other_tasks:
                t.cancel()
            await asyncio.gather(*self._other_tasks, return_exceptions=True)
            await self._close()
            await asyncio.gather(*(r.flush() for r in self._recorders.values()))
            await self.cache.stop()
            await self.probes.stop()

    async def _start_sharded(self) -> asyncio.Task[None]:
        """Join the lease group; run every controller on the namespaces this replica owns (module docstring)."""
        o = self.options
        member = ShardMember(
            self.client,
            group=o.lease_group,
            namespace=o.leader_election_namespace,
            identity=o.identity,
            lease_duration=o.lease_duration,
            renew_deadline=o.renew_deadline,
            retry_period=o.retry_period,
            clock=self.clock,
            on_acquire=self._acquired,
            on_release=self._released,
            raw_cuts=self._per_range,
            namespaces=lambda: (name_of(ns) for ns in self.cache.list(NAMESPACES)),
        )
        self.shard_member = member
        for c in self.controllers:
            c.shard_by(self._owns)
        self._watch_owned_objects(member)
        server_side = self._selecting
        if isinstance(self.client, KubeClient) and not self._per_range:
            from .shards.detect import server_filters_shards

            server_side = await server_filters_shards(self.client)
        SERVER_FILTERING.set(1 if server_side else 0)
        log.info(
            "sharded: reconciling the namespaces of the slots this replica owns",
            group=o.lease_group,
            identity=o.identity,
            filtering="server-side" if self._selecting else "client-side",
            server_filters_shards=server_side,
            slots="raw cuts" if self._per_range else "mixed hash",
        )
        await self._start_leader_work()
        return asyncio.create_task(member.run(), name="shard-member")

    async def _acquired(self, slots: frozenset[int]) -> None:
        if self._selecting:
            self._reselect()  # the new slots are reconciled once listed (then resynced)
            return
        self._resync(slots)

    def _resync(self, slots: frozenset[int]) -> None:
        member = self.shard_member
        if member is None or not slots:
            return
        queued = sum(c.resync(lambda ns: member.slot_of(ns) in slots) for c in self.controllers)
        log.info("reconciling newly owned slots", slots=len(slots), requests=queued)

    async def _released(self, slots: frozenset[int]) -> None:
        member = self.shard_member
        drain = member is not None and member.holds_lease()
        timeout = self.options.retry_period if drain else 0.0
        with RELEASE_SECONDS.time():
            await asyncio.gather(*(c.release(drain_timeout=timeout) for c in self.controllers))
        if self._selecting:
            self._reselect()  # narrow after the drain: the objects that leave come as deletes nobody acts on

    def _reselect(self) -> None:
        """Select the owned slots' ranges now; mark them listed (and resync the new ones) once every store has them."""
        member = self.shard_member
        if member is None:
            return
        wanted = member.owned
        self._listed &= wanted
        self.cache.select_shards(shard_selector(member.ranges(wanted)))
        if self._selection_task is not None:
            self._selection_task.cancel()  # superseded: the newer selection is waited for instead
        self._selection_task = asyncio.create_task(self._wait_for_selection(wanted), name="shard-selection")

    async def _wait_for_selection(self, wanted: frozenset[int]) -> None:
        member = self.shard_member
        started = self.clock.now()
        while not await self.cache.wait_for_shard_selection(timeout=30.0):
            log.warning("the informers have not listed the owned ranges yet", slots=len(wanted))
        if member is None:
            return
        added = (wanted & member.owned) - self._listed
        self._listed = self._listed | added
        SELECTION_SECONDS.observe(self.clock.now() - started)
        log.info("informers list the owned ranges", slots=len(self._listed), added=len(added))
        self._resync(added)

    def _watch_owned_objects(self, member: ShardMember) -> None:
        """Export how many cached objects of each kind this replica owns, counted when scraped."""
        kinds: set[str] = set()
        for informer in self.cache.informers():
            kind = informer.rt.kind
            if kind in kinds:
                continue  # a second informer of a kind (another field selector) holds a subset
            kinds.add(kind)

            def count(store: Any = informer.store) -> float:
                owned = (member.owns((o.get("metadata") or {}).get("namespace") or "") for o in store.values())
                return float(sum(owned))

            OWNED_OBJECTS.labels(kind).set_function(count)

    async def _start_leader_work(self) -> None:
        self.leading.set()
        if not await self.cache.wait_for_sync(timeout=120):
            log.warning("informers not synced after 120s; starting controllers anyway")
        for c in self.controllers:
            await c.start()
        self._leader_tasks = [asyncio.create_task(r()) for r in self._leader_runnables]
        log.info("controllers started", controllers=[c.name for c in self.controllers])

    async def _stop_leader_work(self, *, drain: bool) -> None:
        self.leading.clear()
        for t in self._leader_tasks:
            t.cancel()
        await asyncio.gather(
            *(c.stop(drain=drain, timeout=self.options.shutdown_timeout) for c in self.controllers),
            *self._leader_tasks,
            return_exceptions=True,
        )
        self._leader_tasks = []
