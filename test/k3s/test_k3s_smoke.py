"""Optional: the manager against K3s in Docker (testcontainers). Not part of hack/test.sh.

Runs only where a Docker engine answers and the ``k3s`` extra is installed; elsewhere it is skipped
with the reason. The real-apiserver tiers (envtest, cluster) are the proof; this is a convenience for
laptops with Docker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import NAMESPACES

pytestmark = pytest.mark.k3s


def _docker_available() -> bool:
    try:
        import docker  # type: ignore[import-not-found]

        docker.from_env().ping()
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _docker_available(), reason="no Docker engine (testcontainers K3s tier is optional)")
async def test_client_against_k3s(tmp_path: Path) -> None:
    from testcontainers.k3s import K3SContainer  # type: ignore[import-not-found]

    with K3SContainer() as k3s:
        path = tmp_path / "kubeconfig"
        path.write_text(k3s.config_yaml())
        client = await KubeClient.from_kubeconfig(str(path))
        try:
            names = [n["metadata"]["name"] for n in (await client.list(NAMESPACES)).items]
            assert "kube-system" in names
            assert yaml.safe_load(k3s.config_yaml())["clusters"]
        finally:
            await client.close()
        await asyncio.sleep(0)
