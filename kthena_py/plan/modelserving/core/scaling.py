"""Which ordinals (ServingGroups, or role instances within a group) should exist: scale up and scale down.

Guarantees (the same rules apply to groups and to role instances):

* Ordinals are never renumbered: every *live* unit (one with a non-terminating pod) is kept unless it is chosen
  for scale-down.
* Scale-up fills the lowest missing ordinals first (``[0, replicas)`` first, since live units occupy their own
  ordinals). An ordinal whose unit is still terminating may be chosen: the unit is then recreated at the same
  ordinal once its pods are gone, never renamed.
* Scale-down removes ``len(live) - replicas`` live units, not-ready units first, then the lowest summed
  ``controller.kubernetes.io/pod-deletion-cost``, then the highest ordinal. So a ready unit is never removed
  while a not-ready one is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = ["OrdinalPlan", "UnitScore", "missing_ordinals", "plan_ordinals", "scale_down_order"]


@dataclass(frozen=True)
class UnitScore:
    """A live unit as scale-down sees it."""

    ordinal: int
    ready: bool
    cost: int = 0


@dataclass(frozen=True)
class OrdinalPlan:
    """The outcome of :func:`plan_ordinals`."""

    keep: tuple[int, ...]
    """Live units that stay, ascending."""
    create: tuple[int, ...]
    """Ordinals without a live unit that should have one, ascending."""
    remove: tuple[int, ...]
    """Live units to delete, in the order they were chosen."""

    @property
    def desired(self) -> tuple[int, ...]:
        """Every ordinal that should exist, ascending."""
        return tuple(sorted(self.keep + self.create))


def missing_ordinals(existing: Collection[int], count: int) -> list[int]:
    """Return the ``count`` lowest non-negative ordinals not in ``existing``."""
    found: list[int] = []
    candidate = 0
    while len(found) < count:
        if candidate not in existing:
            found.append(candidate)
        candidate += 1
    return found


def scale_down_order(units: Sequence[UnitScore]) -> list[UnitScore]:
    """Sort units in scale-down preference: not ready first, then lowest cost, then highest ordinal."""
    return sorted(units, key=lambda unit: (unit.ready, unit.cost, -unit.ordinal))


def plan_ordinals(live: Sequence[UnitScore], replicas: int) -> OrdinalPlan:
    """Decide which ordinals to keep, create and remove.

    Args:
        live: The live units (at most one per ordinal).
        replicas: The desired number of units (negative counts as 0).

    Returns:
        The plan; ``len(plan.desired) == max(replicas, 0)``.
    """
    wanted = max(replicas, 0)
    if len(live) > wanted:
        removed = scale_down_order(live)[: len(live) - wanted]
        gone = {unit.ordinal for unit in removed}
        keep = tuple(sorted(unit.ordinal for unit in live if unit.ordinal not in gone))
        return OrdinalPlan(keep, (), tuple(unit.ordinal for unit in removed))
    keep = tuple(sorted(unit.ordinal for unit in live))
    return OrdinalPlan(keep, tuple(missing_ordinals(set(keep), wanted - len(keep))), ())
