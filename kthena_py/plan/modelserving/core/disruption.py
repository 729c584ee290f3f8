"""Units recorded as disrupted by evictions: their keys, and the check the targets apply.

Unit keys are Kthena's (the eviction tracker's, :mod:`kthena_py.plan.modelserving.eviction.tracker`, keys its entries
by them): ``ServingGroup/<namespace>/<ms>/<group>`` for a ServingGroup and
``Role/<namespace>/<ms>/<group>/<role>/<roleID>`` for one role instance.

Guarantees: pure and total. A ServingGroup counts as disrupted when its own key or the key of any of its role
instances is recorded; a role instance when its own key or its group's key is (:func:`unit_disrupted`). Keys of
another ModelServing or namespace never match a unit of this one.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["GROUP_PREFIX", "ROLE_PREFIX", "Disrupted", "disruption_check", "group_key", "role_key", "unit_disrupted"]

GROUP_PREFIX = "ServingGroup/"
ROLE_PREFIX = "Role/"

Disrupted = Callable[[str, str | None], bool]
"""Whether a unit is recorded as disrupted by an eviction: ``(group name, role id or None for the group)``."""


def group_key(namespace: str, ms: str, group: str) -> str:
    """The unit key of ServingGroup ``group`` (its name, e.g. ``llm-0``)."""
    return f"{GROUP_PREFIX}{namespace}/{ms}/{group}"


def role_key(namespace: str, ms: str, group: str, role: str, role_id: str) -> str:
    """The unit key of role instance ``role_id`` (e.g. ``decode-1``) of ``role`` in ServingGroup ``group``."""
    return f"{ROLE_PREFIX}{namespace}/{ms}/{group}/{role}/{role_id}"


def unit_disrupted(key: str, disrupted: frozenset[str] | set[str]) -> bool:
    """Whether unit ``key`` counts as disrupted given the disrupted keys.

    A ServingGroup counts as disrupted when its own key or the key of any of its role instances is recorded (a
    group missing a role instance is not whole); a role instance when its own key or its group's key is.
    """
    if key in disrupted:
        return True
    if key.startswith(GROUP_PREFIX):
        prefix = ROLE_PREFIX + key[len(GROUP_PREFIX) :] + "/"
        return any(other.startswith(prefix) for other in disrupted)
    if key.startswith(ROLE_PREFIX):
        parts = key[len(ROLE_PREFIX) :].split("/")
        return len(parts) == 5 and GROUP_PREFIX + "/".join(parts[:3]) in disrupted
    return False


def disruption_check(namespace: str, ms: str, disrupted: frozenset[str]) -> Disrupted:
    """A :data:`Disrupted` over the unit keys ``disrupted`` for the units of ModelServing ``namespace/ms``."""

    def check(group: str, role_id: str | None) -> bool:
        if not disrupted:
            return False
        if role_id is None:
            return unit_disrupted(group_key(namespace, ms, group), disrupted)
        role = role_id.rsplit("-", 1)[0]
        return unit_disrupted(role_key(namespace, ms, group, role, role_id), disrupted)

    return check
