"""The whole status of a pool, rendered from the planner's decision and what is observed.

Guarantees:

* ``residentMembers`` is always written (empty when no member is resident): its presence is what tells the
  controller, after a restart, that the pool was adopted; ``residentMember`` is the one made resident last.
* ``swap``, ``pendingMember`` and ``evictingMember`` are present only while a swap is in progress
  (``evictingMember`` only while its victim is Draining or Releasing); ``lastSwap`` is kept until the next swap
  completes. Times are RFC 3339 UTC with milliseconds.
* ``members`` lists ``spec.members`` in order, then former members (no longer in ``spec.members``) while they
  are still up: that entry is how the controller remembers to count them in its slot guard.
* ``phase``: ``Degraded`` when the swap's target has been ``Loading`` for the pool's ``swapBudget`` or longer
  (:func:`loading_stalled`; the controller keeps waiting and never scales the old member back);
  else ``Swapping`` while a swap is in progress; else ``Degraded`` when a member has no ModelServing, another
  pool lists it or an AutoscalingPolicy targets it (:mod:`.conflicts`), or a resident fails; else ``Pending``
  when no member is resident or a resident is not Ready; else ``Ready``. ``Ready`` (the condition) stays True
  while a conflict degrades the phase but every resident serves.
* Four conditions, each with the pool's generation: ``SlotAllocated``, ``MembersValid``, ``SwapDeferred``,
  ``Ready``. ``MembersValid`` is False for the first of: a member without ModelServing (``MemberMissing``), a
  member another pool also lists (``MemberInAnotherPool``, naming the pool and which one keeps it), a member an
  AutoscalingPolicy targets (``MemberAutoscaled``, naming the policy), a member not selecting the pool's nodes
  (``NodeSelectorMismatch``). ``Ready`` is False/``SwapStalled`` while a swap is stalled, naming the target and
  what its pods wait for when known. A condition keeps its ``lastTransitionTime`` while its status does not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kthena_py.api.modelpool import (
    CONDITION_MEMBERS_VALID,
    CONDITION_READY,
    CONDITION_SLOT_ALLOCATED,
    CONDITION_SWAP_DEFERRED,
    MEMBER_FAILED,
    MEMBER_MISSING,
    MEMBER_READY,
    MEMBER_SCALING,
    MEMBER_STOPPED,
    PHASE_DEGRADED,
    PHASE_PENDING,
    PHASE_READY,
    PHASE_SWAPPING,
    REASON_MEMBER_MISSING,
    REASON_MEMBER_RESIDENT,
    REASON_MEMBERS_FOUND,
    REASON_NO_RESIDENT,
    REASON_NODE_SELECTOR_MISMATCH,
    REASON_NOT_DEFERRED,
    REASON_RESIDENT_NOT_READY,
    REASON_SWAP_IN_PROGRESS,
    STEP_DRAINING,
    STEP_LOADING,
    STEP_RELEASING,
    MemberPhase,
    ModelPoolPhase,
)
from kthena_py.plan.modelpool.conflicts import MemberConflicts
from kthena_py.plan.modelpool.demand import format_demand_time
from kthena_py.plan.modelpool.swap import CompletedSwap
from kthena_py.plan.modelpool.view import Member, PoolSpec, PoolState
from kthena_py.vocab.conditions import (
    REASON_MEMBER_AUTOSCALED,
    REASON_MEMBER_IN_ANOTHER_POOL,
    REASON_SWAP_STALLED,
)

__all__ = ["loading_stalled", "member_phase", "pool_phase", "render_status"]

_NO_CONFLICTS = MemberConflicts()


def loading_stalled(spec: PoolSpec, state: PoolState, now: float | None) -> float | None:
    """Seconds the swap's target has been ``Loading`` when that reached ``swapBudget``, else ``None``.

    Loading starts when the victim's pods were gone (``released``), or at the swap's start for a free slot.
    """
    swap = state.swap
    if now is None or swap is None or swap.step != STEP_LOADING:
        return None
    since = swap.released if swap.released is not None else swap.started
    if since is None or now - since < spec.swap_budget:
        return None
    return now - since


def member_phase(member: Member | None) -> MemberPhase:
    """Where one member stands."""
    if member is None or not member.exists:
        return MEMBER_MISSING
    if member.failed:
        return MEMBER_FAILED
    if member.ready:
        return MEMBER_READY
    if not member.up:
        return MEMBER_STOPPED
    return MEMBER_SCALING


def pool_phase(
    spec: PoolSpec,
    state: PoolState,
    members: Mapping[str, Member],
    now: float | None = None,
    conflicts: MemberConflicts = _NO_CONFLICTS,
) -> ModelPoolPhase:
    """The pool's phase (see the module docstring); without ``now`` a swap is never taken as stalled."""
    residents = state.residents or ()
    if loading_stalled(spec, state, now) is not None:
        return PHASE_DEGRADED
    if state.swap is not None:
        return PHASE_SWAPPING
    if (
        not conflicts.empty
        or any(member_phase(members.get(n)) == MEMBER_MISSING for n in spec.members)
        or any(member_phase(members.get(r)) == MEMBER_FAILED for r in residents)
    ):
        return PHASE_DEGRADED
    if not residents or any(member_phase(members.get(r)) != MEMBER_READY for r in residents):
        return PHASE_PENDING
    return PHASE_READY


def _time(epoch: float | None) -> str | None:
    return format_demand_time(epoch) if epoch is not None else None


def _whole_seconds(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _compact(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def last_swap_of(done: CompletedSwap) -> dict[str, Any]:
    """A completed swap as the ``lastSwap`` status field."""
    return _compact(
        {
            "from": done.from_,
            "to": done.to,
            "started": _time(done.started),
            "drained": _time(done.drained),
            "released": _time(done.released),
            "ready": _time(done.ready),
            "durationSeconds": round(done.duration, 3),
        }
    )


def _conditions(
    spec: PoolSpec,
    state: PoolState,
    members: Mapping[str, Member],
    phase: ModelPoolPhase,
    namespace: str,
    conflicts: MemberConflicts,
    stalled: float | None,
) -> list[tuple[str, bool, str, str]]:
    residents = list(state.residents or ())
    swap = state.swap
    if residents:
        slot = (
            True,
            REASON_MEMBER_RESIDENT,
            f"{', '.join(residents)} resident ({len(residents)} of {spec.slots} slots)",
        )
    elif swap is not None:
        slot = (False, REASON_SWAP_IN_PROGRESS, f"loading {swap.to}")
    else:
        slot = (False, REASON_NO_RESIDENT, "no member is resident: waiting for a request (or a default)")
    missing = [n for n in spec.members if member_phase(members.get(n)) == MEMBER_MISSING]
    unselected = [n for n in spec.members if n in members and not members[n].selects_pool_nodes]
    if missing:
        valid = (False, REASON_MEMBER_MISSING, f"no ModelServing {', '.join(missing)} in namespace {namespace}")
    elif conflicts.yielded or conflicts.kept:
        shared = [
            f"{m} is also listed by ModelPool {other}, which is older and manages it (this pool leaves it alone)"
            for m, other in sorted(conflicts.yielded.items())
        ] + [
            f"{m} is also listed by ModelPool {', '.join(others)}, which is younger (this pool manages it)"
            for m, others in sorted(conflicts.kept.items())
        ]
        valid = (False, REASON_MEMBER_IN_ANOTHER_POOL, "; ".join(shared) + ": a ModelServing belongs to one pool")
    elif conflicts.autoscaled:
        fights = "; ".join(
            f"{m} is the target of AutoscalingPolicy {', '.join(p)}" for m, p in sorted(conflicts.autoscaled.items())
        )
        valid = (
            False,
            REASON_MEMBER_AUTOSCALED,
            f"{fights}: the policy and this pool both write its replicas (the pool keeps writing them); "
            "delete the policy or leave the ModelServing out of the pool",
        )
    elif unselected:
        labels = ", ".join(f"{k}={v}" for k, v in spec.node_selector)
        valid = (
            False,
            REASON_NODE_SELECTOR_MISMATCH,
            f"the entry template of {', '.join(unselected)} does not select the pool's nodes ({labels})",
        )
    else:
        valid = (True, REASON_MEMBERS_FOUND, f"all {len(spec.members)} members found")
    if state.deferred_reason:
        deferred = (True, state.deferred_reason, state.deferred_message)
    else:
        deferred = (False, REASON_NOT_DEFERRED, "no swap is waiting")
    serving = bool(residents) and all(member_phase(members.get(r)) == MEMBER_READY for r in residents)
    if phase == PHASE_READY or (phase == PHASE_DEGRADED and serving and swap is None and not missing):
        ready = (True, REASON_MEMBER_RESIDENT, f"{', '.join(residents)} Ready")
    elif swap is not None and stalled is not None:
        target = members.get(swap.to)
        waits = f": {target.waiting}" if target is not None and target.waiting else ""
        ready = (
            False,
            REASON_SWAP_STALLED,
            f"{swap.to} has been Loading for {stalled:.0f}s, over the swapBudget of {spec.swap_budget:g}s, and is "
            f"not Ready{waits}; still waiting (the previous member is not brought back)",
        )
    elif swap is not None:
        ready = (False, REASON_SWAP_IN_PROGRESS, f"swapping in {swap.to} (step {swap.step})")
    elif not residents:
        ready = (False, REASON_NO_RESIDENT, "no member is resident")
    elif missing:
        ready = (False, REASON_MEMBER_MISSING, valid[2])
    else:
        waiting = [r for r in residents if member_phase(members.get(r)) != MEMBER_READY]
        ready = (False, REASON_RESIDENT_NOT_READY, f"resident {', '.join(waiting)} not Ready")
    return [
        (CONDITION_SLOT_ALLOCATED, *slot),
        (CONDITION_MEMBERS_VALID, *valid),
        (CONDITION_SWAP_DEFERRED, *deferred),
        (CONDITION_READY, *ready),
    ]


def render_status(
    *,
    spec: PoolSpec,
    state: PoolState,
    members: Mapping[str, Member],
    demand: Mapping[str, float],
    previous: Mapping[str, Any],
    completed: CompletedSwap | None,
    generation: int | None,
    namespace: str,
    now: float,
    conflicts: MemberConflicts = _NO_CONFLICTS,
    former: Sequence[str] = (),
) -> dict[str, Any]:
    """The pool's whole status after a decision.

    Args:
        spec: The pool's spec (all its members, those an older pool keeps included).
        state: The intent decided.
        members: What is observed of its members (and former members).
        demand: Member -> epoch seconds of its latest request.
        previous: The status as read, for times kept.
        completed: The swap completed by this decision, if one was.
        generation: The pool's ``metadata.generation``.
        namespace: The pool's namespace (for messages).
        now: The current time, epoch seconds.
        conflicts: Other writers of its members (:mod:`.conflicts`).
        former: Members no longer in ``spec.members`` (listed while still up).
    """
    residents: Sequence[str] = state.residents or ()
    swap = state.swap
    phase = pool_phase(spec, state, members, now, conflicts)
    stalled = loading_stalled(spec, state, now)
    old_conditions = {
        c.get("type"): c for c in previous.get("conditions") or [] if isinstance(c, Mapping) and c.get("type")
    }
    conditions = []
    for kind, ok, reason, message in _conditions(spec, state, members, phase, namespace, conflicts, stalled):
        status = "True" if ok else "False"
        old = old_conditions.get(kind)
        since = old.get("lastTransitionTime") if old and old.get("status") == status else None
        conditions.append(
            {
                "type": kind,
                "status": status,
                "observedGeneration": generation,
                "lastTransitionTime": since or _whole_seconds(now),
                "reason": reason,
                "message": message,
            }
        )
    members_status = [
        _compact(
            {
                "name": name,
                "phase": member_phase(members.get(name)),
                "resident": name in residents,
                "replicas": members[name].replicas if name in members else 0,
                "lastRequestTime": _time(demand.get(name)),
            }
        )
        for name in (*spec.members, *(f for f in former if f not in spec.members and f in members and members[f].up))
    ]
    last = last_swap_of(completed) if completed is not None else previous.get("lastSwap")
    return _compact(
        {
            "observedGeneration": generation,
            "phase": phase,
            "residentMember": residents[-1] if residents else None,
            "residentMembers": list(residents),
            "pendingMember": swap.to if swap else None,
            "evictingMember": swap.from_ if swap and swap.step in (STEP_DRAINING, STEP_RELEASING) else None,
            "swap": _compact(
                {
                    "from": swap.from_,
                    "to": swap.to,
                    "step": swap.step,
                    "started": _time(swap.started),
                    "drained": _time(swap.drained),
                    "released": _time(swap.released),
                }
            )
            if swap
            else None,
            "lastSwap": last,
            "members": members_status,
            "conditions": conditions,
        }
    )
