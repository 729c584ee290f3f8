"""One replica's membership of a lease group: its own Lease, the group's slot map, the slots it owns.

Guarantees:

* **Level-based.** Each pass reads the group's Leases and the slot map and applies
  :func:`~kthena_py.runtime.shards.membership.plan_slots`; nothing is remembered between passes but when each other
  member's Lease was last seen to change (on this process's monotonic clock, as client-go's leader election does: no
  trust in other machines' wall clocks) and when this replica last renewed. A restarted replica starts a new lease
  term, so it owns nothing until it has taken slots again through a write.
* **No slot owned twice.** The slot map is one Lease (``<group>-slots``) whose annotation
  :data:`SLOT_MAP_ANNOTATION` is replaced only with its resourceVersion as a precondition. A replica owns a slot
  from the moment its own write giving it the slot succeeded, until it stops owning it: before it writes a release,
  when it stops, and when ``renew_deadline`` seconds have passed since its last renew began, whatever the network
  does. Another replica takes a slot over only once it is released or the owner's Lease has been seen unchanged for
  ``lease_duration`` seconds (plus the planner's skew margin); with ``renew_deadline < lease_duration`` the owner
  has stopped first.
* **Release before hand-over.** ``on_release`` is awaited with the slots given up (e.g. the manager drains their
  reconciles) before the map is written without them; ``on_acquire`` is called with the slots gained after the write.
* A graceful stop releases every slot and deletes the replica's Lease, so the others take over within one pass.
* **Raw cuts** (``raw_cuts=True``, for per-range informers): a slot is a range of the API server's raw namespace
  hash between cut points recorded on the slot map's Lease (:mod:`.cutstate`, annotation :data:`CUTS_ANNOTATION`).
  The member reconciles under the generation of cuts it last read and adopts a new one only while it owns no slot;
  a new generation is written only by the handover rule's recut step (:func:`~.membership.plan_slots` with a recut
  pending), in the same write as the empty slot map, once no live member owns a slot. A group without a record
  starts with its first cuts pending, so they too take effect through that step. A member proposes a recut (the
  cuts of the namespaces ``namespaces()`` lists) when their shares have drifted (:func:`~.cutstate.propose_recut`).
* Metrics: ``kthena_shard_owned_slots``, ``kthena_shard_members`` and ``kthena_shard_cut_generation`` (gauges),
  ``kthena_shard_handovers_total`` (by direction), ``kthena_shard_recuts_total`` (proposed, applied).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import structlog
from prometheus_client import Counter, Gauge

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeApi, NotFound
from kthena_py.kube.resources import LEASES
from kthena_py.vocab.labels import SHARD_CUTS, SHARD_GROUP, SHARD_ROLE, SHARD_SLOTS
from kthena_py.vocab.times import format_time

from ..clock import Clock, RealClock
from ..metrics import REGISTRY
from .cuts import ranges_of_slots, slot_at
from .cutstate import CutState, applied, decode_cuts, encode_cuts, initial_state, propose_recut
from .hashing import SLOT_COUNT, namespace_hash, namespace_slot
from .membership import MemberLease, SlotPlan, member_id, plan_slots

GROUP_LABEL: Final = SHARD_GROUP
ROLE_LABEL: Final = SHARD_ROLE
SLOT_MAP_ANNOTATION: Final = SHARD_SLOTS
CUTS_ANNOTATION: Final = SHARD_CUTS

OWNED_SLOTS: Final = Gauge(
    "kthena_shard_owned_slots", "Slots of the hash space this replica owns.", ("group",), registry=REGISTRY
)
MEMBERS: Final = Gauge(
    "kthena_shard_members", "Live members of the lease group, as this replica sees them.", ("group",), registry=REGISTRY
)
HANDOVERS: Final = Counter(
    "kthena_shard_handovers_total",
    "Slots this replica acquired or released.",
    ("group", "direction"),
    registry=REGISTRY,
)

CUT_GENERATION: Final = Gauge(
    "kthena_shard_cut_generation",
    "Generation of the raw-hash cut points this replica reconciles under (per-range informers only).",
    ("group",),
    registry=REGISTRY,
)
RECUTS: Final = Counter(
    "kthena_shard_recuts_total",
    "Recuts this replica proposed (the namespaces' shares drifted) or applied (the recut step's write).",
    ("group", "step"),
    registry=REGISTRY,
)

log = structlog.get_logger("kthena_py.shards")

SlotsHook = Callable[[frozenset[int]], Awaitable[None]]


async def _nothing(_: frozenset[int]) -> None:
    return None


def lease_name(group: str, identity: str) -> str:
    """A member's Lease name: the group and a short digest of the identity (any identity fits a name)."""
    return f"{group}-m-{hashlib.sha256(identity.encode()).hexdigest()[:10]}"


class ShardMember:
    """Keeps one replica's Lease renewed and its share of the group's slots (see the module docstring)."""

    def __init__(
        self,
        client: KubeApi,
        *,
        group: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        slot_count: int = SLOT_COUNT,
        clock: Clock | None = None,
        on_acquire: SlotsHook = _nothing,
        on_release: SlotsHook = _nothing,
        raw_cuts: bool = False,
        namespaces: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self._client = client
        self.group = group
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.slot_count = slot_count
        self._clock = clock or RealClock()
        self._on_acquire = on_acquire
        self._on_release = on_release
        self._term = ""
        self._renewed_at: float | None = None
        self._seen: dict[str, tuple[Any, float]] = {}
        self._raw_cuts = raw_cuts
        self._namespaces = namespaces
        self._cut_state: CutState | None = None
        self.owned: frozenset[int] = frozenset()
        """The slots this replica may reconcile now."""

    @property
    def me(self) -> str:
        """This replica's member id in its current term."""
        return member_id(self.identity, self._term)

    def slot_of(self, namespace: str) -> int | None:
        """The slot of ``namespace`` (None with raw cuts before the first record was read)."""
        if not self._raw_cuts:
            return namespace_slot(namespace)
        state = self._cut_state
        return None if state is None else slot_at(namespace_hash(namespace), state.cuts)

    def owns(self, namespace: str) -> bool:
        """Whether objects of ``namespace`` are this replica's to reconcile now."""
        return self.slot_of(namespace) in self.owned and self._within_deadline()

    def ranges(self, slots: Iterable[int]) -> tuple[tuple[int, int], ...]:
        """The raw-hash ranges of ``slots`` under the cuts in force (for a ``shardSelector``; raw cuts only)."""
        state = self._cut_state
        if state is None:
            return ()
        return ranges_of_slots(slots, state.cuts)

    def holds_lease(self) -> bool:
        """Whether this replica's last renew is still within its renew deadline (its ownership is current)."""
        return self._within_deadline()

    def owns_any(self) -> bool:
        """Whether this replica owns any slot now."""
        return bool(self.owned) and self._within_deadline()

    def _within_deadline(self) -> bool:
        return self._renewed_at is not None and self._clock.now() < self._renewed_at + self.renew_deadline

    async def run(self) -> None:
        """Renew and rebalance every ``retry_period`` until cancelled; then release everything."""
        try:
            while True:
                await self._pass()
                await self._clock.sleep(self.retry_period)
        finally:
            await asyncio.shield(self._leave())

    async def _pass(self) -> None:
        if not self._within_deadline() and self.owned:
            await self._give_up(self.owned, "renew deadline passed")
        started = self._clock.now()
        try:
            async with asyncio.timeout(self.renew_deadline):  # a stalled connection cannot hold a pass up
                if not await self._renew(started):
                    return
                leases = (
                    await self._client.list(LEASES, self.namespace, label_selector=f"{GROUP_LABEL}={self.group}")
                ).items
                slots_lease = await self._slots_lease()
        except (TimeoutError, ApiError) as exc:
            log.warning("cannot renew or read the lease group", group=self.group, error=str(exc) or "timed out")
            return
        members = self._members(leases, started)
        MEMBERS.labels(self.group).set(len(members))
        recut_pending = False
        if self._raw_cuts:
            state = await self._follow_cuts(slots_lease)
            if state is None:
                return
            recut_pending = state.pending is not None
        slot_map = read_slot_map(slots_lease)
        plan = plan_slots(slot_map, members, self.me, self._clock.now(), self.slot_count, recut_pending=recut_pending)
        await self._apply(plan, slots_lease)

    async def _follow_cuts(self, slots_lease: dict[str, Any]) -> CutState | None:
        """Adopt the recorded cuts, or write a first record or a recut proposal (then None: plan on the next pass)."""
        state = read_cut_state(slots_lease, self.slot_count)
        if state is None or state.pending is None:
            hashes = [namespace_hash(ns) for ns in self._namespaces()]
            try:
                proposal = initial_state(hashes, self.slot_count) if state is None else propose_recut(state, hashes)
            except ValueError as exc:  # hashes closer together than the cuts between them: practically never
                log.warning("cannot cut the namespaces' hashes", group=self.group, error=str(exc))
                proposal = initial_state((), self.slot_count) if state is None else None
            if proposal is not None:
                if await self._write_slots_lease(slots_lease, {CUTS_ANNOTATION: encode_cuts(proposal)}):
                    RECUTS.labels(self.group, "proposed").inc()
                    log.info("proposed new cut points", group=self.group, generation=proposal.generation + 1)
                return None
        assert state is not None
        current = self._cut_state
        if current is None or current.generation != state.generation:
            await self._give_up(self.owned, "the cut points changed")  # only after a lapse: owners release first
            log.info("reconciling under new cut points", group=self.group, generation=state.generation)
            CUT_GENERATION.labels(self.group).set(state.generation)
        self._cut_state = state
        return state

    async def _write_slots_lease(self, slots_lease: dict[str, Any], annotations: dict[str, str]) -> bool:
        """Replace the slot map's Lease with ``annotations`` set (its resourceVersion as precondition)."""
        md = dict(slots_lease.get("metadata") or {})
        md.pop("managedFields", None)
        md["annotations"] = {**(md.get("annotations") or {}), **annotations}
        try:
            async with asyncio.timeout(self.renew_deadline):
                await self._client.replace(LEASES, {**slots_lease, "metadata": md}, self.namespace)
        except (Conflict, NotFound):
            return False  # another member wrote first: the next pass plans from its map
        except (TimeoutError, ApiError) as exc:
            log.warning("cannot write the slot map", group=self.group, error=str(exc))
            return False
        return True

    async def _renew(self, started: float) -> bool:
        """Renew this replica's Lease (a new term after a lapse or at start); False when it could not."""
        if not self._within_deadline():
            self._term = format_time(time.time(), "microseconds")
        now = format_time(time.time(), "microseconds")
        name = lease_name(self.group, self.identity)
        spec = {
            "holderIdentity": self.me,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": self._term,
            "renewTime": now,
        }
        meta = {"name": name, "namespace": self.namespace, "labels": {GROUP_LABEL: self.group, ROLE_LABEL: "member"}}
        try:
            try:
                current = await self._client.get(LEASES, name, self.namespace)
            except NotFound:
                await self._client.create(LEASES, {"metadata": meta, "spec": spec}, self.namespace)
            else:
                rv = (current.get("metadata") or {}).get("resourceVersion")
                await self._client.replace(
                    LEASES, {"metadata": {**meta, "resourceVersion": rv}, "spec": spec}, self.namespace
                )
        except (AlreadyExists, Conflict):
            return False
        except ApiError as exc:
            log.warning("cannot renew the member lease", group=self.group, error=str(exc))
            return False
        if self._clock.now() >= started + self.renew_deadline:
            return False  # too late to count: the deadline is measured from the start of the renew
        self._renewed_at = started
        return True

    def _members(self, leases: list[dict[str, Any]], renewed_at: float) -> list[MemberLease]:
        now = self._clock.now()
        members = [MemberLease(self.me, renewed_at, self.renew_deadline)]
        seen: dict[str, tuple[Any, float]] = {}
        for lease in leases:
            if ((lease.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) != "member":
                continue
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if not holder or holder == self.me:
                continue
            name = str((lease.get("metadata") or {}).get("name"))
            previous = self._seen.get(name)
            observed_at = previous[1] if previous is not None and previous[0] == spec else now
            seen[name] = (spec, observed_at)
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            members.append(MemberLease(holder, observed_at, duration))
        self._seen = seen
        return members

    async def _slots_lease(self) -> dict[str, Any]:
        name = f"{self.group}-slots"
        try:
            return await self._client.get(LEASES, name, self.namespace)
        except NotFound:
            meta = {
                "name": name,
                "namespace": self.namespace,
                "labels": {GROUP_LABEL: self.group, ROLE_LABEL: "slots"},
                "annotations": {SLOT_MAP_ANNOTATION: "{}"},
            }
            try:
                return await self._client.create(LEASES, {"metadata": meta, "spec": {}}, self.namespace)
            except AlreadyExists:
                return await self._client.get(LEASES, name, self.namespace)

    async def _apply(self, plan: SlotPlan, slots_lease: dict[str, Any]) -> None:
        await self._give_up(self.owned - plan.reconcile, "rebalanced")
        gained = plan.reconcile - self.owned  # slots of a write of ours whose answer was lost
        self._set_owned(plan.reconcile)
        if gained:
            await self._on_acquire(gained)
        if plan.write is None:
            return
        annotations = {SLOT_MAP_ANNOTATION: _encode_map(plan.write)}
        state = read_cut_state(slots_lease, self.slot_count) if plan.recut else None
        if state is not None:
            annotations[CUTS_ANNOTATION] = encode_cuts(applied(state))
        if not await self._write_slots_lease(slots_lease, annotations):
            return
        if state is not None:
            RECUTS.labels(self.group, "applied").inc()
            log.info("applied new cut points", group=self.group, generation=state.generation + 1)
        if plan.released:
            HANDOVERS.labels(self.group, "released").inc(len(plan.released))
        if plan.acquired and self._within_deadline():
            HANDOVERS.labels(self.group, "acquired").inc(len(plan.acquired))
            self._set_owned(plan.reconcile | plan.acquired)
            log.info("acquired slots", group=self.group, slots=sorted(plan.acquired), owned=len(self.owned))
            await self._on_acquire(plan.acquired)

    async def _give_up(self, slots: frozenset[int], why: str) -> None:
        if not slots:
            return
        self._set_owned(self.owned - slots)
        log.info("releasing slots", group=self.group, slots=sorted(slots), why=why)
        await self._on_release(slots)

    def _set_owned(self, slots: frozenset[int]) -> None:
        self.owned = slots
        OWNED_SLOTS.labels(self.group).set(len(slots))

    async def _leave(self) -> None:
        """Stop owning, write the map without this replica's slots, delete its Lease (best effort, bounded)."""
        await self._give_up(self.owned, "stopping")
        try:
            async with asyncio.timeout(self.retry_period):
                lease = await self._slots_lease()
                recorded = read_slot_map(lease)
                others = {s: o for s, o in recorded.items() if o != self.me}
                if others != recorded:
                    released = frozenset(recorded) - frozenset(others)
                    await self._apply(SlotPlan(reconcile=frozenset(), write=others, released=released), lease)
                await self._client.delete(LEASES, lease_name(self.group, self.identity), self.namespace)
        except (TimeoutError, ApiError) as exc:
            log.warning("could not leave the group cleanly; the lease expires by itself", error=str(exc))


def read_slot_map(lease: dict[str, Any]) -> dict[int, str]:
    """The slot map a ``<group>-slots`` Lease records (slot -> member id); unreadable entries are left out."""
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(SLOT_MAP_ANNOTATION) or "{}"
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {int(k): str(v) for k, v in decoded.items() if str(k).isdigit() and isinstance(v, str)}


def read_cut_state(lease: dict[str, Any], slot_count: int = SLOT_COUNT) -> CutState | None:
    """The cut points a ``<group>-slots`` Lease records (None: no valid record)."""
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(CUTS_ANNOTATION)
    return decode_cuts(raw if isinstance(raw, str) else None, slot_count)


def namespace_owner(lease: dict[str, Any], namespace: str) -> str | None:
    """The member id the ``<group>-slots`` Lease gives ``namespace`` to (raw cuts when recorded, else mixed slots)."""
    state = read_cut_state(lease)
    slot = namespace_slot(namespace) if state is None else slot_at(namespace_hash(namespace), state.cuts)
    return read_slot_map(lease).get(slot)


def _encode_map(slot_map: dict[int, str]) -> str:
    return json.dumps({str(s): slot_map[s] for s in sorted(slot_map)}, separators=(",", ":"))
