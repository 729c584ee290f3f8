"""The Events the ModelServing controllers record about ServingGroups and role instances.

Guarantees:

* Kthena's role events keep Kthena's reasons (``RoleCreating``, ``RoleRunning``, ``RoleDeleting``, type
  Normal) and message, ``Role <role>/<role-id> in ServingGroup <group> is now <Creating|Running|Deleting>``,
  and are one Event per role instance: never joined with another instance's message (``join=False``), so a
  tool that reads one sentence per Event, or counts Events per instance, sees what Kthena writes.
* kthena_py's own events about whole ServingGroups (``ServingGroupCreating`` ...) may be joined with others of
  the same reason recorded within the recorder's window (one Event naming several groups).
"""

from __future__ import annotations

from typing import Literal

from kthena_py.plan.modelserving.types import PlannedEvent

__all__ = ["KTHENA_ROLE_REASONS", "Phase", "group_event", "role_event", "role_message"]

Phase = Literal["Creating", "Running", "Deleting"]

KTHENA_ROLE_REASONS = frozenset({"RoleCreating", "RoleRunning", "RoleDeleting"})
"""The reasons Kthena records, one Event per role instance."""


def role_message(role: str, role_id: str, group: str, phase: Phase) -> str:
    """Kthena's message for a role instance's transition."""
    return f"Role {role}/{role_id} in ServingGroup {group} is now {phase}"


def role_event(role: str, role_id: str, group: str, phase: Phase) -> PlannedEvent:
    """``Role<Phase>`` for one role instance, an Event of its own (as Kthena)."""
    return PlannedEvent("Normal", f"Role{phase}", role_message(role, role_id, group, phase), join=False)


def group_event(group: str, phase: Phase) -> PlannedEvent:
    """``ServingGroup<Phase>`` for one ServingGroup (joinable with other groups' of the same reason)."""
    return PlannedEvent("Normal", f"ServingGroup{phase}", f"ServingGroup {group} is now {phase}")
