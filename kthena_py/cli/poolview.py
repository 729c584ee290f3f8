"""What ``kthena-py status`` shows of ModelPools: one pool in detail, or the namespace's pools as a table.

Pure: every function takes the objects already read (plain dicts) and the time ages are measured to, and returns
data or text; :mod:`kthena_py.cli.status` reads and prints.

Guarantees:

* The pool's own status is shown as the controller wrote it (phase, resident and pending members, the swap in
  progress with its step, the last swap with the time of each step, conditions); nothing is inferred over it.
* Each member's line adds what was read live: its ModelServing's ``spec.replicas`` (``missing`` when it does not
  exist), its pods (Ready / all, terminating ones counted, since a swap waits until they are gone) and the latest
  request an activator recorded (the pool's demand annotation). A member the status does not describe yet gets a
  phase derived from that live read (Missing, Stopped, Scaling, Ready).
* Times the controller wrote that cannot be read are shown as written, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelpool import (
    DEFAULT_SLOTS,
    DEFAULT_SWAP_BUDGET,
    MEMBER_MISSING,
    MEMBER_READY,
    MEMBER_SCALING,
    MEMBER_STOPPED,
    SWAP_POLICY_STICKY,
)
from kthena_py.api.validation.poolmembers import pool_members
from kthena_py.plan.modelpool.demand import demand_of, parse_demand_time
from kthena_py.vocab.conditions import POD_READY

__all__ = ["MemberLine", "PoolView", "build_pool_view", "pool_document", "render_pool_list", "render_pool_text"]


@dataclass(frozen=True)
class MemberLine:
    """One member as ``kthena-py status POOL`` shows it."""

    name: str
    phase: str
    resident: bool
    replicas: int | None
    """The ModelServing's ``spec.replicas`` (``None``: the ModelServing does not exist)."""
    pods_ready: int
    pods: int
    terminating: int
    last_request: float | None
    """Epoch seconds of the latest recorded request (demand annotation, else the status' lastRequestTime)."""


@dataclass(frozen=True)
class PoolView:
    """One pool: its spec in brief, its status and its members."""

    name: str
    namespace: str
    phase: str
    slots: int
    swap_budget: str
    swap_policy: str
    default: str
    resident: tuple[str, ...]
    pending: str
    evicting: str
    swap: Mapping[str, Any]
    last_swap: Mapping[str, Any]
    members: tuple[MemberLine, ...]
    conditions: tuple[Mapping[str, Any], ...]
    now: float


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = _dict(pod.get("status")).get("conditions")
    return any(
        _dict(c).get("type") == POD_READY and _dict(c).get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
    )


def _derived_phase(replicas: int | None, ready: int, pods: int) -> str:
    if replicas is None:
        return MEMBER_MISSING
    if replicas == 0:
        return MEMBER_STOPPED if pods == 0 else MEMBER_SCALING
    return MEMBER_READY if ready >= replicas and ready == pods else MEMBER_SCALING


def build_pool_view(
    pool: Mapping[str, Any],
    servings: Mapping[str, Mapping[str, Any] | None],
    pods: Mapping[str, Sequence[Mapping[str, Any]]],
    now: float,
) -> PoolView:
    """The view of one pool.

    Args:
        pool: The ModelPool as read.
        servings: Each member's ModelServing as read (``None`` or absent: it does not exist).
        pods: Each member's pods (label ``modelserving.volcano.sh/name``).
        now: The time ages are measured to (epoch seconds).
    """
    spec, status = _dict(pool.get("spec")), _dict(pool.get("status"))
    metadata = _dict(pool.get("metadata"))
    residents = status.get("residentMembers")
    resident = tuple(r for r in residents if isinstance(r, str)) if isinstance(residents, list) else ()
    if not resident and _text(status.get("residentMember")):
        resident = (_text(status.get("residentMember")),)
    reported_members = status.get("members")
    described = {
        _text(_dict(m).get("name")): _dict(m) for m in (reported_members if isinstance(reported_members, list) else [])
    }
    demand = demand_of(pool)
    lines = []
    for _, name in pool_members(pool):
        ms = servings.get(name)
        replicas_value = _dict(ms.get("spec")).get("replicas") if ms is not None else None
        replicas = (replicas_value if isinstance(replicas_value, int) else 1) if ms is not None else None
        member_pods = pods.get(name, ())
        ready = sum(1 for pod in member_pods if _is_ready(pod))
        terminating = sum(1 for pod in member_pods if _dict(pod.get("metadata")).get("deletionTimestamp"))
        reported = described.get(name, {})
        last = demand.get(name)
        if last is None:
            last = parse_demand_time(reported.get("lastRequestTime"))
        lines.append(
            MemberLine(
                name=name,
                phase=_text(reported.get("phase")) or _derived_phase(replicas, ready, len(member_pods)),
                resident=name in resident,
                replicas=replicas,
                pods_ready=ready,
                pods=len(member_pods),
                terminating=terminating,
                last_request=last,
            )
        )
    slots = spec.get("slots")
    conditions = status.get("conditions")
    return PoolView(
        name=_text(metadata.get("name")),
        namespace=_text(metadata.get("namespace")),
        phase=_text(status.get("phase")),
        slots=slots if isinstance(slots, int) else DEFAULT_SLOTS,
        swap_budget=_text(spec.get("swapBudget")) or DEFAULT_SWAP_BUDGET,
        swap_policy=_text(spec.get("swapPolicy")) or SWAP_POLICY_STICKY,
        default=_text(spec.get("default")),
        resident=resident,
        pending=_text(status.get("pendingMember")),
        evicting=_text(status.get("evictingMember")),
        swap=_dict(status.get("swap")),
        last_swap=_dict(status.get("lastSwap")),
        members=tuple(lines),
        conditions=tuple(_dict(c) for c in (conditions if isinstance(conditions, list) else [])),
        now=now,
    )


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{math.floor(seconds)}s"
    if seconds < 7200:
        return f"{math.floor(seconds / 60)}m"
    if seconds < 172800:
        return f"{math.floor(seconds / 3600)}h"
    return f"{math.floor(seconds / 86400)}d"


def _when(text: Any, now: float, ages: bool) -> str:
    moment = parse_demand_time(text)
    if moment is None:
        return _text(text) or "-"
    return f"{_age(now - moment)} ago" if ages else _text(text)


def _step_seconds(swap: Mapping[str, Any], start: str, end: str) -> str:
    first, last = parse_demand_time(swap.get(start)), parse_demand_time(swap.get(end))
    return "-" if first is None or last is None else f"{last - first:.1f}s"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_pool_text(view: PoolView, *, ages: bool = True) -> str:
    """The text ``kthena-py status POOL`` prints (ends with a newline).

    Args:
        view: The pool's view.
        ages: Show times as ages (``False``: as written, for output compared across runs).
    """
    lines = [
        f"ModelPool {view.namespace}/{view.name}: {view.phase or 'no status yet'}",
        f"  slots {view.slots}, swapPolicy {view.swap_policy}, swapBudget {view.swap_budget}"
        + (f", default {view.default}" if view.default else ""),
        f"  resident: {', '.join(view.resident) or '-'}"
        + (f"   pending: {view.pending}" if view.pending else "")
        + (f"   evicting: {view.evicting}" if view.evicting else ""),
    ]
    if view.swap:
        swap = view.swap
        times = ", ".join(
            f"{key} {_when(swap.get(key), view.now, ages)}" for key in ("started", "drained", "released") if key in swap
        )
        lines.append(
            f"  swap in progress: {_text(swap.get('from')) or '(free slot)'} -> {_text(swap.get('to'))}, "
            f"step {_text(swap.get('step'))}" + (f" ({times})" if times else "")
        )
    if view.last_swap:
        last = view.last_swap
        duration = last.get("durationSeconds")
        took = f"took {duration:.1f}s" if isinstance(duration, int | float) else "took -"
        steps = (
            f"drain {_step_seconds(last, 'started', 'drained')}, release {_step_seconds(last, 'drained', 'released')}, "
            f"load {_step_seconds(last, 'released', 'ready')}"
        )
        lines.append(
            f"  last swap: {_text(last.get('from')) or '(free slot)'} -> {_text(last.get('to'))}, {took} ({steps}), "
            f"ready {_when(last.get('ready'), view.now, ages)}"
        )
    rows = [["MEMBER", "PHASE", "RESIDENT", "REPLICAS", "PODS", "LAST REQUEST"]]
    for member in view.members:
        pods = f"{member.pods_ready}/{member.pods}" + (
            f" ({member.terminating} terminating)" if member.terminating else ""
        )
        last_request = "-"
        if member.last_request is not None:
            last_request = f"{_age(view.now - member.last_request)} ago" if ages else "recorded"
        rows.append(
            [
                member.name,
                member.phase,
                "yes" if member.resident else "no",
                "missing" if member.replicas is None else str(member.replicas),
                pods,
                last_request,
            ]
        )
    lines += ["", *(f"  {row}" for row in _table(rows))]
    if view.conditions:
        rows = [["CONDITION", "STATUS", "REASON", "MESSAGE"]]
        rows += [
            [_text(c.get("type")), _text(c.get("status")), _text(c.get("reason")), _text(c.get("message"))]
            for c in view.conditions
        ]
        lines += ["", *(f"  {row}" for row in _table(rows))]
    return "\n".join(lines) + "\n"


def pool_document(view: PoolView) -> dict[str, Any]:
    """The JSON form of a pool's view (``-o json``)."""
    return {
        "kind": "ModelPool",
        "name": view.name,
        "namespace": view.namespace,
        "phase": view.phase,
        "slots": view.slots,
        "swapPolicy": view.swap_policy,
        "swapBudget": view.swap_budget,
        "default": view.default or None,
        "residentMembers": list(view.resident),
        "pendingMember": view.pending or None,
        "evictingMember": view.evicting or None,
        "swap": dict(view.swap) or None,
        "lastSwap": dict(view.last_swap) or None,
        "members": [
            {
                "name": m.name,
                "phase": m.phase,
                "resident": m.resident,
                "replicas": m.replicas,
                "podsReady": m.pods_ready,
                "pods": m.pods,
                "terminating": m.terminating,
                "lastRequestSecondsAgo": None if m.last_request is None else round(view.now - m.last_request, 3),
            }
            for m in view.members
        ],
        "conditions": [dict(c) for c in view.conditions],
    }


def render_pool_list(pools: Sequence[Mapping[str, Any]], namespace: str) -> str:
    """The table ``kthena-py status`` (no NAME) prints: every pool of the namespace, one line each."""
    if not pools:
        return f"No ModelPools in namespace {namespace}. Use `kthena-py status NAME` for a ModelServing.\n"
    rows = [["MODELPOOL", "RESIDENT", "PENDING", "PHASE", "SLOTS", "MEMBERS", "LAST SWAP"]]
    for pool in sorted(pools, key=lambda p: _text(_dict(p.get("metadata")).get("name"))):
        spec, status = _dict(pool.get("spec")), _dict(pool.get("status"))
        residents = status.get("residentMembers")
        resident = ",".join(r for r in residents if isinstance(r, str)) if isinstance(residents, list) else ""
        last = _dict(status.get("lastSwap"))
        duration = last.get("durationSeconds")
        last_swap = "-"
        if last:
            took = f" {duration:.1f}s" if isinstance(duration, int | float) else ""
            last_swap = f"{_text(last.get('from')) or '(free)'}->{_text(last.get('to'))}{took}"
        slots = spec.get("slots")
        rows.append(
            [
                _text(_dict(pool.get("metadata")).get("name")),
                resident or _text(status.get("residentMember")) or "-",
                _text(status.get("pendingMember")) or "-",
                _text(status.get("phase")) or "-",
                str(slots if isinstance(slots, int) else DEFAULT_SLOTS),
                ",".join(name for _, name in pool_members(pool)),
                last_swap,
            ]
        )
    return "\n".join(_table(rows)) + "\n"
