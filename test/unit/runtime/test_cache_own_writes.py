"""``SharedCache.record_write``: reads see an own write until the informer catches up, and never anything older."""

from __future__ import annotations

import asyncio

from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS
from kthena_py.runtime.cache import OWN_WRITE_TTL, SharedCache
from kthena_py.runtime.clock import FakeClock
from kthena_py.testing.fake import FakeKube

from .informer_events import deliver, deliver_deletion


def _cm(rv: str, *, uid: str = "u", data: str = "", name: str = "cm") -> KubeObject:
    return {
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": uid, "managedFields": [{}]},
        "data": {"v": data or rv},
    }


def _deliver(cache: SharedCache, obj: KubeObject) -> None:
    deliver(cache, CONFIGMAPS, obj)


def _gone(cache: SharedCache, obj: KubeObject) -> None:
    deliver_deletion(cache, CONFIGMAPS, obj)


def _read(cache: SharedCache) -> str | None:
    got = cache.get(CONFIGMAPS, "cm", "ns")
    return None if got is None else str(got["data"]["v"])


def _cache() -> tuple[SharedCache, FakeClock]:
    clock = FakeClock()
    cache = SharedCache(FakeKube(), clock=clock)  # never started
    cache.informer(CONFIGMAPS)
    return cache, clock


def test_an_own_write_is_read_until_the_informer_delivers_it_and_lists_show_the_store() -> None:
    cache, _ = _cache()
    _deliver(cache, _cm("5"))
    cache.record_write(CONFIGMAPS, _cm("9"))
    assert _read(cache) == "9"
    written = cache.get(CONFIGMAPS, "cm", "ns")
    assert written is not None and "managedFields" not in written["metadata"]  # slimmed like stored objects
    assert [o["data"]["v"] for o in cache.list(CONFIGMAPS)] == ["5"]
    _deliver(cache, _cm("7", data="someone else's, before ours"))  # an older change still on its way
    assert _read(cache) == "9"
    _deliver(cache, _cm("9"))  # the informer caught up: the store is read again, the record is gone
    assert _read(cache) == "9" and not len(cache._own)
    _deliver(cache, _cm("11", data="newer"))
    assert _read(cache) == "newer"


def test_a_newer_store_version_wins_even_before_the_handler_runs() -> None:
    cache, _ = _cache()
    _deliver(cache, _cm("5"))
    cache.record_write(CONFIGMAPS, _cm("9"))
    cache.informer(CONFIGMAPS).store.upsert(_cm("12", data="newer"))  # stored, handlers not called yet
    assert _read(cache) == "newer"


def test_nothing_is_recorded_when_the_store_already_shows_it_or_does_not_hold_the_object() -> None:
    cache, _ = _cache()
    cache.record_write(CONFIGMAPS, _cm("3"))  # not in the store at all
    assert _read(cache) is None and not len(cache._own)
    _deliver(cache, _cm("5"))
    cache.record_write(CONFIGMAPS, _cm("5", data="same version"))
    cache.record_write(CONFIGMAPS, _cm("4", data="older"))
    cache.record_write(CONFIGMAPS, _cm("9", uid="another", data="a replacement"))
    assert _read(cache) == "5" and not len(cache._own)


def test_a_deleted_or_replaced_object_is_never_brought_back() -> None:
    cache, _ = _cache()
    _deliver(cache, _cm("5"))
    cache.record_write(CONFIGMAPS, _cm("9"))
    _gone(cache, _cm("5"))
    assert _read(cache) is None and not len(cache._own)
    _deliver(cache, _cm("6"))
    cache.record_write(CONFIGMAPS, _cm("9"))
    _deliver(cache, _cm("10", uid="replacement", data="replacement"))
    assert _read(cache) == "replacement" and not len(cache._own)


def test_an_own_write_stops_counting_after_its_ttl() -> None:
    cache, clock = _cache()
    _deliver(cache, _cm("5"))
    cache.record_write(CONFIGMAPS, _cm("9"))
    clock.advance(OWN_WRITE_TTL - 1)
    assert _read(cache) == "9"
    clock.advance(1)
    assert _read(cache) == "5" and not len(cache._own)


def test_a_field_selected_informer_is_not_overlaid() -> None:
    cache, _ = _cache()
    _deliver(cache, _cm("5"))
    cache.record_write(CONFIGMAPS, _cm("9"))
    assert cache.get(CONFIGMAPS, "cm", "ns", field_selector="metadata.name=cm") is None  # its own, empty store
    assert _read(cache) == "9"


async def test_waiters_look_again_when_an_own_write_is_recorded() -> None:
    cache, _ = _cache()
    _deliver(cache, _cm("5"))
    waiting = asyncio.create_task(cache.wait_for([(CONFIGMAPS, "cm", "ns")], lambda: _read(cache) == "9", 30))
    await asyncio.sleep(0)
    assert not waiting.done()
    cache.record_write(CONFIGMAPS, _cm("9"))
    assert await asyncio.wait_for(waiting, 5) is True
