"""Which requests go first: the client's two lanes through one connection pool.

A controller-manager's requests are not equally urgent. A status write reports what users wait for (``kubectl
wait``), a Lease renewal keeps leadership, a watch keeps the cache alive: none of them may queue behind a fleet's
pod creates.

Guarantees:

* :func:`priority_request` reads a path as the API server does: a ``status`` subresource (of any kind) and every
  ``coordination.k8s.io`` request (Leases) are priority requests; a Namespace or object that is merely *named*
  ``status`` is not.
* :func:`bulk_slots`: of a pool of ``n`` connections, the other requests may hold all but
  :data:`RESERVED_CONNECTIONS` (at most a quarter of the pool, and always at least one), so priority requests and
  watches always find a connection.
"""

from __future__ import annotations

__all__ = ["RESERVED_CONNECTIONS", "bulk_slots", "priority_request"]

RESERVED_CONNECTIONS = 8
"""Connections of the pool that other requests leave to status requests, Leases and watches (at most a quarter)."""


def bulk_slots(pool: int) -> int:
    """How many of a pool's ``pool`` connections the requests outside the priority lane may hold together."""
    return max(1, pool - min(RESERVED_CONNECTIONS, pool // 4))


def priority_request(path: str) -> bool:
    """Whether a (non-watch) request to ``path`` goes in the priority lane: a ``status`` subresource or a Lease."""
    if "/status" not in path and "coordination.k8s.io" not in path:
        return False  # neither can be named without these (most requests: no split of the path)
    group, _, subresource = _resource_of(path)
    return subresource == "status" or group == "coordination.k8s.io"


_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


def _resource_of(path: str) -> tuple[str, str, str]:
    """``(group, resource, subresource)`` named by an API path (``""`` for what it does not name)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return "", "", ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        rest = rest[2:]  # namespaces/<ns>/<resource>/<name>/<subresource>
    padded = [*rest, "", "", ""]
    return group, padded[0], padded[2]
