"""What a user sees of an eviction budget: the ``DisruptionAllowed`` condition of the ModelServing.

Guarantees:

* Pure and deterministic: the same budgets give the same condition, so a converged ModelServing is never
  rewritten.
* ``status`` is ``True`` when every budget allows at least one more disruption (a drain can evict one pod of
  any protected unit now), else ``False``; ``reason`` is ``SufficientReady`` / ``InsufficientReady`` (after the
  PodDisruptionBudget's ``SufficientPods`` / ``InsufficientPods``), or ``NoProtectedUnits`` when nothing is
  protected (no ServingGroups yet, or no instance of a protected role).
* The message names the level and, per budget, the ready units, the disrupted ones and the threshold; budgets
  that are fully available are summarised, those that block are listed first (at most
  :data:`MAX_LISTED`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kthena_py.api.modelserving import ProtectionLevelType
from kthena_py.vocab.conditions import (
    DISRUPTION_ALLOWED,
    REASON_INSUFFICIENT_READY,
    REASON_NO_PROTECTED_UNITS,
    REASON_SUFFICIENT_READY,
)

from .budget import BudgetStatus

__all__ = ["CONDITION_TYPE", "MAX_LISTED", "budget_condition"]

CONDITION_TYPE = DISRUPTION_ALLOWED
MAX_LISTED = 12


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _scope(status: BudgetStatus) -> str:
    text = f"{status.group} {status.role}: {status.ready}/{status.total} ready"
    if status.disrupted:
        text += f", {status.disrupted} disrupted"
    return f"{text}, minAvailable {status.min_available}, {status.allowed} allowed"


def budget_condition(level: ProtectionLevelType, statuses: Sequence[BudgetStatus]) -> tuple[bool, str, str]:
    """Return ``(status, reason, message)`` of the ``DisruptionAllowed`` condition.

    Args:
        level: The protection level.
        statuses: The budgets (:func:`~kthena_py.plan.modelserving.eviction.budget_statuses`).
    """
    if not statuses:
        what = "no ServingGroup" if level == "ServingGroup" else "no instance of a protected role"
        return True, REASON_NO_PROTECTED_UNITS, f"{level} level: {what} to protect"
    ok = all(status.allowed > 0 for status in statuses)
    reason = REASON_SUFFICIENT_READY if ok else REASON_INSUFFICIENT_READY
    if level == "ServingGroup":
        (status,) = statuses
        text = f"ServingGroup level: {status.ready} of {status.total} ServingGroups ready"
        if status.disrupted:
            text += f" ({status.disrupted} disrupted)"
        text += f", minAvailable {status.min_available}: {_plural(status.allowed, 'eviction')} allowed"
        return ok, reason, text
    blocked = [status for status in statuses if status.allowed == 0]
    listed = (blocked or list(statuses))[:MAX_LISTED]
    head = f"Role level: {len(statuses) - len(blocked)} of {len(statuses)} role budgets allow an eviction"
    rest = len(blocked or statuses) - len(listed)
    tail = f"; and {rest} more" if rest > 0 else ""
    label = "blocked" if blocked else "budgets"
    return ok, reason, f"{head}; {label}: " + "; ".join(_scope(status) for status in listed) + tail
