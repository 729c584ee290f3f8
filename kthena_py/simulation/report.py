"""What a simulated rollout reports: each step's actions and availability, and the outcome.

Guarantees: plain frozen values (they compare equal when the runs did the same), printable as JSON through
:func:`dataclasses.asdict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kthena_py.plan.modelserving.core.rolling import Budget

__all__ = ["Outcome", "RolloutReport", "StepReport", "UnitAction"]


@dataclass(frozen=True)
class UnitAction:
    """A unit created in a step, and the revision it was created at."""

    unit: str
    revision: str


@dataclass(frozen=True)
class StepReport:
    """What one step did and the state it left (before its pods became ready)."""

    number: int
    take_down: tuple[str, ...] = ()
    """Outdated units the rollout took down (recreate), in the order chosen."""
    patched: tuple[str, ...] = ()
    """Outdated units the rollout patched in place (``updateMethod: InPlace``)."""
    held: tuple[str, ...] = ()
    """What role coordination held back during the step (``roleCoordination``), with the reason."""
    created: tuple[UnitAction, ...] = ()
    """Units (re)created within ``replicas``."""
    surge: tuple[UnitAction, ...] = ()
    """Units created beyond ``replicas`` (``maxSurge``)."""
    removed: tuple[str, ...] = ()
    """Units scaled away (surplus surge units, replicas lowered, roles no longer in the template)."""
    became_ready: tuple[str, ...] = ()
    """Units whose pods became ready at the end of the step."""
    available: int = 0
    """Complete and ready ServingGroups once the step's reconciles settled."""
    min_available: int = 0
    """The fewest complete and ready ServingGroups after any single plan of the step."""
    updated: int = 0
    """``status.updatedReplicas`` at the end of the step."""
    live: int = 0
    """``status.replicas`` (live ServingGroups) at the end of the step."""
    role_ready: tuple[tuple[str, int, int], ...] = ()
    """Under ``RoleRollingUpdate``: ``(role, ready instances, wanted instances)`` over every group."""
    min_role_ready: tuple[tuple[str, int, int], ...] = ()
    """Under ``RoleRollingUpdate``: the fewest ready instances of each role after any single plan of the step."""
    protected: tuple[str, ...] = ()
    """Outdated units kept by the partition."""
    condition: tuple[str, str, str] | None = None
    """``UpdateInProgress`` as ``(status, reason, message)``, or ``None`` when absent."""

    @property
    def acted(self) -> bool:
        """Whether a unit was taken down, created, removed or became ready."""
        return bool(self.take_down or self.patched or self.created or self.surge or self.removed or self.became_ready)


Outcome = Literal["complete", "partition", "stalled", "unfinished"]


@dataclass(frozen=True)
class RolloutReport:
    """The result of :func:`simulate_rollout`."""

    name: str
    namespace: str
    replicas: int
    role_granularity: bool
    budget: Budget
    """The group-level budget (``ServingGroupRollingUpdate``)."""
    role_budgets: tuple[tuple[str, Budget], ...]
    """The budget of each role (``RoleRollingUpdate``)."""
    old_revision: str
    new_revision: str
    steps: tuple[StepReport, ...]
    outcome: Outcome
    min_available: int
    """The fewest complete and ready ServingGroups at any moment of the rollout."""
    min_role_ready: tuple[tuple[str, int, int], ...] = ()
    """Under ``RoleRollingUpdate``: ``(role, fewest ready instances, wanted instances)`` over the rollout."""
