"""What the swap planner reads: a pool's spec and recorded intent, and what is observed of each member.

Guarantees:

* :func:`parse_spec` and :func:`parse_state` read a pool as a raw dict (as the API server serves it), never
  raise, and fall back to the API's defaults (``slots`` 1, the idle-check path and metrics) for missing or
  unreadable fields; members keep their ``spec.members`` order, duplicates dropped (admission refuses them).
* :func:`parse_state` reads the intent the controller recorded in ``status``: the resident members in the order
  they became resident, the swap in progress (times as epoch seconds) and a standing ``SwapDeferred``.
  ``residents`` is ``None`` when the status never recorded any (a pool the controller has not yet adopted).
* ``swap_budget`` is ``spec.swapBudget`` in seconds (unreadable or not above zero: the API default, 300s).
* :func:`former_members` names the members the status still tracks (listed in ``status.members``, resident, or
  in the swap) that ``spec.members`` no longer lists: the controller keeps observing them (and counting them in
  its slot guard) until their pods are gone, but no longer writes their replicas.
* A :class:`Member` is *up* when it has replicas or pods (terminating pods included: a device plugin may free the
  GPU before the process exits, so only a member with no pods left holds no slot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.api.duration import DurationError, parse_duration
from kthena_py.api.modelpool import (
    CONDITION_SWAP_DEFERRED,
    DEFAULT_IDLE_METRICS,
    DEFAULT_IDLE_PATH,
    DEFAULT_SLOTS,
    DEFAULT_SWAP_BUDGET,
    STEP_DRAINING,
    STEP_LOADING,
    STEP_RELEASING,
    SwapStep,
)
from kthena_py.plan.modelpool.demand import parse_demand_time

__all__ = ["Member", "PoolSpec", "PoolState", "Swap", "former_members", "parse_spec", "parse_state"]

_STEPS: dict[str, SwapStep] = {STEP_DRAINING: STEP_DRAINING, STEP_RELEASING: STEP_RELEASING, STEP_LOADING: STEP_LOADING}


@dataclass(frozen=True)
class PoolSpec:
    """The parts of ``spec`` the controller acts on."""

    members: tuple[str, ...]
    default: str | None = None
    slots: int = DEFAULT_SLOTS
    node_selector: tuple[tuple[str, str], ...] = ()
    idle_port: int | None = None
    idle_path: str = DEFAULT_IDLE_PATH
    idle_metrics: tuple[str, ...] = DEFAULT_IDLE_METRICS
    swap_budget: float = parse_duration(DEFAULT_SWAP_BUDGET) / 1e9
    """Seconds a target may stay Loading before the pool reports the swap stalled."""


@dataclass(frozen=True)
class Swap:
    """A swap in progress: ``to`` is brought in, ``from_`` (when set) drained for it. Times are epoch seconds."""

    to: str
    step: SwapStep
    from_: str | None = None
    started: float | None = None
    drained: float | None = None
    released: float | None = None


@dataclass(frozen=True)
class PoolState:
    """The intent recorded in the pool's status."""

    residents: tuple[str, ...] | None = None
    swap: Swap | None = None
    deferred_reason: str | None = None
    deferred_message: str = ""


@dataclass(frozen=True)
class Member:
    """One member as observed: its ModelServing and its pods.

    Attributes:
        name: The ModelServing name.
        exists: The ModelServing exists (and is not being deleted).
        replicas: Its ``spec.replicas``.
        pods: Its pods present, terminating ones included.
        ready_pods: Its entry pods Running and Ready (not terminating).
        failed: One of its pods failed (phase Failed, or a container waiting in a crash loop or on an image).
        selects_pool_nodes: Its entry template selects the pool's ``nodeSelector`` labels.
        waiting: What its not-Ready pods wait for, when known (one line, for messages).
    """

    name: str
    exists: bool = True
    replicas: int = 0
    pods: int = 0
    ready_pods: int = 0
    failed: bool = False
    selects_pool_nodes: bool = True
    waiting: str = ""

    @property
    def up(self) -> bool:
        """It holds a slot: replicas above zero or any pod left."""
        return self.replicas > 0 or self.pods > 0

    @property
    def ready(self) -> bool:
        """It serves: replicas above zero and a Ready entry pod."""
        return self.replicas > 0 and self.ready_pods > 0


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_spec(pool: Mapping[str, Any]) -> PoolSpec:
    """The pool's spec (see the module docstring)."""
    spec = _dict(pool.get("spec"))
    members: list[str] = []
    for entry in spec.get("members") or []:
        name = _dict(_dict(entry).get("modelServingRef")).get("name")
        if isinstance(name, str) and name and name not in members:
            members.append(name)
    default = spec.get("default")
    slots = spec.get("slots")
    selector = _dict(spec.get("nodeSelector"))
    idle = _dict(spec.get("idleCheck"))
    port = idle.get("port")
    path = idle.get("path")
    metrics = [m for m in idle.get("metrics") or [] if isinstance(m, str) and m]
    return PoolSpec(
        members=tuple(members),
        default=default if isinstance(default, str) and default in members else None,
        slots=slots if isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1 else DEFAULT_SLOTS,
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        idle_port=port if isinstance(port, int) and 0 < port < 65536 else None,
        idle_path=path if isinstance(path, str) and path.startswith("/") else DEFAULT_IDLE_PATH,
        idle_metrics=tuple(metrics) or DEFAULT_IDLE_METRICS,
        swap_budget=_seconds(spec.get("swapBudget")),
    )


def _seconds(raw: Any) -> float:
    try:
        nanos = parse_duration(str(raw).strip()) if raw is not None else 0
    except DurationError:
        nanos = 0
    return nanos / 1e9 if nanos > 0 else PoolSpec.swap_budget


def former_members(pool: Mapping[str, Any], spec: PoolSpec) -> tuple[str, ...]:
    """Members the status tracks that ``spec.members`` no longer lists (see the module docstring)."""
    status = _dict(pool.get("status"))
    names = [_dict(m).get("name") for m in status.get("members") or []]
    names += list(status.get("residentMembers") or [])
    swap = _dict(status.get("swap"))
    names += [swap.get("to"), swap.get("from")]
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n and n not in spec.members))


def _swap(raw: Mapping[str, Any]) -> Swap | None:
    to = raw.get("to")
    step = _STEPS.get(str(raw.get("step")))
    if not isinstance(to, str) or not to or step is None:
        return None
    source = raw.get("from")
    return Swap(
        to=to,
        step=step,
        from_=source if isinstance(source, str) and source else None,
        started=parse_demand_time(raw.get("started")),
        drained=parse_demand_time(raw.get("drained")),
        released=parse_demand_time(raw.get("released")),
    )


def parse_state(pool: Mapping[str, Any]) -> PoolState:
    """The intent recorded in the pool's status (see the module docstring)."""
    status = _dict(pool.get("status"))
    raw_residents = status.get("residentMembers")
    residents: tuple[str, ...] | None = None
    if isinstance(raw_residents, list):
        residents = tuple(dict.fromkeys(r for r in raw_residents if isinstance(r, str) and r))
    deferred = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == CONDITION_SWAP_DEFERRED and c.get("status") == "True"
        ),
        None,
    )
    return PoolState(
        residents=residents,
        swap=_swap(_dict(status.get("swap"))),
        deferred_reason=str(deferred.get("reason")) if deferred else None,
        deferred_message=str(deferred.get("message") or "") if deferred else "",
    )
