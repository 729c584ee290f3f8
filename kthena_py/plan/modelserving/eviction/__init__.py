"""The eviction budget of a ModelServing (``rolloutStrategy.evictionStrategy``), as pure functions.

:mod:`.tracker` reads and writes Kthena's disruption tracker (ConfigMap ``kthena-eviction-tracker-<ms>``) and
exposes :func:`disrupted_units`, the unavailability view rollout and eviction share; :mod:`.budget` turns the
observed ServingGroups into units and budgets and decides evictions; :mod:`.report` words the
``DisruptionAllowed`` condition.
"""

from .budget import (
    ALLOWED_REASONS,
    DENIED_REASONS,
    Budget,
    BudgetStatus,
    Target,
    Unit,
    Verdict,
    budget_statuses,
    budgets,
    decide,
    denial_message,
    evaluate,
    resolve_min_available,
    target_budget,
    target_of,
    unit_index,
)
from .report import CONDITION_TYPE, budget_condition
from .tracker import (
    ENTRIES_KEY,
    TRACKER_PREFIX,
    PodIdentity,
    TrackerEntry,
    UnitHealth,
    disrupted_units,
    format_expiry,
    group_key,
    next_expiry,
    parse_entries,
    parse_expiry,
    prune,
    render_entries,
    role_key,
    tracker_entries,
    tracker_name,
    unit_disrupted,
)

__all__ = [
    "ALLOWED_REASONS",
    "CONDITION_TYPE",
    "DENIED_REASONS",
    "ENTRIES_KEY",
    "TRACKER_PREFIX",
    "Budget",
    "BudgetStatus",
    "PodIdentity",
    "Target",
    "TrackerEntry",
    "Unit",
    "UnitHealth",
    "Verdict",
    "budget_condition",
    "budget_statuses",
    "budgets",
    "decide",
    "denial_message",
    "disrupted_units",
    "evaluate",
    "format_expiry",
    "group_key",
    "next_expiry",
    "parse_entries",
    "parse_expiry",
    "prune",
    "render_entries",
    "resolve_min_available",
    "role_key",
    "target_budget",
    "target_of",
    "tracker_entries",
    "tracker_name",
    "unit_disrupted",
    "unit_index",
]
