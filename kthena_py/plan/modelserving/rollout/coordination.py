"""Role coordination (``roleCoordination``, ``RoleRollingUpdate`` only): which role instances may start moving.

Coordination works per ServingGroup and decides which role instances may start their move to the update revision.

Inputs per participating role (one ServingGroup): its formal replica count ``N`` (partition-protected capacity
included, as the API reference says), its target-version Ready instances ``R``, the instances already *started*
towards the target ``S`` (updated live instances plus unprotected slots that will come back on the target: taken
down, missing, surge), its old-version capacity, and the candidates its own ``maxUnavailable`` budget would take
now (:func:`~kthena_py.plan.modelserving.core.rolling.choose_updates`).

Guarantees of :func:`coordinate` (pure, exact rational arithmetic):

* **Skew.** With ``baseline = min(R/N)`` over the participating roles, a role may have at most
  ``floor((baseline + maxSkew) * N)`` instances started. Whatever subset of the started instances becomes Ready
  first, the target-version Ready ratios of any two roles then differ by at most ``maxSkew`` as long as Ready
  instances stay Ready. When one instance of a role is a bigger step than ``maxSkew`` (``1/N > maxSkew``) that
  bound cannot hold; then, and only when nothing is in flight anywhere, the role furthest behind may start one
  instance if that keeps it within ``max(maxSkew, 1/N)`` of the baseline, so the bound becomes
  ``max(maxSkew, 1/N)`` over those roles and the rollout never deadlocks on rounding. Likewise, when a dependency
  keeps its last old replica for its callers (below) and the callers are held by the skew, the callers finish one
  instance at a time, within ``1/N`` of the dependency's own step. Overall the ratios never differ by more than
  ``max(maxSkew, 1/min(N))``, and by ``maxSkew`` exactly when every role's single instance is within it and no
  dependency has to retain old capacity.
* **Progress.** Whenever the started instances are all Ready, some role that has candidates and is not held by
  a dependency or by retained old capacity may start one (the baseline role always can when
  ``maxSkew * N >= 1``), so a rollout whose pods become Ready always finishes, except where partition-protected
  capacity caps a role's ratio: the other roles then stop within ``maxSkew`` of it (a coordinated canary).
* **Dependencies.** ``dependencies[].role`` calls the roles in ``dependsOn``. A graph root (a role with
  dependencies that no role depends on) does not make its first start until every role of its dependency
  closure has a target-version Ready instance; internal roles start freely. While a caller (direct or
  transitive) still has old-version instances, a dependency keeps at least one old-version Ready instance.
* Every role with candidates that gets none is reported in ``holds`` with the reason (``DependencyNotReady``,
  ``OldCapacityRetained`` or ``SkewLimit``) and a deterministic message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kthena_py.api.intstr import IntOrString
from kthena_py.vocab.conditions import REASON_DEPENDENCY, REASON_RETAINED, REASON_SKEW

__all__ = [
    "REASON_DEPENDENCY",
    "REASON_RETAINED",
    "REASON_SKEW",
    "Decision",
    "Hold",
    "RoleCounts",
    "coordinate",
    "parse_skew",
    "percent",
]


def parse_skew(value: IntOrString | None) -> Fraction | None:
    """``maxSkew`` as a fraction (``"25%"`` -> 1/4); ``None`` when absent or malformed (admission rejects it)."""
    if value is None or not isinstance(value.value, str) or not value.value.endswith("%"):
        return None
    digits = value.value[:-1]
    if not digits.isdigit():
        return None
    skew = Fraction(int(digits), 100)
    return skew if 0 < skew <= 1 else None


def percent(value: Fraction) -> str:
    """A ratio as a percentage for messages (``1/8`` -> ``12.5%``)."""
    return f"{float(value * 100):g}%"


@dataclass(frozen=True)
class RoleCounts:
    """One participating role within one ServingGroup."""

    role: str
    replicas: int
    """The formal replica count (partition-protected instances included)."""
    ready: int
    """Target-version instances that are Ready."""
    started: int
    """Instances started towards the target (updated and live, or unprotected slots coming back on it)."""
    old_ready: int = 0
    """Old-version live instances that are Ready (protected ones included)."""
    old_live: int = 0
    """Old-version live instances."""
    candidates: tuple[int, ...] = ()
    """Ordinals the role's own budget would take now, in order."""
    ready_candidates: frozenset[int] = frozenset()
    """The candidates that are Ready (taking them costs old capacity)."""

    @property
    def ratio(self) -> Fraction:
        """Target-version Ready ratio (1 for a role scaled to zero)."""
        if self.replicas <= 0:
            return Fraction(1)
        return Fraction(min(self.ready, self.replicas), self.replicas)


@dataclass(frozen=True)
class Hold:
    """A role whose candidates coordination holds back."""

    role: str
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    """What :func:`coordinate` allows."""

    allowed: dict[str, tuple[int, ...]]
    """Candidates each role may start now (a prefix of its candidates, in order)."""
    holds: tuple[Hold, ...] = ()
    baseline: Fraction = Fraction(1)
    ratios: dict[str, Fraction] = field(default_factory=dict)


def _closure(role: str, graph: Mapping[str, Sequence[str]]) -> list[str]:
    seen: list[str] = []
    stack = list(graph.get(role, ()))
    while stack:
        current = stack.pop(0)
        if current in seen or current == role:
            continue
        seen.append(current)
        stack.extend(graph.get(current, ()))
    return seen


def _callers(role: str, graph: Mapping[str, Sequence[str]]) -> list[str]:
    return [caller for caller in graph if role in _closure(caller, graph)]


def _take(counts: RoleCounts, limit: int, ready_limit: int) -> tuple[int, ...]:
    taken: list[int] = []
    ready_taken = 0
    for ordinal in counts.candidates:
        if len(taken) >= limit:
            break
        if ordinal in counts.ready_candidates:
            if ready_taken >= ready_limit:
                continue
            ready_taken += 1
        taken.append(ordinal)
    return tuple(taken)


def coordinate(roles: Sequence[RoleCounts], max_skew: Fraction, dependencies: Mapping[str, Sequence[str]]) -> Decision:
    """Decide which candidates of the participating roles of one ServingGroup may start now.

    Args:
        roles: The participating roles, in spec order.
        max_skew: ``maxSkew`` as a fraction in ``(0, 1]``.
        dependencies: ``role -> dependsOn`` (participating roles only).

    Returns:
        The allowed starts and the holds (see the module docstring).
    """
    by_name = {r.role: r for r in roles}
    graph = {role: [d for d in deps if d in by_name and d != role] for role, deps in dependencies.items()}
    graph = {role: deps for role, deps in graph.items() if role in by_name and deps}
    depended = {d for deps in graph.values() for d in deps}
    ratios = {r.role: r.ratio for r in roles}
    baseline = min(ratios.values(), default=Fraction(1))
    laggard_role = min(roles, key=lambda r: ratios[r.role]).role if roles else ""
    allowed: dict[str, tuple[int, ...]] = {}
    blocked: dict[str, Hold] = {}
    skew_held: list[RoleCounts] = []
    ready_limits: dict[str, int] = {}
    for counts in roles:
        name = counts.role
        ready_limit = len(counts.candidates)
        if name in depended:
            old_callers = [c for c in _callers(name, graph) if by_name[c].old_live > 0]
            if old_callers:
                ready_limit = max(0, counts.old_ready - 1)
                if ready_limit == 0 and not [o for o in counts.candidates if o not in counts.ready_candidates]:
                    blocked[name] = Hold(
                        name,
                        REASON_RETAINED,
                        f"role {name} keeps its last old-version replica while {old_callers[0]} has old replicas",
                    )
        ready_limits[name] = ready_limit
        if name in graph and name not in depended and counts.started == 0:
            waiting = [d for d in _closure(name, graph) if by_name[d].replicas > 0 and by_name[d].ready == 0]
            if waiting:
                blocked[name] = Hold(
                    name,
                    REASON_DEPENDENCY,
                    f"role {name} waits for target-version Ready capacity of {', '.join(waiting)}",
                )
        if name in blocked or not counts.candidates:
            allowed[name] = ()
            continue
        cap = math.floor((baseline + max_skew) * counts.replicas)
        taken = _take(counts, max(0, cap - counts.started), ready_limit)
        allowed[name] = taken
        if not taken:
            skew_held.append(counts)
    in_flight = any(r.started > min(r.ready, r.replicas) for r in roles)
    if not any(allowed.values()) and not in_flight and skew_held:
        # Nothing moves and nothing will: rounding (one instance is more than maxSkew) or a dependency that keeps
        # its last old replica for its callers. The role furthest behind takes one step, by at most one
        # instance's share of the roles involved.
        retained = [
            Fraction(1, max(by_name[h.role].replicas, 1)) for h in blocked.values() if h.reason == REASON_RETAINED
        ]
        for laggard in sorted(skew_held, key=lambda r: ratios[r.role]):
            slack = max([max_skew, Fraction(1, max(laggard.replicas, 1)), *retained])
            if Fraction(laggard.started + 1, max(laggard.replicas, 1)) - baseline <= slack:
                allowed[laggard.role] = _take(laggard, 1, ready_limits[laggard.role])
                break
    holds: list[Hold] = []
    for counts in roles:
        name = counts.role
        if not counts.candidates or allowed.get(name):
            continue
        if name in blocked:
            holds.append(blocked[name])
            continue
        behind = laggard_role if laggard_role != name else ""
        against = f" ({behind} at {percent(baseline)})" if behind else ""
        holds.append(
            Hold(
                name,
                REASON_SKEW,
                f"role {name} waits: target-version Ready {percent(ratios[name])}, baseline {percent(baseline)}"
                f"{against}, maxSkew {percent(max_skew)}",
            )
        )
    return Decision(allowed=allowed, holds=tuple(holds), baseline=baseline, ratios=ratios)
