"""The eviction webhook through FakeKube: grants, denials, the tracker's optimistic concurrency, lookup faults."""

from __future__ import annotations

import json
from typing import Any

from kthena_py.controllers.eviction.webhook import EvictionWebhook
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import AlreadyExists, Conflict, ServerError
from kthena_py.kube.resources import CONFIGMAPS, PODS
from kthena_py.plan.modelserving.eviction import ENTRIES_KEY, tracker_name
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents

from .scene import NOW, converge, eviction, ms_doc, pod_names

TRACKER = tracker_name("llama")


async def scene(
    replicas: int = 3, strategy: dict[str, Any] | None = None, **options: Any
) -> tuple[FakeKube, EvictionWebhook, RecordedEvents]:
    kube = FakeKube()
    await converge(kube, ms_doc(replicas, {"minAvailable": 2} if strategy is None else strategy))
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    kube.attach(cache)
    events = RecordedEvents()
    options.setdefault("wall_clock", lambda: NOW)
    return kube, EvictionWebhook(kube, cache, events, enabled=True, **options), events


def granted(kube: FakeKube) -> list[str]:
    tracker = kube.peek(CONFIGMAPS, TRACKER, "ns")
    entries = json.loads(tracker["data"][ENTRIES_KEY]) if tracker else {}
    return sorted(entry["triggerPodName"] for entry in entries.values())


def server_error(message: str) -> ServerError:
    return ServerError(500, "InternalError", message)


async def test_grants_within_the_budget_then_denies_with_429_and_an_event() -> None:
    kube, webhook, events = await scene()
    first, second, _ = pod_names(kube)
    assert (await webhook(eviction(first))).allowed
    assert granted(kube) == [first]
    denied = await webhook(eviction(second))
    assert not denied.allowed and denied.code == 429 and denied.reason == "TooManyRequests"
    assert "minAvailable (2)" in denied.message
    assert events.reasons() == ["EvictionDenied"] and events.events[0].name == "llama"
    assert granted(kube) == [first]


async def test_a_granted_pod_is_admitted_again_without_spending_more() -> None:
    kube, webhook, _ = await scene()
    first = pod_names(kube)[0]
    assert (await webhook(eviction(first))).allowed
    assert (await webhook(eviction(first))).allowed
    assert granted(kube) == [first]


async def test_dry_run_gets_the_answer_and_writes_nothing() -> None:
    kube, webhook, events = await scene()
    assert (await webhook(eviction(pod_names(kube)[0], dry_run=True))).allowed
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is None and not events.events


async def test_disabled_admits_without_reading_anything() -> None:
    kube, webhook, _ = await scene()
    webhook.enabled = False
    kube.calls.clear()
    assert (await webhook(eviction(pod_names(kube)[0]))).allowed
    assert kube.calls == []


async def test_without_an_eviction_strategy_nothing_is_spent() -> None:
    kube, webhook, _ = await scene(strategy={})
    ms = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    del ms["spec"]["rolloutStrategy"]
    kube.put(MODELSERVINGS, ms)
    for pod in pod_names(kube):
        assert (await webhook(eviction(pod))).allowed
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is None


async def test_a_conflict_on_the_tracker_write_decides_again_and_grants() -> None:
    kube, webhook, _ = await scene()
    injected: list[Call] = []

    def conflict_once(call: Call) -> None:
        if call.verb == "create" and call.rt == CONFIGMAPS and not injected:
            injected.append(call)
            raise Conflict(409, "Conflict", "injected: the tracker changed")

    kube.intercept(conflict_once)
    first = pod_names(kube)[0]
    assert (await webhook(eviction(first))).allowed
    assert granted(kube) == [first]
    assert len(injected) == 1 and len(kube.calls_of("create", CONFIGMAPS)) == 2
    assert len(kube.calls_of("get", CONFIGMAPS)) == 2  # the tracker was read again before deciding again


async def test_a_concurrent_grant_is_honoured_on_the_retry() -> None:
    """Another replica records a grant between our read and our write: our create meets AlreadyExists."""
    kube, webhook, _ = await scene(replicas=4)
    first, second, third, _ = pod_names(kube)
    raced: list[str] = []

    def other_replica_wins(call: Call) -> None:
        if call.verb == "create" and call.rt == CONFIGMAPS and not raced:
            raced.append(call.name)
            body = json.loads(call.body["data"][ENTRIES_KEY])
            (entry,) = body.values()
            entry["triggerPodName"] = second
            entry["triggerPodUID"] = (kube.peek(PODS, second, "ns") or {})["metadata"]["uid"]
            theirs = {**call.body, "data": {ENTRIES_KEY: json.dumps({"ServingGroup/ns/llama/llama-1": entry})}}
            kube.put(CONFIGMAPS, theirs)

    kube.intercept(other_replica_wins)
    assert (await webhook(eviction(first))).allowed  # 4 ready, one granted elsewhere: still 2 left after ours
    assert granted(kube) == [first, second]
    denied = await webhook(eviction(third))
    assert not denied.allowed and denied.code == 429


async def test_already_exists_from_a_racing_create_is_a_conflict_too() -> None:
    kube, webhook, _ = await scene()
    raised: list[int] = []

    def exists_once(call: Call) -> None:
        if call.verb == "create" and call.rt == CONFIGMAPS and not raised:
            raised.append(1)
            raise AlreadyExists(409, "AlreadyExists", "injected")

    kube.intercept(exists_once)
    assert (await webhook(eviction(pod_names(kube)[0]))).allowed


async def test_a_persistent_conflict_denies_with_tracker_conflict_after_the_deadline() -> None:
    kube, webhook, events = await scene(deadline=0.05)

    def always(call: Call) -> None:
        if call.verb == "create" and call.rt == CONFIGMAPS:
            raise Conflict(409, "Conflict", "injected: always stale")

    kube.intercept(always)
    denied = await webhook(eviction(pod_names(kube)[0]))
    assert not denied.allowed and denied.code == 429
    assert "failed to update ModelServing llama disruption tracker" in denied.message
    assert "injected: always stale" in denied.message
    assert len(kube.calls_of("create", CONFIGMAPS)) >= 2
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is None
    assert events.reasons() == ["EvictionDenied"]


async def test_a_failed_tracker_write_denies_without_retrying() -> None:
    kube, webhook, _ = await scene()

    def broken(call: Call) -> None:
        if call.verb == "create" and call.rt == CONFIGMAPS:
            raise server_error("etcd down")

    kube.intercept(broken)
    denied = await webhook(eviction(pod_names(kube)[0]))
    assert not denied.allowed and "etcd down" in denied.message
    assert len(kube.calls_of("create", CONFIGMAPS)) == 1


async def test_a_failed_pod_lookup_denies() -> None:
    kube, webhook, _ = await scene()

    def broken(call: Call) -> None:
        if call.verb == "get" and call.rt == PODS:
            raise server_error("no pods today")

    kube.intercept(broken)
    denied = await webhook(eviction(pod_names(kube)[0]))
    assert not denied.allowed and denied.code == 429 and "failed to get pod" in denied.message


async def test_a_failed_live_list_denies_and_spends_nothing() -> None:
    kube, webhook, _ = await scene()

    def broken(call: Call) -> None:
        if call.verb == "list" and call.rt == PODS:
            raise server_error("list failed")

    kube.intercept(broken)
    denied = await webhook(eviction(pod_names(kube)[0]))
    assert not denied.allowed and "failed to read ModelServing llama" in denied.message
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is None


async def test_grants_are_decided_on_live_pods_not_the_cache() -> None:
    """A pod that went unready is seen by the live list although the webhook's cache never heard of it."""
    kube, webhook, _ = await scene()
    first, second, _ = pod_names(kube)
    pod = kube.peek(PODS, second, "ns") or {}
    pod["status"]["conditions"][0]["status"] = "False"
    kube.put(PODS, pod)
    denied = await webhook(eviction(first))
    assert not denied.allowed and denied.code == 429


async def test_a_tracker_replaced_meanwhile_meets_a_conflict_and_the_retry_honours_the_other_grant() -> None:
    """The tracker exists; another replica grants between our read and our replace: the stale replace is a
    Conflict (the API server's resourceVersion precondition), and the decision made again denies."""
    kube, webhook, _ = await scene(replicas=4)
    first, second, third, _ = pod_names(kube)
    assert (await webhook(eviction(first))).allowed
    raced: list[int] = []

    def other_replica_grants_third(call: Call) -> None:
        if call.verb == "replace" and call.rt == CONFIGMAPS and not raced:
            raced.append(1)
            tracker = kube.peek(CONFIGMAPS, TRACKER, "ns") or {}
            entries = json.loads(tracker["data"][ENTRIES_KEY])
            (entry,) = entries.values()
            pod = kube.peek(PODS, third, "ns") or {}
            entries["ServingGroup/ns/llama/llama-2"] = {
                **entry,
                "triggerPodName": third,
                "triggerPodUID": pod["metadata"]["uid"],
            }
            kube.put(CONFIGMAPS, {**tracker, "data": {ENTRIES_KEY: json.dumps(entries)}})

    kube.intercept(other_replica_grants_third)
    denied = await webhook(eviction(second))
    assert raced == [1]
    replaces = kube.calls_of("replace", CONFIGMAPS)
    assert len(replaces) == 1  # the stale one; the second decision spends nothing
    assert not denied.allowed and denied.code == 429
    assert granted(kube) == [first, third]


async def test_a_pod_not_found_is_named_from_the_api_server_when_the_cache_lacks_its_namespace() -> None:
    """A sharded replica's cache may hold nothing of the pod's namespace; the webhook answers for it all the same:
    a protected ModelServing's pod being re-created under its name is granted and recorded, not let through free."""
    kube = FakeKube()
    await converge(kube, ms_doc(3, {"minAvailable": 2}))
    empty = SharedCache(kube, namespace="ns")  # holds nothing: no informer, as for another replica's namespace
    webhook = EvictionWebhook(kube, empty, RecordedEvents(), enabled=True, wall_clock=lambda: NOW)
    gone = pod_names(kube)[0]
    await kube.delete(PODS, gone, "ns")
    assert (await webhook(eviction(gone))).allowed
    assert granted(kube) == [gone]


async def test_a_failed_modelserving_list_for_a_pod_not_found_denies() -> None:
    kube = FakeKube()
    await converge(kube, ms_doc(3, {"minAvailable": 2}))
    webhook = EvictionWebhook(kube, SharedCache(kube, namespace="ns"), RecordedEvents(), enabled=True)
    gone = pod_names(kube)[0]
    await kube.delete(PODS, gone, "ns")

    def broken(call: Call) -> None:
        if call.verb == "list" and call.rt == MODELSERVINGS:
            raise server_error("etcd timeout")

    kube.intercept(broken)
    answer = await webhook(eviction(gone))
    assert not answer.allowed and "failed to list ModelServings" in answer.message
    assert granted(kube) == []
