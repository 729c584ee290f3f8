"""Whether the API server filters list and watch by ``shardSelector`` (KEP-5866), asked of the server itself.

Guarantees: :func:`server_filters_shards` sends one list of at most one Namespace with a selector covering the
whole hash space and answers True only when the reply carries ``metadata.shardInfo`` (the server applied it). A
server without the feature (older than 1.36, or the ``ShardedListAndWatch`` gate off) ignores the parameter and
answers without ``shardInfo``; an error or a timeout answers False too. It never raises an API error.
"""

from __future__ import annotations

import asyncio
from typing import Final

from kthena_py.kube import ApiError, KubeClient
from kthena_py.kube.resources import NAMESPACES

from .hashing import SPACE
from .selector import shard_selector

WHOLE_SPACE: Final = shard_selector([(0, SPACE)])


def shard_info_of(list_reply: dict[str, object]) -> object | None:
    """The ``metadata.shardInfo`` of a list reply (None when the server did not shard it)."""
    meta = list_reply.get("metadata")
    return meta.get("shardInfo") if isinstance(meta, dict) else None


async def server_filters_shards(client: KubeClient, *, timeout: float = 10.0) -> bool:
    """Whether the API server applies ``shardSelector`` to lists (and so to watches)."""
    try:
        reply = await asyncio.wait_for(
            client.request(
                "GET", NAMESPACES.path(None), query={"limit": 1, "shardSelector": WHOLE_SPACE}, timeout=timeout
            ),
            timeout,
        )
    except (ApiError, TimeoutError):
        return False
    return shard_info_of(reply) is not None
