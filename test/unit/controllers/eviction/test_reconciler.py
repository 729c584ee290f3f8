"""The eviction budget reconciler through FakeKube: its condition, tracker pruning and confirmed releases."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.controllers.eviction.reconciler import FIELD_MANAGER, EvictionBudgetReconciler, condition_of
from kthena_py.controllers.eviction.webhook import DEFAULT_TTL, EvictionWebhook
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import Conflict
from kthena_py.kube.client import ObjectList
from kthena_py.kube.resources import CONFIGMAPS, CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.eviction import CONDITION_TYPE, IN_FLIGHT_SECONDS, tracker_name
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents

from .scene import NOW, converge, eviction, ms_doc, pod_names

TRACKER = tracker_name("llama")
REQUEST = Request("ns", "llama")
PAST_THE_HOLD = IN_FLIGHT_SECONDS + 0.001
"""A grant's hold is over: the tracker keeps its times to the millisecond, and the time is first rounded to the
microsecond, so about one grant in 2,500 reads back up to a microsecond after the hold's true end."""


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


async def scene(replicas: int = 3) -> tuple[FakeKube, EvictionBudgetReconciler, EvictionWebhook, Clock]:
    kube = FakeKube()
    await converge(kube, ms_doc(replicas, {"minAvailable": 2}))
    cache = SharedCache(kube, namespace="ns")
    for rt in (MODELSERVINGS, CONFIGMAPS, PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    kube.attach(cache)
    clock = Clock()
    reconciler = EvictionBudgetReconciler(kube, cache, wall_clock=clock)
    webhook = EvictionWebhook(kube, cache, RecordedEvents(), enabled=True, wall_clock=clock)
    return kube, reconciler, webhook, clock


def condition(kube: FakeKube) -> dict[str, Any] | None:
    return condition_of(kube.peek(MODELSERVINGS, "llama", "ns") or {})


def status_writes(kube: FakeKube) -> list[Call]:
    return [c for c in kube.calls_of("patch", MODELSERVINGS) if c.subresource == "status"]


async def replace_pod(kube: FakeKube, name: str) -> None:
    """The evicted pod goes; the ServingGroup planner's replacement comes up Ready."""
    await kube.delete(PODS, name, "ns")
    await converge(kube, kube.peek(MODELSERVINGS, "llama", "ns") or {})


async def test_the_condition_is_applied_once_by_its_own_field_manager() -> None:
    kube, reconciler, _, _ = await scene()
    await reconciler.reconcile(REQUEST)
    found = condition(kube)
    assert found is not None and found["status"] == "True"
    (write,) = status_writes(kube)
    assert write.options["patch_type"] == "apply" and write.options["field_manager"] == FIELD_MANAGER
    await reconciler.reconcile(REQUEST)  # converged: the cache shows the condition, nothing is written
    assert len(status_writes(kube)) == 1


async def test_the_condition_keeps_other_managers_conditions() -> None:
    kube, reconciler, _, _ = await scene()
    other = {"type": "Available", "status": "True", "reason": "AllGroupsReady", "message": "", "lastTransitionTime": ""}
    body = {"metadata": {"name": "llama", "namespace": "ns"}, "status": {"conditions": [other]}}
    await kube.apply(MODELSERVINGS, body, field_manager="kthena-py-modelserving", subresource="status")
    await reconciler.reconcile(REQUEST)
    types = [c["type"] for c in (kube.peek(MODELSERVINGS, "llama", "ns") or {})["status"]["conditions"]]
    assert sorted(types) == sorted(["Available", CONDITION_TYPE])


async def test_a_grant_shows_in_the_condition_and_requeues_for_its_expiry() -> None:
    kube, reconciler, webhook, _ = await scene()
    assert (await webhook(eviction(pod_names(kube)[0]))).allowed
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after is not None
    assert 0 < result.requeue_after <= DEFAULT_TTL + 0.5
    assert (condition(kube) or {})["status"] == "False"
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is not None


async def test_an_expired_grant_is_pruned_without_a_live_list() -> None:
    kube, reconciler, webhook, clock = await scene()
    assert (await webhook(eviction(pod_names(kube)[0]))).allowed
    clock.now += DEFAULT_TTL + 1
    kube.calls.clear()
    assert await reconciler.reconcile(REQUEST) is None
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is None
    assert kube.calls_of("list", PODS) == []


async def test_a_recovered_unit_is_held_while_the_api_server_may_still_act_on_its_grant() -> None:
    kube, reconciler, webhook, clock = await scene()
    evicted = pod_names(kube)[0]
    assert (await webhook(eviction(evicted))).allowed
    await replace_pod(kube, evicted)
    clock.now += IN_FLIGHT_SECONDS - 1
    result = await reconciler.reconcile(REQUEST)
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is not None
    assert result is not None and result.requeue_after == pytest.approx(1.5, abs=0.01)  # the end of the hold (ms)


async def test_a_recovered_unit_is_released_after_a_live_list_confirms_it() -> None:
    kube, reconciler, webhook, clock = await scene()
    evicted = pod_names(kube)[0]
    assert (await webhook(eviction(evicted))).allowed
    await replace_pod(kube, evicted)
    clock.now += PAST_THE_HOLD
    kube.calls.clear()
    await reconciler.reconcile(REQUEST)
    assert len(kube.calls_of("list", PODS)) == 1
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is None
    assert (condition(kube) or {})["status"] == "True"


async def test_a_release_the_api_server_does_not_confirm_is_not_made() -> None:
    """The cache shows the unit recovered; the live list still has the granted pod: the grant stays."""
    kube, reconciler, webhook, clock = await scene()
    evicted = pod_names(kube)[0]
    assert (await webhook(eviction(evicted))).allowed
    before = await kube.list_all(PODS, "ns")
    await replace_pod(kube, evicted)
    clock.now += PAST_THE_HOLD

    def stale_list(call: Call) -> ObjectList | None:
        return before if call.verb == "list" and call.rt == PODS else None

    kube.intercept(stale_list)
    await reconciler.reconcile(REQUEST)
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is not None


async def test_a_tracker_conflict_requeues_instead_of_overwriting() -> None:
    kube, reconciler, webhook, clock = await scene()
    assert (await webhook(eviction(pod_names(kube)[0]))).allowed
    clock.now += DEFAULT_TTL + 1

    def conflict(call: Call) -> None:
        if call.verb == "delete" and call.rt == CONFIGMAPS:
            raise Conflict(409, "Conflict", "injected: the webhook wrote meanwhile")

    kube.intercept(conflict)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after == 0.5
    assert kube.peek(CONFIGMAPS, TRACKER, "ns") is not None


async def test_the_condition_goes_with_the_eviction_strategy() -> None:
    kube, reconciler, _, _ = await scene()
    await reconciler.reconcile(REQUEST)
    assert condition(kube) is not None
    ms = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    await kube.patch(MODELSERVINGS, "llama", {"spec": {"rolloutStrategy": None}}, "ns")
    assert ms["metadata"]["generation"] < (kube.peek(MODELSERVINGS, "llama", "ns") or {})["metadata"]["generation"]
    await reconciler.reconcile(REQUEST)
    assert condition(kube) is None
    (removal,) = [c for c in status_writes(kube) if c.options["patch_type"] == "json"]
    assert removal.body[0]["op"] == "test"


async def test_a_deleted_modelserving_is_left_alone() -> None:
    kube, reconciler, _, _ = await scene()
    await kube.delete(MODELSERVINGS, "llama", "ns")
    kube.calls.clear()
    assert await reconciler.reconcile(REQUEST) is None
    assert kube.calls == []
