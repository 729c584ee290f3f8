"""ModelPool members as the activator sees them: their pool, their hold budget, and why one is not served yet.

Guarantees:

* :func:`pool_members` maps each member ModelServing (``namespace/name``, same namespace as its pool) to its
  :class:`PoolRef`; pools are read in (namespace, name) order and a ModelServing listed by two pools belongs to the
  first (admission refuses the second; the clash is reported in ``problems``). Pools being deleted are left out.
* A member's hold budget is its pool's ``spec.swapBudget`` (a Go duration above zero), else
  :data:`DEFAULT_SWAP_BUDGET` (LLMKube's 300 s); an unreadable one falls back to the default and is reported.
* :func:`pool_reason` says, from the pool's status, why a member is not served yet: the phase, the resident
  member(s), the swap in progress (from, to, step), and a ``SwapDeferred`` condition's reason and message. It
  never raises on a malformed or missing pool.
* Pure: no I/O, no clock; inputs are not changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.api.duration import DurationError, parse_duration
from kthena_py.api.modelpool import CONDITION_SWAP_DEFERRED
from kthena_py.api.modelpool import DEFAULT_SWAP_BUDGET as _DEFAULT_SWAP_BUDGET_TEXT

__all__ = ["DEFAULT_SWAP_BUDGET", "PoolRef", "member_names", "pool_members", "pool_reason", "swap_budget_of"]

DEFAULT_SWAP_BUDGET = parse_duration(_DEFAULT_SWAP_BUDGET_TEXT) / 1e9
"""Seconds a request for a non-resident member is held when the pool does not say (``spec.swapBudget``)."""


@dataclass(frozen=True)
class PoolRef:
    """The pool a ModelServing is a member of."""

    namespace: str
    name: str
    swap_budget: float
    """Seconds a request for this member may be held (the pool's ``swapBudget``)."""

    @property
    def key(self) -> str:
        """``namespace/name`` of the pool."""
        return f"{self.namespace}/{self.name}"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _dict(obj.get("metadata"))


def swap_budget_of(pool: Mapping[str, Any]) -> tuple[float, str | None]:
    """The pool's ``swapBudget`` in seconds, and a problem to report when it cannot be read."""
    raw = _dict(pool.get("spec")).get("swapBudget")
    if raw is None:
        return DEFAULT_SWAP_BUDGET, None
    try:
        nanos = parse_duration(str(raw).strip())
    except DurationError:
        nanos = 0
    if nanos <= 0:
        where = f"ModelPool {_md(pool).get('namespace') or ''}/{_md(pool).get('name') or ''}"
        return (
            DEFAULT_SWAP_BUDGET,
            f"{where}: swapBudget {raw!r} is not a duration above zero; using {DEFAULT_SWAP_BUDGET:g}s",
        )
    return nanos / 1e9, None


def member_names(pool: Mapping[str, Any]) -> list[str]:
    """The ModelServing names ``spec.members`` lists, in order, without blanks or repeats."""
    names: list[str] = []
    for member in _list(_dict(pool.get("spec")).get("members")):
        name = _dict(_dict(member).get("modelServingRef")).get("name")
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    return names


def pool_members(pools: Iterable[Mapping[str, Any]]) -> tuple[dict[str, PoolRef], tuple[str, ...]]:
    """``namespace/member`` -> its pool, and the problems found (see the module docstring)."""
    members: dict[str, PoolRef] = {}
    problems: list[str] = []
    ordered = sorted(pools, key=lambda p: (str(_md(p).get("namespace") or ""), str(_md(p).get("name") or "")))
    for pool in ordered:
        namespace, name = str(_md(pool).get("namespace") or ""), str(_md(pool).get("name") or "")
        if not name or _md(pool).get("deletionTimestamp"):
            continue
        budget, problem = swap_budget_of(pool)
        if problem:
            problems.append(problem)
        ref = PoolRef(namespace, name, budget)
        for member in member_names(pool):
            key = f"{namespace}/{member}"
            first = members.get(key)
            if first is not None:
                problems.append(f"ModelServing {key}: a member of ModelPool {first.key}; {ref.key} also lists it")
                continue
            members[key] = ref
    return members, tuple(problems)


def _residents(status: Mapping[str, Any]) -> list[str]:
    found = [str(m) for m in _list(status.get("residentMembers")) if isinstance(m, str) and m]
    single = status.get("residentMember")
    if isinstance(single, str) and single and single not in found:
        found.append(single)
    return found


def pool_reason(pool: Mapping[str, Any] | None, member: str) -> str:
    """Why ``member`` of ``pool`` (the cached object, ``None`` when gone) is not served yet (see the docstring)."""
    if pool is None:
        return "the ModelPool no longer exists"
    where = f"ModelPool {_md(pool).get('namespace') or ''}/{_md(pool).get('name') or ''}"
    status = _dict(pool.get("status"))
    parts = [f"phase {status.get('phase') or 'unknown'}"]
    residents = _residents(status)
    parts.append(f"resident {', '.join(residents)}" if residents else "no member resident")
    swap = _dict(status.get("swap"))
    if swap:
        source = swap.get("from")
        moving = f"{source} -> {swap.get('to')}" if source else f"loading {swap.get('to')}"
        parts.append(f"swap {moving} at step {swap.get('step') or 'unknown'}")
    elif member not in residents:
        parts.append(f"{member} not resident and no swap started for it yet")
    for condition in _list(status.get("conditions")):
        condition = _dict(condition)
        if condition.get("type") == CONDITION_SWAP_DEFERRED and condition.get("status") == "True":
            reason, message = condition.get("reason") or "", condition.get("message") or ""
            parts.append(
                f"{CONDITION_SWAP_DEFERRED} {reason}: {message}" if message else f"{CONDITION_SWAP_DEFERRED} {reason}"
            )
    return f"{where}: " + "; ".join(parts)
