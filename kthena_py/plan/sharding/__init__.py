"""Sharding (pure): which replica of a sharded manager owns which namespaces (issue 31's building blocks).

The hash space of a namespace is the API server's own (KEP-5866, ``ShardedListAndWatch``): 64-bit FNV-1a of the
namespace's name. It is cut into :data:`~.hashing.SLOT_COUNT` equal slots; :mod:`.assignment` spreads the slots over
the live members (equal shares, fewest moves); :mod:`.selector` turns a member's slots into the ``shardSelector``
the API server filters with, and into the same test done on the client.
"""
