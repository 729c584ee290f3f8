"""Who owns which slot and namespace, as a sharded lease group's slot-map Lease records it (for tests' assertions).

Guarantees: :class:`SlotOwners` reads the Lease the way the replicas do (:func:`~kthena_py.runtime.shards.member.
read_slot_map`, :func:`~kthena_py.runtime.shards.member.namespace_owner`) and names owners by their identity without
the ``@<incarnation>`` suffix, so a test compares them with the identities it started replicas with.
"""

from __future__ import annotations

from typing import Any

from kthena_py.runtime.shards.member import namespace_owner, read_slot_map

__all__ = ["SlotOwners"]


class SlotOwners(dict[int, str]):
    """Slot -> owner identity, as the slot map's Lease records it; :meth:`of` names a namespace's owner."""

    def __init__(self, lease: dict[str, Any]) -> None:
        super().__init__({slot: owner.split("@")[0] for slot, owner in read_slot_map(lease).items()})
        self.lease = lease

    def of(self, namespace: str) -> str:
        """The identity owning ``namespace`` (by the slots the Lease records: raw cuts or mixed hash)."""
        return (namespace_owner(self.lease, namespace) or "").split("@")[0]
