"""``kthena-py manager --api-connections``: the size of the client's connection pool."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kthena_py.cli.manager import DEFAULT_API_CONNECTIONS, MIN_API_CONNECTIONS
from kthena_py.kube import KubeClient
from kthena_py.kube.transport import pool_size
from kthena_py.main import build_parser


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", *args])


def test_the_default_is_the_documented_one() -> None:
    assert parse().api_connections == DEFAULT_API_CONNECTIONS == 100


def test_a_size_is_taken() -> None:
    assert parse("--api-connections", "48").api_connections == 48
    assert parse("--api-connections", str(MIN_API_CONNECTIONS)).api_connections == MIN_API_CONNECTIONS


@pytest.mark.parametrize("value", ["many", "1.5", str(MIN_API_CONNECTIONS - 1), "0", "-4"])
def test_bad_sizes_are_refused_with_the_reason(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--api-connections", value)
    assert "--api-connections" in capsys.readouterr().err


async def test_the_client_pool_has_the_size_asked_for(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    client = await KubeClient.from_environment(str(kubeconfig), qps_pool=48)
    try:
        api = client._api
        assert pool_size(api) == 48
        assert api.rest_client.pool_manager.connector.limit == 48
    finally:
        await client.close()
