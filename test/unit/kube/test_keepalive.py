"""Every connection the client opens has TCP keepalive and a user timeout."""

from __future__ import annotations

import socket

from kubernetes_asyncio.client import ApiClient, Configuration

from kthena_py.kube import KubeClient
from kthena_py.kube.transport import (
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE,
    KEEPALIVE_INTERVAL,
    USER_TIMEOUT_MS,
    keepalive_socket,
)


def test_keepalive_socket_options() -> None:
    sock = keepalive_socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("127.0.0.1", 0)))
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == KEEPALIVE_INTERVAL
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == KEEPALIVE_COUNT
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == USER_TIMEOUT_MS
    finally:
        sock.close()


async def test_the_client_pool_opens_keepalive_sockets() -> None:
    client = KubeClient(ApiClient(configuration=Configuration(host="https://127.0.0.1:1")))
    try:
        connector = client._api.rest_client.pool_manager.connector
        assert connector._socket_factory is keepalive_socket
    finally:
        await client.close()
