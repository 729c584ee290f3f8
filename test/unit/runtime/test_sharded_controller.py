"""A sharded controller reconciles only the namespaces its replica owns, and gives the others up cleanly.

Pure engine behaviour on an in-memory cache (no API server): which requests are queued and reconciled, how a
release drains or cancels what is in flight, what a resync queues. The proof on a real API server with three
managers is test/envtest/test_sharded_managers.py.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import pytest

from kthena_py.kube.resources import CONFIGMAPS, PODS
from kthena_py.runtime import metrics
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Controller, _Handler, _Watch, owner_mapper
from kthena_py.runtime.reconcile import ForgetsNamespaces, Request
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.wait import eventually


class Blocking:
    """Counts reconciles per namespace; a request named ``block`` waits until ``go`` is set."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        self.inside = asyncio.Event()
        self.go = asyncio.Event()

    async def reconcile(self, request: Request) -> None:
        self.calls[request.namespace] += 1
        if request.name == "block":
            self.inside.set()
            await self.go.wait()
        self.finished[request.namespace] += 1


def filtered(controller: str, stage: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "kthena_shard_filtered_requests_total", {"controller": controller, "stage": stage}
    )
    return value or 0.0


async def _until(condition: Callable[[], bool]) -> None:
    await eventually(condition, timeout=5, interval=0.005)


async def test_only_owned_namespaces_are_reconciled_and_the_rest_is_counted() -> None:
    owned = {"mine", ""}
    rec = Blocking()
    ctrl = Controller("shard-drop", rec, SharedCache(FakeKube()), workers=2)
    ctrl.shard_by(lambda ns: ns in owned)
    await ctrl.start()
    try:
        for ns in ("mine", "theirs", "", "theirs"):
            ctrl.enqueue(Request(ns, "x"))
        await _until(lambda: ctrl.queue.in_flight == 0 and len(ctrl.queue) == 0)
        assert rec.calls == Counter({"mine": 1, "": 1})
        assert filtered("shard-drop", "queued") == 1  # the two "theirs" merged in the queue
    finally:
        await ctrl.stop(drain=False)


def test_a_change_in_a_namespace_not_owned_is_not_even_queued() -> None:
    queued: list[Request] = []

    class Queue:
        def add(self, key: Request, *, urgent: bool = False) -> None:
            queued.append(key)

        def add_after(self, key: Request, delay: float, *, retry: bool = True) -> None:
            queued.append(key)

    handler = _Handler(_Watch(PODS, owner_mapper(CONFIGMAPS), None), Queue(), "shard-handler", lambda ns: ns == "a")
    before = filtered("shard-handler", "event")
    for ns in ("a", "b"):
        owner = {"kind": "ConfigMap", "apiVersion": "v1", "name": "cm", "controller": True}
        handler.on_add({"metadata": {"namespace": ns, "name": "p", "ownerReferences": [owner]}})
    assert queued == [Request("a", "cm")]
    assert filtered("shard-handler", "event") == before + 1


@pytest.mark.parametrize("drains", [True, False])
async def test_a_release_lets_a_quick_reconcile_finish_and_cancels_a_slow_one(drains: bool) -> None:
    owned = {"a", "b"}
    rec = Blocking()
    ctrl = Controller(f"shard-release-{drains}", rec, SharedCache(FakeKube()), workers=1)
    ctrl.shard_by(lambda ns: ns in owned)
    await ctrl.start()
    try:
        ctrl.enqueue(Request("a", "block"))
        await asyncio.wait_for(rec.inside.wait(), 5)
        owned.discard("a")
        if drains:
            asyncio.get_running_loop().call_later(0.05, rec.go.set)  # finishes well within the drain
            await ctrl.release(drain_timeout=5)
            assert rec.finished["a"] == 1
        else:
            await ctrl.release(drain_timeout=0.05)  # never finishes: cancelled after the drain
            assert rec.finished["a"] == 0
        # the worker survives the cancellation and takes the next owned request; "a" is not retried
        rec.go.set()
        ctrl.enqueue(Request("b", "x"))
        await _until(lambda: rec.finished["b"] == 1)
        await asyncio.sleep(0.05)
        assert rec.calls["a"] == 1
    finally:
        await ctrl.stop(drain=False)


async def test_a_resync_queues_the_cached_objects_of_the_namespaces_taken_over() -> None:
    owned: set[str] = set()
    rec = Blocking()
    cache = SharedCache(FakeKube())
    ctrl = Controller("shard-resync", rec, cache, workers=1).for_(CONFIGMAPS)
    ctrl.shard_by(lambda ns: ns in owned)
    store = cache.informer(CONFIGMAPS).store
    for ns, name in (("a", "one"), ("a", "two"), ("b", "three")):
        store.upsert({"metadata": {"namespace": ns, "name": name, "resourceVersion": "1"}})
    await ctrl.start()  # replays the cache: nothing is owned yet, so nothing is queued
    try:
        await asyncio.sleep(0.05)
        assert rec.calls == Counter()
        owned.add("a")
        assert ctrl.resync(lambda ns: ns == "a") == 2
        await _until(lambda: rec.finished["a"] == 2)
        assert rec.calls["b"] == 0
    finally:
        await ctrl.stop(drain=False)


class Remembering(Blocking):
    """Keeps something per namespace and forgets it on demand (:class:`ForgetsNamespaces`)."""

    def __init__(self) -> None:
        super().__init__()
        self.kept = {"a", "b", "c"}

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        self.kept = {ns for ns in self.kept if not leaving(ns)}


async def test_a_release_has_the_reconciler_forget_every_namespace_no_longer_owned() -> None:
    owned = {"a", "b", "c"}
    rec = Remembering()
    assert isinstance(rec, ForgetsNamespaces)
    ctrl = Controller("shard-forget", rec, SharedCache(FakeKube()), workers=1)
    ctrl.shard_by(lambda ns: ns in owned)
    await ctrl.start()
    try:
        owned.discard("b")
        await ctrl.release(drain_timeout=0)  # nothing in flight: forgetting does not wait for a reconcile
        assert rec.kept == {"a", "c"}
    finally:
        await ctrl.stop(drain=False)
