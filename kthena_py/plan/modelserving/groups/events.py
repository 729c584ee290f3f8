"""How the Events about ServingGroups and role instances are worded and grouped.

Guarantees:

* Kthena's role events keep Kthena's reasons (``RoleCreating``, ``RoleRunning``, ``RoleDeleting``, type
  Normal) and message, ``Role <role>/<role-id> in ServingGroup <group> is now <Creating|Running|Deleting>``
  (:func:`role_message`), and are one Event per role instance: :func:`joinable` is False for them, so the
  recorder never joins two instances' messages, and a tool that reads one sentence per Event, or counts
  Events per instance, sees what Kthena writes. A repeat of the same sentence still costs no extra Event.
* Every other reason (kthena_py's own: ``ServingGroupCreating``, ``RoleRecreating`` ...) is joinable: the
  recorder may write those recorded within its window as one Event naming several groups or instances.
"""

from __future__ import annotations

__all__ = ["KTHENA_ROLE_REASONS", "joinable", "role_message"]

KTHENA_ROLE_REASONS = frozenset({"RoleCreating", "RoleRunning", "RoleDeleting"})
"""The reasons Kthena records, one Event per role instance."""


def role_message(role: str, role_id: str, group: str, phase: str) -> str:
    """Kthena's message for a role instance's transition (``phase``: ``Creating``, ``Running``, ``Deleting``)."""
    return f"Role {role}/{role_id} in ServingGroup {group} is now {phase}"


def joinable(reason: str) -> bool:
    """Whether Events with ``reason`` may be joined with others of the same object and reason."""
    return reason not in KTHENA_ROLE_REASONS
