"""Sharded replicas (issue 31): a replica's membership of a lease group and the slots it may reconcile.

:class:`~.member.ShardMember` keeps the cluster state that :mod:`kthena_py.plan.sharding.membership` plans from.
The manager does not use it yet (``--sharding`` is issue 31's remaining work): see docs/sharding.md.
"""

from .member import ShardMember

__all__ = ["ShardMember"]
