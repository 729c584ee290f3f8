"""The catalog keeps a target's backends between requests and forgets them on every change of one of its pods."""

from __future__ import annotations

from kthena_py.activator import Activator
from kthena_py.activator.resources import MODELSERVINGS, PODS
from kthena_py.plan.activator.targets import Target
from kthena_py.testing.fake import FakeKube
from kthena_py.vocab.labels import SERVING_NAME

from .test_proxy import NS, entry_pod, modelserving, put, scene, wait_for


def target(activator: Activator, model: str) -> Target:
    found = activator.catalog.directory().resolve(model)
    assert found is not None
    return found


def pods_of(activator: Activator, model: str) -> list[str]:
    return [b.pod for b in activator.catalog.backends(target(activator, model))]


async def test_a_pod_turning_unready_then_ready_again_is_seen_at_once() -> None:
    async with scene(replicas=1) as (kube, _engine, activator, _url):
        put(kube, PODS, entry_pod("llm", "p0"))
        await wait_for(lambda: pods_of(activator, "llm") == ["p0"])
        assert activator.catalog.backends(target(activator, "llm")) is activator.catalog.backends(
            target(activator, "llm")
        )  # kept between reads
        put(kube, PODS, entry_pod("llm", "p0", ready=False))
        await wait_for(lambda: pods_of(activator, "llm") == [])
        put(kube, PODS, entry_pod("llm", "p0"))
        put(kube, PODS, entry_pod("llm", "p1", terminating=True))
        await wait_for(lambda: pods_of(activator, "llm") == ["p0"])
        await kube.delete(PODS, "p0", NS)
        await wait_for(lambda: pods_of(activator, "llm") == [])


async def test_a_pod_moved_to_another_modelserving_leaves_the_first() -> None:
    kube: FakeKube
    async with scene(replicas=1) as (kube, engine, activator, _url):
        kube.put(MODELSERVINGS, modelserving("other", engine.port, replicas=1))
        put(kube, PODS, entry_pod("llm", "p0"))
        await wait_for(lambda: pods_of(activator, "llm") == ["p0"])
        await wait_for(lambda: activator.catalog.directory().resolve("other") is not None)
        assert pods_of(activator, "other") == []
        moved = entry_pod("llm", "p0")
        moved["metadata"]["labels"][SERVING_NAME] = "other"
        put(kube, PODS, moved)
        await wait_for(lambda: pods_of(activator, "other") == ["p0"])
        assert pods_of(activator, "llm") == []
