"""Sharded replicas (issue 31): a replica's membership of a lease group and the slots it may reconcile.

The decisions are pure modules (no clock, no I/O): :mod:`.hashing` (the API server's namespace hash, 64 slots),
:mod:`.assignment` (slots over live members, fewest moves), :mod:`.membership` (the handover rule) and
:mod:`.selector` (``shardSelector`` ranges). :class:`~.member.ShardMember` keeps the cluster state they plan from.
The manager uses it with ``--sharding`` (controllers then reconcile only owned namespaces): see docs/sharding.md.
"""

from .member import ShardMember

__all__ = ["ShardMember"]
