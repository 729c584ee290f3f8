"""``SharedCache.wait_for``: woken by the watched objects' deliveries only, bounded by its timeout."""

from __future__ import annotations

import asyncio

from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS, SECRETS
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import FakeKube

from .informer_events import deliver


def _cm(name: str, rv: str, kind_ns: str = "ns") -> KubeObject:
    return {"kind": "ConfigMap", "metadata": {"name": name, "namespace": kind_ns, "resourceVersion": rv, "uid": "u"}}


def _deliver(cache: SharedCache, obj: KubeObject) -> None:
    deliver(cache, CONFIGMAPS, obj)


async def test_wait_for_is_woken_only_by_its_objects() -> None:
    cache = SharedCache(FakeKube())
    cache.informer(CONFIGMAPS)
    looks = 0

    def shows_rv_3() -> bool:
        nonlocal looks
        looks += 1
        cached = cache.get(CONFIGMAPS, "mine", "ns")
        return cached is not None and cached["metadata"]["resourceVersion"] == "3"

    waiting = asyncio.create_task(cache.wait_for([(CONFIGMAPS, "mine", "ns")], shows_rv_3, 30))
    await asyncio.sleep(0.05)
    assert looks == 1  # once at the start, no polling since
    for i in range(20):
        _deliver(cache, _cm(f"other-{i}", "1"))
    _deliver(cache, _cm("mine", "2"))
    await asyncio.sleep(0.01)
    assert looks == 2 and not waiting.done()  # woken once, by its own object, which is not there yet
    _deliver(cache, _cm("mine", "3"))
    assert await asyncio.wait_for(waiting, 5) is True
    assert looks == 3
    assert not cache._waiters._by_object  # unregistered


async def test_wait_for_times_out_and_unregisters() -> None:
    cache = SharedCache(FakeKube())
    cache.informer(CONFIGMAPS)
    assert not await cache.wait_for([(CONFIGMAPS, "never", "ns"), (SECRETS, "s", "ns")], lambda: False, 0.05)
    assert not cache._waiters._by_object
    assert await cache.wait_for([], lambda: True, 0.0)
