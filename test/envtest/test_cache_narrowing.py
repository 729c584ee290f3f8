"""The manager caches only what a ModelServing owns: objects without the name label never reach it."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.controllers.resources import narrow_cache
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONFIGMAPS, PODS, SERVICES
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

NAME = "modelserving.volcano.sh/name"


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }


def service(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"clusterIP": "None"}}


async def test_only_labelled_objects_are_cached(kube: KubeClient, namespace: str) -> None:
    await kube.create(PODS, pod("ours", {NAME: "llm"}), namespace)
    await kube.create(PODS, pod("theirs", {"app": "web"}), namespace)
    await kube.create(SERVICES, service("ours", {NAME: "llm"}), namespace)
    await kube.create(SERVICES, service("theirs", {}), namespace)
    cache = SharedCache(kube, namespace=namespace)
    narrow_cache(cache)
    narrow_cache(cache)  # idempotent
    cache.informer(PODS)
    cache.informer(SERVICES)
    cache.informer(CONFIGMAPS)  # not narrowed
    await kube.create(CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace)
    await cache.start()
    try:
        assert await cache.wait_for_sync(30)
        assert [p["metadata"]["name"] for p in cache.list(PODS)] == ["ours"]
        assert [s["metadata"]["name"] for s in cache.list(SERVICES)] == ["ours"]
        assert "cm" in [c["metadata"]["name"] for c in cache.list(CONFIGMAPS)]
        # Losing the label takes the object out of the cache (the watch reports it deleted).
        await kube.patch(PODS, "ours", {"metadata": {"labels": {NAME: None}}}, namespace)
        await eventually(lambda: cache.list(PODS) == [], timeout=30, description="unlabelled pod dropped")
        await kube.patch(PODS, "theirs", {"metadata": {"labels": {NAME: "other"}}}, namespace)
        await eventually(
            lambda: [p["metadata"]["name"] for p in cache.list(PODS)] == ["theirs"],
            timeout=30,
            description="newly labelled pod cached",
        )
    finally:
        await cache.stop()


def test_narrowing_must_come_first() -> None:
    cache = SharedCache(FakeKube())  # never started
    cache.informer(PODS)
    with pytest.raises(RuntimeError, match="before the first informer"):
        narrow_cache(cache)
    other = SharedCache(FakeKube())
    other.select(SERVICES, "a")
    with pytest.raises(RuntimeError, match="already narrowed"):
        other.select(SERVICES, "b")
