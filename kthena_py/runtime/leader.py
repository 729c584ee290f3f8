"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Guarantees:

* At most one identity holds the lease at a time: every acquire and renew is an update guarded by
  the lease's resourceVersion, so two candidates can never both succeed from the same state.
* A lease held by another identity is taken over only after this candidate has *observed* the same
  lease record unchanged for ``lease_duration`` seconds on its own monotonic clock (no trust in
  other machines' wall clocks).
* The leader calls ``on_stopped_leading`` as soon as it has failed to renew for ``renew_deadline``
  seconds (or sees another holder), which is strictly before any other candidate can take over
  (``renew_deadline < lease_duration``); callers stop all writes in that callback.
* On a graceful stop the leader releases the lease (empty holder), so a successor starts at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeClient, NotFound
from kthena_py.kube.resources import LEASES

from . import metrics
from .clock import Clock, RealClock

log = structlog.get_logger("kthena_py.leader")


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Competes for one Lease and reports gaining and losing it."""

    def __init__(
        self,
        client: KubeClient,
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

        ``on_started_leading`` is awaited once leadership is gained (it should start work and
        return); ``on_stopped_leading`` is awaited as soon as it is lost. Cancelling ``run`` while
        leading releases the lease.
        """
        while not await self._try_acquire_or_renew():
            await self._clock.sleep(self.retry_period)
        self._set_leader(True)
        log.info("became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        try:
            await on_started_leading()
            last_renew = self._clock.now()
            while True:
                await self._clock.sleep(self.retry_period)
                if await self._try_acquire_or_renew():
                    last_renew = self._clock.now()
                    continue
                if self._held_by_other() or self._clock.now() - last_renew >= self.renew_deadline:
                    break
        except asyncio.CancelledError:
            await self._release()
            self._set_leader(False)
            raise
        self._set_leader(False)
        log.error("lost leadership", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        await on_stopped_leading()

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
        """Give the lease up so that a successor need not wait for it to expire."""
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
