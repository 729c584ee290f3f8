"""Shared fixtures: the real control-plane tiers and a fresh namespace per test.

* ``envtest`` / ``cluster``: session-scoped; each starts its tier once, in a directory under pytest's
  temporary directory (logs in ``<dir>/logs``), and stops it at the end of the session.
* ``kubectl_path`` / ``helm_path``: the tools built by ``hack/build-controlplane.sh`` (any tier).
* ``control_plane``: the tier of the current test: ``cluster`` for tests marked ``cluster``, else
  ``envtest``. ``kubeconfig``, ``make_namespace``, ``namespace`` and ``api_client`` build on it.

Tests marked ``envtest``/``cluster`` are skipped only when ``KTHENA_PY_SKIP_CONTROLPLANE=1``;
otherwise missing binaries fail them (build them with ``hack/build-controlplane.sh``).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import load_kube_config

from kthena_py.kube import KubeClient
from kthena_py.testing.controlplane import BinariesNotFoundError, ClusterTier, EnvTest, find_helm, find_kubectl

# Speed is measured in bench/, never asserted in tests: hypothesis's per-example deadline and its "too slow"
# health checks are timing assertions that fail on a loaded 2-core machine, so they are off for every test.
settings.register_profile("kthena-py", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kthena-py")

SKIP_ENV = "KTHENA_PY_SKIP_CONTROLPLANE"
REPO = Path(__file__).resolve().parent.parent


def project_crds() -> list[Path]:
    """The project's generated CRDs (manifests/crd), plus any listed in KTHENA_PY_EXTRA_CRDS (os.pathsep)."""
    paths = sorted((REPO / "manifests" / "crd").glob("workload.serving.volcano.sh_*.yaml"))
    paths += sorted((REPO / "manifests" / "crd").glob("serving.kthena-py.io_*.yaml"))
    extra = os.environ.get("KTHENA_PY_EXTRA_CRDS")
    if extra:
        paths += [Path(p) for p in extra.split(os.pathsep) if p]
    return paths


TIER_MARKERS = ("envtest", "cluster")


def _skip_requested() -> bool:
    return os.environ.get(SKIP_ENV) == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _skip_requested():
        return
    skip = pytest.mark.skip(reason=f"{SKIP_ENV}=1: real control-plane tests (envtest/cluster) skipped")
    for item in items:
        if any(item.get_closest_marker(m) for m in TIER_MARKERS):
            item.add_marker(skip)


def _built_tool(find: Callable[[], Path]) -> Path:
    """A tool built by hack/build-controlplane.sh: skipped with KTHENA_PY_SKIP_CONTROLPLANE=1, else must exist."""
    if _skip_requested():
        pytest.skip(f"{SKIP_ENV}=1: tools built by hack/build-controlplane.sh are not used")
    try:
        return find()
    except BinariesNotFoundError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def kubectl_path() -> Path:
    """kubectl of the control plane's Kubernetes version, from the binary cache (never PATH)."""
    return _built_tool(find_kubectl)


@pytest.fixture(scope="session")
def helm_path() -> Path:
    """helm, from the binary cache (never PATH)."""
    return _built_tool(find_helm)


@pytest.fixture(scope="session")
def envtest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvTest]:
    if _skip_requested():
        pytest.skip(f"{SKIP_ENV}=1")
    # PodTemplates are served without a watch cache so that informer tests can force 410 Gone
    # through an etcd compaction (see test/envtest/test_informer.py).
    with EnvTest(
        tmp_path_factory.mktemp("envtest"),
        crds=project_crds(),
        apiserver_args=["--watch-cache-sizes=podtemplates#0"],
    ) as env:
        yield env


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterTier]:
    if _skip_requested():
        pytest.skip(f"{SKIP_ENV}=1")
    with ClusterTier(tmp_path_factory.mktemp("cluster"), crds=project_crds()) as tier:
        yield tier


@pytest.fixture
def control_plane(request: pytest.FixtureRequest) -> EnvTest:
    """The tier this test runs against, chosen by its marker."""
    tier: EnvTest = request.getfixturevalue("cluster" if request.node.get_closest_marker("cluster") else "envtest")
    tier.check_alive()
    return tier


@pytest.fixture
def kubeconfig(control_plane: EnvTest) -> Path:
    """Admin kubeconfig of the test's tier."""
    return control_plane.kubeconfig_path


@pytest.fixture
def make_namespace(control_plane: EnvTest, request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """Factory: ``make_namespace(prefix=None) -> name`` creates a fresh namespace, deleted after the test."""
    created: list[str] = []

    def make(prefix: str | None = None) -> str:
        base = re.sub(r"[^a-z0-9-]+", "-", (prefix or request.node.name).lower()).strip("-")[:40].strip("-")
        name = f"{base or 'test'}-{uuid.uuid4().hex[:6]}"
        control_plane.client.create(
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kthena-py/test": "1"}},
            },
        )
        created.append(name)
        return name

    yield make
    for name in created:
        control_plane.client.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def namespace(make_namespace: Callable[..., str]) -> str:
    """A fresh namespace for this test."""
    return make_namespace()


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    """kthena_py's own client, as admin, for the test's tier."""
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def api_client(control_plane: EnvTest) -> AsyncIterator[ApiClient]:
    """A kubernetes_asyncio client (admin) for the test's tier."""
    conf = Configuration()
    await load_kube_config(
        config_file=str(control_plane.kubeconfig_path),
        client_configuration=conf,
        temp_file_path=str(control_plane.run_dir),
    )
    async with ApiClient(conf) as client:
        yield client
