"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Guarantees:

* At most one identity holds the lease at a time: every acquire and renew is an update guarded by
  the lease's resourceVersion, so two candidates can never both succeed from the same state.
* A lease held by another identity is taken over only after this candidate has *observed* the same
  lease record unchanged for ``lease_duration`` seconds on its own monotonic clock (no trust in
  other machines' wall clocks).
* **Leadership bound.** Leading ends no later than ``renew_deadline`` seconds after the *start* of the
  last successful acquire or renew, whatever the network does: every attempt is cut off when that
  deadline passes (a request that hangs on a stalled connection cannot hold it up), and the wait
  between attempts never sleeps past it. The leader work (``on_started_leading``, run as its own
  task so that renewing goes on while it starts up) is cancelled, and ``on_stopped_leading`` awaited,
  at that moment, or as soon as another holder is seen. A successor can only take over
  ``lease_duration`` after it observed that last renew, and the renew cannot have been observed before
  it was sent, so with ``renew_deadline < lease_duration`` the old leader has stopped before the new
  one starts (the margin absorbs clock-rate differences and scheduling delays).
* On a graceful stop the leader releases the lease (empty holder), so a successor starts at once;
  the release is bounded by ``retry_period`` and skipped if it cannot be sent in time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeApi, NotFound
from kthena_py.kube.resources import LEASES
from kthena_py.vocab.times import format_time

from . import metrics
from .clock import Clock, RealClock

log = structlog.get_logger("kthena_py.leader")


def _micro_time() -> str:
    return format_time(time.time(), "microseconds")


class LeaderElector:
    """Competes for one Lease and reports gaining and losing it."""

    def __init__(
        self,
        client: KubeApi,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self._client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock or RealClock()
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._resource_version = ""
        self.is_leader = False
        metrics.LEADER_ELECTION_MASTER_STATUS.labels(name).set(0)

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
    ) -> None:
        """Acquire the lease, lead, and return once leadership is lost.

        ``on_started_leading`` is started as a task once leadership is gained (it should start work and
        return; it is cancelled if leadership ends first); ``on_stopped_leading`` is awaited as soon as
        leadership is lost. Cancelling ``run`` while leading releases the lease.
        """
        while True:
            attempt_started = self._clock.now()
            if await self._attempt(self.renew_deadline):
                break
            await self._clock.sleep(self.retry_period)
        last_renew = attempt_started
        self._set_leader(True)
        log.info("became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        starting = asyncio.create_task(self._start(on_started_leading), name="leader-start")
        try:
            while True:
                deadline = last_renew + self.renew_deadline
                await self._clock.sleep(min(self.retry_period, deadline - self._clock.now()))
                now = self._clock.now()
                if now >= deadline:
                    log.error("lease not renewed within the renew deadline", renew_deadline=self.renew_deadline)
                    break
                if await self._attempt(deadline - now):
                    last_renew = now
                    continue
                if self._held_by_other():
                    break
        except asyncio.CancelledError:
            await self._cancel(starting)
            self._set_leader(False)
            await self._release()
            raise
        await self._cancel(starting)
        self._set_leader(False)
        log.error("lost leadership", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        await on_stopped_leading()

    async def _start(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        try:
            await on_started_leading()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("starting the leader work failed")

    @staticmethod
    async def _cancel(task: asyncio.Task[None]) -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _attempt(self, budget: float) -> bool:
        """One acquire-or-renew, abandoned (and counted as failed) once ``budget`` seconds have passed."""
        if budget <= 0:
            return False
        attempt = asyncio.create_task(self._try_acquire_or_renew(), name="leader-renew")
        timer = asyncio.create_task(self._clock.sleep(budget), name="leader-renew-deadline")
        try:
            await asyncio.wait((attempt, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not attempt.done():
                attempt.cancel()
        if attempt.cancelled() or not attempt.done():
            log.warning("lease request abandoned at the renew deadline", budget=round(budget, 3))
            return False
        if attempt.exception() is not None:
            log.error("lease request failed unexpectedly", error=repr(attempt.exception()))
            return False
        return attempt.result()

    def _set_leader(self, leading: bool) -> None:
        self.is_leader = leading
        metrics.LEADER_ELECTION_MASTER_STATUS.labels(self.name).set(1 if leading else 0)

    def _held_by_other(self) -> bool:
        holder = (self._observed or {}).get("holderIdentity") or ""
        return bool(holder) and holder != self.identity

    async def _try_acquire_or_renew(self) -> bool:
        now_wall = _micro_time()
        try:
            lease = await self._client.get(LEASES, self.name, self.namespace)
        except NotFound:
            spec = self._spec(now_wall, now_wall, 0)
            try:
                created = await self._client.create(
                    LEASES, {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
                )
            except (AlreadyExists, Conflict):
                return False
            except ApiError as exc:
                log.warning("cannot create lease", error=str(exc))
                return False
            self._observe(created)
            return True
        except ApiError as exc:
            log.warning("cannot read lease", error=str(exc))
            return False

        spec = dict(lease.get("spec") or {})
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self._clock.now()
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and self._clock.now() < self._observed_at + duration:
            return False
        if holder == self.identity:
            new_spec = self._spec(spec.get("acquireTime") or now_wall, now_wall, int(spec.get("leaseTransitions") or 0))
        else:
            new_spec = self._spec(now_wall, now_wall, int(spec.get("leaseTransitions") or 0) + 1)
        body = {"metadata": {**(lease.get("metadata") or {})}, "spec": new_spec}
        body["metadata"].pop("managedFields", None)
        try:
            updated = await self._client.replace(LEASES, body, self.namespace)
        except (Conflict, NotFound):
            return False
        except ApiError as exc:
            log.warning("cannot update lease", error=str(exc))
            return False
        self._observe(updated)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        self._observed = dict(lease.get("spec") or {})
        self._observed_at = self._clock.now()
        self._resource_version = str((lease.get("metadata") or {}).get("resourceVersion") or "")

    def _spec(self, acquire: str, renew: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseTransitions": transitions,
        }

    async def _release(self) -> None:
        """Give the lease up so that a successor need not wait for it to expire (bounded by ``retry_period``)."""
        task = asyncio.create_task(self._release_once(), name="leader-release")
        timer = asyncio.create_task(self._clock.sleep(self.retry_period))
        await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
        timer.cancel()
        if not task.done():
            task.cancel()
            log.warning("lease not released in time; it expires by itself", lease=f"{self.namespace}/{self.name}")
        await asyncio.gather(task, timer, return_exceptions=True)

    async def _release_once(self) -> None:
        try:
            lease = await self._client.get(LEASES, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            md = dict(lease.get("metadata") or {})
            md.pop("managedFields", None)
            spec = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro_time()}
            await self._client.replace(LEASES, {"metadata": md, "spec": spec}, self.namespace)
            log.info("released lease", lease=f"{self.namespace}/{self.name}")
        except ApiError as exc:
            log.warning("cannot release lease", error=str(exc))
