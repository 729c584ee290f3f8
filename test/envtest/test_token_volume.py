"""The service-account token volume a real API server adds to every pod: in the cluster, not in the manager's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import NAMESPACES, PODS, ResourceType
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.slim import SERVICE_ACCOUNT_VOLUME_PREFIX
from kthena_py.testing.controlplane import EnvTest
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

SERVICE_ACCOUNTS = ResourceType("", "v1", "ServiceAccount", "serviceaccounts")


def _pod(name: str, volumes: list[dict[str, object]]) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": {"app": "token-volume"}},
        "spec": {
            "containers": [{"name": "c", "image": "img", "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]}],
            "volumes": volumes,
        },
    }


async def test_the_cache_holds_a_pod_without_the_token_volume_the_api_server_added(tmp_path: Path) -> None:
    with EnvTest(tmp_path, service_account_admission=True) as env:
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        cache = SharedCache(kube)
        cache.informer(PODS)
        try:
            await kube.create(NAMESPACES, {"metadata": {"name": "tv"}})
            await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "default"}}, "tv")
            await kube.create(PODS, _pod("listed", [{"name": "scratch", "emptyDir": {}}]), "tv")
            await cache.start()
            assert await cache.wait_for_sync(30)
            await kube.create(PODS, _pod("watched", [{"name": "scratch", "emptyDir": {}}]), "tv")
            for name in ("listed", "watched"):
                served = await kube.get(PODS, name, "tv")
                volumes = served["spec"]["volumes"]
                token = [v for v in volumes if str(v["name"]).startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)]
                assert len(token) == 1 and "projected" in token[0], volumes  # what admission added
                cached = await eventually(lambda n=name: cache.get(PODS, n, "tv"), timeout=30)
                assert cached["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
                assert cached["spec"]["containers"] == served["spec"]["containers"]  # the token's mount stays
        finally:
            await cache.stop()
            await kube.close()
