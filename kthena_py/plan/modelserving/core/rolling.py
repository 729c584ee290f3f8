"""The arithmetic of a rolling update over one set of units (ServingGroups, or one role's instances in a group).

The same rules apply at both granularities; :mod:`kthena_py.plan.modelserving.core.targets` applies them to groups
(``ServingGroupRollingUpdate``) or to each role of each group (``RoleRollingUpdate``).

Guarantees:

* :func:`resolve_budget`: ``maxUnavailable`` rounds down, ``maxSurge`` and ``partition`` round up, all against
  ``replicas``; a malformed value resolves to its default (admission rejects it first). Budgets never go negative.
* :func:`plan_units` decides which ordinals should exist. Without a rollout it is exactly
  :func:`~kthena_py.plan.modelserving.core.scaling.plan_ordinals` for ``replicas``. While an outdated unit outside the
  partition is live, ``maxSurge`` extra ordinals are wanted (the lowest missing ones), created on the new
  revision. Once nothing outdated is left, the extra units stay until every ordinal below ``replicas`` that has no
  ready unit has one again (so the last replaced unit is re-created at its own ordinal while the surge still
  covers it), then the normal scale-down order removes the surplus: not ready first, cheap first, highest ordinal
  first. Any scale-down takes partition-protected units last.
* Partition protects the first ``partition`` *positions* of the ordered list of wanted ordinals (live units plus
  the ones about to be created), so a gap in the ordinals never shifts protection onto another unit.
* :func:`choose_updates` picks the outdated units to take down now. Outdated units that are not ready cost no
  availability and are always taken first (highest ordinal first); ready outdated units are taken (highest
  ordinal first) only while the ready units left stay at or above ``replicas - maxUnavailable``. So a rollout
  never makes more than ``maxUnavailable`` units unavailable on its own, and failures already count against that
  budget. Protected units and units being scaled away are never chosen; neither is a unit with a terminating pod
  (it is already on its way out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kthena_py.api.intstr import IntOrString, resolve_scaled
from kthena_py.plan.modelserving.core.scaling import (
    OrdinalPlan,
    UnitScore,
    missing_ordinals,
    plan_ordinals,
    scale_down_order,
)

__all__ = ["Budget", "UnitPlan", "UnitView", "choose_updates", "plan_units", "resolve_budget"]


@dataclass(frozen=True)
class Budget:
    """A resolved rolling-update budget."""

    max_unavailable: int = 1
    max_surge: int = 0
    partition: int = 0


def _resolve(value: IntOrString | None, total: int, round_up: bool, default: int) -> int:
    return resolve_scaled(
        value, max(total, 0), round_up=round_up, if_none=default, if_invalid=default, non_negative=True
    )


def resolve_budget(
    replicas: int,
    max_unavailable: IntOrString | None,
    max_surge: IntOrString | None,
    partition: IntOrString | None,
) -> Budget:
    """Resolve ``maxUnavailable`` (down), ``maxSurge`` (up) and ``partition`` (up) against ``replicas``."""
    return Budget(
        max_unavailable=_resolve(max_unavailable, replicas, False, 1),
        max_surge=_resolve(max_surge, replicas, True, 0),
        partition=_resolve(partition, replicas, True, 0),
    )


@dataclass(frozen=True)
class UnitView:
    """One observed unit, as the rolling-update arithmetic sees it."""

    ordinal: int
    live: bool
    """At least one pod is not terminating."""
    updated: bool
    """Every pod is on the target revision (or template hash)."""
    ready: bool
    """Complete, every pod Running and Ready, none terminating, not recorded as disrupted."""
    terminating: bool = False
    """At least one pod is terminating."""
    cost: int = 0


@dataclass(frozen=True)
class UnitPlan:
    """Which ordinals should exist and which are protected."""

    desired: tuple[int, ...]
    """Every ordinal that should have a unit, ascending (surge included)."""
    keep: tuple[int, ...]
    """Live units that stay, ascending."""
    remove: tuple[int, ...]
    """Live units to scale away, in the order chosen."""
    protected: frozenset[int]
    """Ordinals protected by the partition (they keep their revision)."""
    surge: bool
    """Whether surge units are wanted now."""
    outdated: tuple[int, ...]
    """Live, wanted, unprotected units that are not on the target revision, ascending."""


def _protected(live: Sequence[UnitView], replicas: int, partition: int) -> frozenset[int]:
    ordinals = sorted({unit.ordinal for unit in live})
    if len(ordinals) < replicas:
        ordinals = sorted([*ordinals, *missing_ordinals(set(ordinals), replicas - len(ordinals))])
    return frozenset(ordinals[: max(0, partition)])


def plan_units(units: Sequence[UnitView], replicas: int, budget: Budget, *, rollout_in_progress: bool) -> UnitPlan:
    """Decide the wanted ordinals of one set of units (see the module docstring).

    Args:
        units: The observed units (at most one per ordinal).
        replicas: The desired number of units.
        budget: The resolved budget.
        rollout_in_progress: Whether the ModelServing has not yet finished its current rollout (its status still
            names an older current revision); keeps the surge while replaced ordinals come back.

    Returns:
        The plan.
    """
    replicas = max(replicas, 0)
    live = [unit for unit in units if unit.live]
    protected = _protected(live, replicas, budget.partition)
    outdated_live = any(not unit.updated and unit.ordinal not in protected for unit in live)
    surge = budget.max_surge > 0 and (
        outdated_live or (rollout_in_progress and _surge_still_covers(units, live, replicas))
    )
    count = replicas + (budget.max_surge if surge else 0)
    scores = [UnitScore(unit.ordinal, unit.ready, unit.cost) for unit in live]
    if len(scores) > count and protected:
        # Scale-down takes unprotected units first (each side in the normal order), protected ones last.
        order = scale_down_order([u for u in scores if u.ordinal not in protected])
        order += scale_down_order([u for u in scores if u.ordinal in protected])
        gone = [u.ordinal for u in order[: len(scores) - count]]
        keep = tuple(sorted(u.ordinal for u in scores if u.ordinal not in gone))
        plan = OrdinalPlan(keep, (), tuple(gone))
    else:
        plan = plan_ordinals(scores, count)
    desired = set(plan.desired)
    outdated = tuple(
        sorted(
            unit.ordinal
            for unit in live
            if not unit.updated and unit.ordinal in desired and unit.ordinal not in protected
        )
    )
    return UnitPlan(plan.desired, plan.keep, plan.remove, protected, surge, outdated)


def _surge_still_covers(units: Sequence[UnitView], live: Sequence[UnitView], replicas: int) -> bool:
    """Whether a unit above ``replicas`` is live while an ordinal below it lacks a ready unit."""
    if not any(unit.ordinal >= replicas for unit in live):
        return False
    ready = {unit.ordinal for unit in units if unit.ready}
    return any(ordinal not in ready for ordinal in range(replicas))


def choose_updates(units: Sequence[UnitView], plan: UnitPlan, replicas: int, budget: Budget) -> tuple[int, ...]:
    """Pick the outdated units to take down now (see the module docstring).

    Args:
        units: The observed units.
        plan: Their :func:`plan_units` result.
        replicas: The desired number of units.
        budget: The resolved budget.

    Returns:
        Ordinals to take down, in the order chosen: not-ready ones first, then ready ones, each highest first.
    """
    by_ordinal = {unit.ordinal: unit for unit in units}
    desired = set(plan.desired)
    candidates = [by_ordinal[o] for o in plan.outdated if not by_ordinal[o].terminating]
    not_ready = sorted((u for u in candidates if not u.ready), key=lambda u: -u.ordinal)
    ready = sorted((u for u in candidates if u.ready), key=lambda u: -u.ordinal)
    available = sum(1 for u in units if u.ready and u.ordinal in desired)
    allowed = max(0, available - max(0, replicas - budget.max_unavailable))
    return tuple(u.ordinal for u in not_ready) + tuple(u.ordinal for u in ready[:allowed])
