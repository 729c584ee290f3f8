"""How the client's kubernetes-asyncio ``ApiClient`` is tuned: sockets that notice dead peers, less work a request.

Guarantees (:func:`tune`, applied by :class:`~kthena_py.kube.client.KubeClient` to its ``ApiClient``):

* Every connection the pool opens has TCP keepalive (probes after :data:`KEEPALIVE_IDLE` seconds idle, every
  :data:`KEEPALIVE_INTERVAL`, :data:`KEEPALIVE_COUNT` misses) and ``TCP_USER_TIMEOUT`` (:data:`USER_TIMEOUT_MS`).
* aiohttp does not consult ``~/.netrc`` and the proxy variables on every request unless a proxy is configured.
* Request bodies skip kubernetes-asyncio's recursive sanitising walk (the client sends plain JSON values only) and
  are encoded by pydantic-core instead of :func:`json.dumps`.
* Nothing here changes what is sent or how answers are read: only sockets and CPU.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

from pydantic_core import to_json

__all__ = [
    "KEEPALIVE_COUNT",
    "KEEPALIVE_IDLE",
    "KEEPALIVE_INTERVAL",
    "USER_TIMEOUT_MS",
    "keepalive_socket",
    "pool_size",
    "set_keepalive",
    "tune",
]

KEEPALIVE_IDLE = 15
"""Seconds a connection is idle before the first TCP keepalive probe."""
KEEPALIVE_INTERVAL = 5
"""Seconds between keepalive probes."""
KEEPALIVE_COUNT = 3
"""Unanswered probes after which the kernel drops the connection."""
USER_TIMEOUT_MS = 30_000
"""``TCP_USER_TIMEOUT``: milliseconds sent data may stay unacknowledged before the connection is dropped."""


def tune(api_client: Any) -> None:
    """Apply every tuning of the module docstring to ``api_client``."""
    _skip_env_lookups(api_client)
    _enable_keepalive(api_client)
    _send_plain_json(api_client)


def pool_size(api_client: Any) -> int:
    """The connection pool's size as configured (aiohttp's default of 100 when it cannot be read)."""
    size = getattr(getattr(api_client, "configuration", None), "connection_pool_maxsize", None)
    return size if isinstance(size, int) and size > 0 else 100


def _skip_env_lookups(api_client: Any) -> None:
    """Stop aiohttp from consulting ~/.netrc and proxy variables on every request.

    kubernetes-asyncio opens its session with ``trust_env=True``, which costs two thread-pool hops per
    request (a measurable share of a busy manager's CPU). Proxies from the environment are honoured
    only when one is actually configured; the kubeconfig's ``proxy-url`` works either way.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")):
        return
    session = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False


def keepalive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A client socket with TCP keepalive and ``TCP_USER_TIMEOUT`` set (aiohttp's ``socket_factory``)."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=type_, proto=proto)
    try:
        set_keepalive(sock)
    except OSError:
        sock.close()
        raise
    return sock


def set_keepalive(sock: socket.socket) -> None:
    """Enable TCP keepalive with the module's timings (options a platform lacks are skipped)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
        ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS),
    ):
        option = getattr(socket, name, None)
        if option is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _plain(value: Any) -> Any:
    return value


class _CompactJson:
    """Stands in for :mod:`json` in kubernetes-asyncio's REST client, which uses it only to encode request bodies."""

    @staticmethod
    def dumps(body: Any) -> bytes:
        """The body as compact JSON, encoded by pydantic-core (about four times faster than :func:`json.dumps`)."""
        return to_json(body)


def _send_plain_json(api_client: Any) -> None:
    """Skip kubernetes-asyncio's recursive walk over every request body, query and header; encode bodies faster.

    The walk turns its generated model objects (and dates) into JSON-ready values; this client only ever sends
    plain dicts, lists, strings and numbers, for which it is the identity, yet it costs a few percent of a busy
    manager's CPU on pod bodies. The bodies are then encoded by pydantic-core instead of :func:`json.dumps`
    (2.5 % of the manager's CPU while a fleet is created).
    """
    if hasattr(api_client, "sanitize_for_serialization"):
        api_client.sanitize_for_serialization = _plain
    rest = sys.modules.get(type(getattr(api_client, "rest_client", None)).__module__)
    if rest is not None and getattr(rest, "json", None) is json:
        rest.json = _CompactJson  # type: ignore[attr-defined]


def _enable_keepalive(api_client: Any) -> None:
    """Make the pool's connector open its sockets with :func:`keepalive_socket`.

    kubernetes-asyncio builds its own ``TCPConnector``; aiohttp (>= 3.12) reads the connector's socket
    factory at every connect, so setting it here covers every connection the pool opens.
    """
    session = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    connector = getattr(session, "connector", None)
    if connector is not None and hasattr(connector, "_socket_factory"):
        connector._socket_factory = keepalive_socket
