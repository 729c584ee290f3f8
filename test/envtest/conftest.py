"""Fixtures for tests of kthena_py's own Kubernetes layer against the envtest tier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kthena_py.kube import KubeClient


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    """kthena_py's own client, as admin, for the test's tier."""
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        yield client
    finally:
        await client.close()
