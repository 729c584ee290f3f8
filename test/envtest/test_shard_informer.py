"""Informers with a ``shardSelector`` on the test tier's API server (``ShardedListAndWatch`` on).

Three informers, each selecting one of three slots of the raw namespace hash cut at the namespaces' quantiles
(:func:`plan_cuts`), hold exactly the objects of their slot's namespaces and receive only their watch events: a
change in every namespace reaches each informer for its third, and the process's watch-event counter grows by the
number of changes, not three times it. :meth:`Informer.select_shards` moves an informer to another selection while
it runs (leavers delivered as deletes, newcomers as adds), to none, and back to every namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS, NAMESPACES, SECRETS, ResourceType
from kthena_py.runtime import metrics
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.informer import Informer
from kthena_py.runtime.shards.cuts import plan_cuts, ranges_of_slots, slot_at
from kthena_py.runtime.shards.hashing import SPACE, fnv1a64
from kthena_py.runtime.shards.selector import shard_selector
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

LABEL = "kthena-py-test"


@dataclass
class Heard:
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def on_add(self, obj: KubeObject) -> None:
        self.added.append(key(obj))

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        pass

    def on_delete(self, obj: KubeObject) -> None:
        self.deleted.append(key(obj))


def key(obj: KubeObject) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def stored(informer: Informer) -> set[str]:
    return {key(o) for o in informer.store.values()}


def added_events() -> float:
    return (
        metrics.REGISTRY.get_sample_value("kthena_watch_events_total", {"resource": "configmaps", "type": "ADDED"})
        or 0.0
    )


async def test_informers_per_range_hold_and_hear_only_their_namespaces_and_follow_a_new_selection(
    kube: KubeClient, make_namespace: Callable[..., str]
) -> None:
    label = f"{LABEL}=shard-informer"
    namespaces = [make_namespace(f"shard-informer-{i}") for i in range(12)]
    for ns in namespaces:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "a", "labels": {LABEL: "shard-informer"}}}, ns)
    cuts = plan_cuts([fnv1a64(ns) for ns in namespaces], 3)
    slot_of = {ns: slot_at(fnv1a64(ns), cuts) for ns in namespaces}
    members = [sorted(ns for ns in namespaces if slot_of[ns] == slot) for slot in range(3)]
    assert [len(m) for m in members] == [4, 4, 4]  # the cuts give each slot a third
    selectors = [shard_selector(ranges_of_slots({slot}, cuts)) for slot in range(3)]

    informers = [Informer(kube, CONFIGMAPS, label_selector=label, shard_selector=s) for s in selectors]
    heard = [Heard() for _ in informers]
    for informer, h in zip(informers, heard, strict=True):
        informer.add_handler(h)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        for informer in informers:
            assert await informer.wait_for_sync(30)
        for informer, mine in zip(informers, members, strict=True):
            assert stored(informer) == {f"{ns}/a" for ns in mine}

        before = added_events()
        for ns in namespaces:
            await kube.create(CONFIGMAPS, {"metadata": {"name": "b", "labels": {LABEL: "shard-informer"}}}, ns)
        for informer, mine in zip(informers, members, strict=True):
            await eventually(
                lambda i=informer, m=mine: stored(i) == {f"{ns}/{n}" for ns in m for n in "ab"}, timeout=30
            )
        for h, mine in zip(heard, members, strict=True):
            assert sorted(k for k in h.added if k.endswith("/b")) == sorted(f"{ns}/b" for ns in mine)
        # each watch carried its third: twelve ADDED events in all, not thirty-six
        await asyncio.sleep(0.5)
        assert added_events() - before == len(namespaces)

        # informer 0 takes slot 1's selection: slot 0's objects leave as deletes, slot 1's arrive as adds
        first, first_heard = informers[0], heard[0]
        first.select_shards(selectors[1])
        await eventually(lambda: stored(first) == {f"{ns}/{n}" for ns in members[1] for n in "ab"}, timeout=30)
        assert sorted(first_heard.deleted) == sorted(f"{ns}/{n}" for ns in members[0] for n in "ab")
        assert {f"{ns}/{n}" for ns in members[1] for n in "ab"} <= set(first_heard.added)

        # no selection: nothing held, nothing listed; every namespace again: all 24
        first.select_shards("")
        await eventually(lambda: not stored(first), timeout=30)
        await kube.create(CONFIGMAPS, {"metadata": {"name": "c", "labels": {LABEL: "shard-informer"}}}, namespaces[0])
        await asyncio.sleep(1.0)
        assert not stored(first)
        first.select_shards(shard_selector([(0, SPACE)]))
        everything = {f"{ns}/{n}" for ns in namespaces for n in "ab"} | {f"{namespaces[0]}/c"}
        await eventually(lambda: stored(first) == everything, timeout=30)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_shared_cache_narrows_namespaced_types_to_the_selection_and_keeps_cluster_types_whole(
    kube: KubeClient, make_namespace: Callable[..., str]
) -> None:
    namespaces = [make_namespace(f"shard-cache-{i}") for i in range(8)]
    for ns in namespaces:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "a", "labels": {LABEL: "shard-cache"}}}, ns)
    cuts = plan_cuts([fnv1a64(ns) for ns in namespaces], 2)
    halves = [{ns for ns in namespaces if slot_at(fnv1a64(ns), cuts) == slot} for slot in range(2)]
    cache = SharedCache(kube, sharded=True)
    cache.select(CONFIGMAPS, f"{LABEL}=shard-cache")
    configmaps, names = cache.informer(CONFIGMAPS), cache.informer(NAMESPACES)
    await cache.start()
    try:
        assert await cache.wait_for_sync(30)
        assert await cache.wait_for_shard_selection(5)  # no selection: the first lists are the selection's
        assert {o["metadata"]["namespace"] for o in configmaps.store.values()} == set(namespaces)
        for half in halves:
            cache.select_shards(shard_selector(ranges_of_slots({0 if half is halves[0] else 1}, cuts)))
            assert await cache.wait_for_shard_selection(30)
            # as soon as the wait returns, the store holds exactly the selection: nothing of the other half
            assert {o["metadata"]["namespace"] for o in configmaps.store.values()} == half
            assert set(namespaces) <= {o["metadata"]["name"] for o in names.store.values()}  # cluster-scoped: whole
            assert names.shard_selector is None
        cache.select_shards("")
        assert await cache.wait_for_shard_selection(30)
        assert not configmaps.store.values()
        late = cache.informer(SECRETS)  # a type first used after the selection starts with it
        assert late.shard_selector == ""
    finally:
        await cache.stop()


async def test_a_type_the_server_does_not_serve_answers_a_new_selection_at_once(kube: KubeClient) -> None:
    # An optional informer whose CRD is not installed retries every 15 s; a replica that takes slots waits for every
    # informer to list the new selection, so the missing type must answer it at once, not after its retry period.
    missing = ResourceType("absent.kthena-py.io", "v1", "Absent", "absents")
    informer = Informer(kube, missing, shard_selector="", allow_missing=True)
    assert informer.missing_retry_seconds >= 10
    task = asyncio.create_task(informer.run())
    try:
        informer.select_shards(shard_selector([(0, SPACE)]))
        assert await informer.wait_for_selection(timeout=5)  # lists, finds the type missing, counts as listed
        informer.select_shards(shard_selector([(0, SPACE // 2)]))  # while it waits out its retry period
        assert await informer.wait_for_selection(timeout=3)
        assert informer.has_synced and not informer.store.values()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
