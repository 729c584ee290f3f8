"""The swap planner: given a pool's recorded intent, its members and the demand, what to record and scale next.

The controller calls :func:`plan` with what it observed; when the answer asks for idle checks
(:attr:`Decision.needs_probe`) it probes those residents and calls again with the verdicts. It then writes the
returned intent to the pool's status *first* and only then the replica changes, so a restart at any point
resumes from the status: every step below is decided again from the recorded intent and what is observed.

Steps (one swap at a time per pool; several may be taken in one call when nothing needs waiting for):

1. **Target.** A member not resident whose demand asks for a swap (:func:`~.demand.asks_for_swap`: live, and
   recorded after the member was last swapped out), the oldest demand first (ties by ``spec.members`` order).
   A cold pool (no resident, no swap) takes ``default`` first, with or without demand.
   Sticky: without live demand for a non-resident member, nothing is swapped.
2. **Free slot** (fewer residents than ``slots``): record ``{to, step: Loading}``; the target gets 1 replica.
3. **No free slot**: record ``{from: the least recently used resident, to, step: Draining}``. The residents are
   idle-checked; the least recently used *idle* one (oldest demand; never requested is oldest; ties: the one
   resident longest) becomes ``from``, leaves the residents and goes to 0 replicas (``Releasing``, ``drained``);
   its release time is returned (:attr:`Decision.released`) for the controller to record.
   None idle: nothing is scaled and ``SwapDeferred`` says why — ``PodsBusy`` when a probe said busy,
   ``IdleCheckFailed`` when probes failed and none said busy (fail closed).
4. **Releasing** waits until the victim has no replicas and no pods left (not just terminating), then
   ``Loading`` (``released``): the target gets 1 replica.
5. **Loading** ends when the target has a Ready entry pod: it becomes resident, the swap is cleared and returned
   as :attr:`Decision.completed` (the ``lastSwap``).
6. A swap still ``Draining`` whose target's demand expired is abandoned (``SwapDeferred/DemandExpired``). Once the
   victim is released the swap completes whatever the demand. A swap whose target stopped being a member or lost
   its ModelServing is abandoned at any step (a released victim stays at 0: its slot is simply free).

Invariants (property-tested):

* Members wanted up = residents + the target while ``Loading``; never more than ``slots``.
* A scale-up is held back (the member stays at 0 this pass) while ``slots`` other members are still up (replicas
  or pods present), so no pass raises a member while that would put more than ``slots`` members up. Every
  member in ``members`` counts, listed in ``spec.members`` or not (a member removed from the spec, or one an
  older pool keeps, :mod:`.conflicts`); only members of ``spec.members`` are ever written.
* Every member whose replicas differ from the wanted value (1 up, 0 down) gets a replica write; a write that
  repairs someone else's change (not part of a step taken now or of the swap in progress) comes with a
  ``ReplicasRestored`` Warning Event.
* Pure: no clock (``now`` is given), no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from kthena_py.api.modelpool import (
    REASON_DEMAND_EXPIRED,
    REASON_IDLE_CHECK_FAILED,
    REASON_PODS_BUSY,
    STEP_DRAINING,
    STEP_LOADING,
    STEP_RELEASING,
)
from kthena_py.plan.modelpool.demand import DEMAND_LIVE_SECONDS, asks_for_swap, format_demand_time
from kthena_py.plan.modelpool.idle import BUSY, IDLE, IdleResult
from kthena_py.plan.modelpool.view import Member, PoolSpec, PoolState, Swap

__all__ = [
    "IDLE_RECHECK_SECONDS",
    "STEP_WAIT_SECONDS",
    "CompletedSwap",
    "Decision",
    "PlannedEvent",
    "lru_order",
    "plan",
]

IDLE_RECHECK_SECONDS = 2.0
"""A deferred swap probes its residents again this often."""
STEP_WAIT_SECONDS = 2.0
"""A swap waiting for pods to go or to become Ready looks again at least this often (watches wake it sooner)."""

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class PlannedEvent:
    """An Event to record on the pool."""

    type: EventType
    reason: str
    message: str


@dataclass(frozen=True)
class CompletedSwap:
    """A finished swap (the pool's ``lastSwap``); times are epoch seconds."""

    to: str
    from_: str | None
    started: float
    drained: float | None
    released: float | None
    ready: float

    @property
    def duration(self) -> float:
        """Seconds from the swap's start to the target being Ready."""
        return max(0.0, self.ready - self.started)


@dataclass(frozen=True)
class Decision:
    """What to record, then what to scale."""

    state: PoolState
    """The intent to record in the status (before any replica write)."""
    replicas: dict[str, int] = field(default_factory=dict)
    """Replica writes to make after the status is recorded (member -> replicas)."""
    events: tuple[PlannedEvent, ...] = ()
    completed: CompletedSwap | None = None
    abandoned: str | None = None
    """Why a swap was abandoned in this call (its reason), if one was."""
    needs_probe: tuple[str, ...] = ()
    """Residents to idle-check before this decision can be made (call again with their verdicts)."""
    released: dict[str, float] = field(default_factory=dict)
    """Members swapped out now and when: to record (before the status) so their older demand asks for no swap back."""
    requeue_after: float | None = None


def lru_order(residents: Sequence[str], demand: Mapping[str, float]) -> list[str]:
    """Residents least recently used first: oldest demand first, never requested first of all, ties by residency."""
    position = {name: i for i, name in enumerate(residents)}
    return sorted(residents, key=lambda n: (demand.get(n, float("-inf")), position[n]))


def _target(
    spec: PoolSpec,
    residents: Sequence[str],
    valid: set[str],
    demand: Mapping[str, float],
    released: Mapping[str, float],
    now: float,
) -> str | None:
    if not residents and spec.default in valid:
        return spec.default
    waiting = [n for n in spec.members if n in valid and n not in residents and asks_for_swap(n, demand, released, now)]
    if not waiting:
        return None
    order = {n: i for i, n in enumerate(spec.members)}
    return min(waiting, key=lambda n: (demand[n], order[n]))


def _t(epoch: float | None) -> str:
    return format_demand_time(epoch) if epoch is not None else "-"


class _Pass:
    """The working state of one :func:`plan` call."""

    def __init__(self, spec: PoolSpec, state: PoolState, members: Mapping[str, Member]) -> None:
        self.spec = spec
        self.members = members
        self.valid = {n for n in spec.members if n in members and members[n].exists}
        self.events: list[PlannedEvent] = []
        self.completed: CompletedSwap | None = None
        self.abandoned: str | None = None
        self.deferred: tuple[str, str] | None = None
        self.needs_probe: tuple[str, ...] = ()
        self.requeue: list[float] = []
        self.released: dict[str, float] = {}
        if state.residents is None:
            up = [n for n in spec.members if n in self.valid and members[n].replicas > 0]
            first = [spec.default] if spec.default in up else []
            self.residents = (first + [n for n in up if n not in first])[: spec.slots]
            if self.residents:
                self.event(
                    "Normal", "MembersAdopted", f"adopted running members as resident: {', '.join(self.residents)}"
                )
        else:
            self.residents = [r for r in state.residents if r in self.valid][: spec.slots]
        self.swap = state.swap

    def event(self, type_: EventType, reason: str, message: str) -> None:
        self.events.append(PlannedEvent(type_, reason, message))

    def gone(self, name: str | None) -> bool:
        member = self.members.get(name or "")
        return member is None or not member.up

    def abandon(self, reason: str, message: str) -> None:
        assert self.swap is not None
        self.event("Warning", "SwapAbandoned", message)
        self.abandoned = reason
        self.swap = None


def _step(
    p: _Pass,
    demand: Mapping[str, float],
    released: Mapping[str, float],
    now: float,
    idle: Mapping[str, IdleResult] | None,
) -> bool:
    """Take one step; ``True`` when something changed and another step may follow."""
    swap = p.swap
    if swap is None:
        target = _target(p.spec, p.residents, p.valid, demand, {**released, **p.released}, now)
        if target is None:
            return False
        if len(p.residents) < p.spec.slots:
            p.swap = Swap(to=target, step=STEP_LOADING, started=now)
            p.event("Normal", "SwapStarted", f"loading {target} into a free slot")
        else:
            victim = lru_order(p.residents, demand)[0]
            p.swap = Swap(to=target, step=STEP_DRAINING, from_=victim, started=now)
            p.event("Normal", "SwapStarted", f"swapping {victim} out for {target}: waiting for an idle resident")
        return True
    if swap.to not in p.valid:
        victim_released = swap.step != STEP_DRAINING
        p.abandon(
            "TargetGone",
            f"swap to {swap.to} abandoned: it is no longer a member with a ModelServing"
            + (f" ({swap.from_} stays released)" if victim_released and swap.from_ else ""),
        )
        return True
    if swap.step == STEP_DRAINING:
        when = demand.get(swap.to)
        if when is None or not asks_for_swap(swap.to, demand, released, now):
            message = (
                f"swap to {swap.to} abandoned: no request for it since {_t(when)} "
                f"(demand lives {DEMAND_LIVE_SECONDS:g}s) while waiting for an idle resident"
            )
            p.abandon(REASON_DEMAND_EXPIRED, message)
            p.deferred = (REASON_DEMAND_EXPIRED, message)
            return True
        if len(p.residents) < p.spec.slots:
            p.swap = replace(swap, step=STEP_LOADING, from_=None)
            p.event("Normal", "SlotFreed", f"a slot became free: loading {swap.to}")
            return True
        order = lru_order(p.residents, demand)
        if idle is None or any(r not in idle for r in order):
            p.needs_probe = tuple(order)
            return False
        chosen = next((r for r in order if idle[r].verdict == IDLE), None)
        if chosen is None:
            busy = [r for r in order if idle[r].verdict == BUSY]
            if busy:
                details = "; ".join(f"{r}: {idle[r].detail}" for r in busy)
                p.deferred = (REASON_PODS_BUSY, f"{swap.to} waits for a slot: no resident is idle ({details})")
            else:
                details = "; ".join(f"{r}: {idle[r].detail}" for r in order)
                p.deferred = (
                    REASON_IDLE_CHECK_FAILED,
                    f"{swap.to} waits for a slot: cannot tell whether a resident is idle ({details})",
                )
            p.swap = replace(swap, from_=order[0])
            p.requeue.append(min(IDLE_RECHECK_SECONDS, max(0.1, when + DEMAND_LIVE_SECONDS - now + 0.05)))
            return False
        p.residents.remove(chosen)
        p.released[chosen] = now
        p.swap = replace(swap, step=STEP_RELEASING, from_=chosen, drained=now)
        p.event("Normal", "MemberReleased", f"{chosen} is idle ({idle[chosen].detail}): scaled to 0 for {swap.to}")
        return True
    if swap.step == STEP_RELEASING:
        if not p.gone(swap.from_):
            p.requeue.append(STEP_WAIT_SECONDS)
            return False
        p.swap = replace(swap, step=STEP_LOADING, released=now)
        p.event("Normal", "MemberLoading", f"{swap.from_}'s pods are gone: loading {swap.to}")
        return True
    if not p.members[swap.to].ready:
        p.requeue.append(STEP_WAIT_SECONDS)
        return False
    p.residents.append(swap.to)
    p.completed = CompletedSwap(
        to=swap.to,
        from_=swap.from_,
        started=swap.started if swap.started is not None else now,
        drained=swap.drained,
        released=swap.released,
        ready=now,
    )
    p.swap = None
    source = f"{p.completed.from_} -> " if p.completed.from_ else ""
    p.event("Normal", "SwapCompleted", f"{source}{swap.to} is resident and Ready after {p.completed.duration:.1f}s")
    return True


def _wanted(residents: Sequence[str], swap: Swap | None) -> set[str]:
    wanted = set(residents)
    if swap is not None and swap.step == STEP_LOADING:
        wanted.add(swap.to)
    return wanted


def _writes(p: _Pass, before: PoolState) -> dict[str, int]:
    wanted = _wanted(p.residents, p.swap)
    intended_before = set(wanted) if before.residents is None else _wanted(before.residents, before.swap)
    involved = {s for sw in (before.swap, p.swap) if sw is not None for s in (sw.to, sw.from_) if s}
    up = {n for n, m in p.members.items() if m.up}
    writes: dict[str, int] = {}
    for name in p.spec.members:
        if name not in p.valid:
            continue
        member = p.members[name]
        want = 1 if name in wanted else 0
        if want == 1 and member.replicas == 0 and len(up - {name}) >= p.spec.slots:
            p.requeue.append(STEP_WAIT_SECONDS)
            want = 0  # hold: a slot is still taken by another member's pods
        if member.replicas == want:
            continue
        writes[name] = want
        if want == 1:
            up.add(name)
        changed_now = (name in wanted) != (name in intended_before)
        if not changed_now and name not in involved and before.residents is not None:
            p.event(
                "Warning",
                "ReplicasRestored",
                f"{name}'s replicas were set to {member.replicas} by someone else; put back to {want}: "
                "the pool controller is the only writer of its members' replicas",
            )
    return writes


def plan(
    spec: PoolSpec,
    state: PoolState,
    members: Mapping[str, Member],
    demand: Mapping[str, float],
    now: float,
    idle: Mapping[str, IdleResult] | None = None,
    released: Mapping[str, float] | None = None,
) -> Decision:
    """Decide the next intent and replica writes of one pool (see the module docstring).

    Args:
        spec: The pool's spec.
        state: The intent recorded in its status.
        members: What is observed of each member (a member absent here is taken as missing).
        demand: Member -> epoch seconds of its latest request (:func:`~.demand.demand_of`).
        now: The current time, epoch seconds.
        idle: The idle-check verdicts of the residents named by an earlier call's ``needs_probe``.
        released: Member -> epoch seconds it was last swapped out (:func:`~.demand.released_of`).
    """
    p = _Pass(spec, state, members)
    for _ in range(8):
        if not _step(p, demand, released or {}, now, idle):
            break
    if p.needs_probe:
        return Decision(state=state, needs_probe=p.needs_probe)
    deferred = p.deferred
    if deferred is None and p.swap is None and state.deferred_reason == REASON_DEMAND_EXPIRED:
        deferred = (REASON_DEMAND_EXPIRED, state.deferred_message)
    new_state = PoolState(
        residents=tuple(p.residents),
        swap=p.swap,
        deferred_reason=deferred[0] if deferred else None,
        deferred_message=deferred[1] if deferred else "",
    )
    if deferred and deferred[0] != state.deferred_reason and deferred[0] != REASON_DEMAND_EXPIRED:
        p.event("Warning" if deferred[0] == REASON_IDLE_CHECK_FAILED else "Normal", deferred[0], deferred[1])
    writes = _writes(p, state)
    return Decision(
        state=new_state,
        replicas=writes,
        events=tuple(p.events),
        completed=p.completed,
        abandoned=p.abandoned,
        released=p.released,
        requeue_after=min(p.requeue) if p.requeue else None,
    )
