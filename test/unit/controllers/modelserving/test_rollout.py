"""The rollout reconciler through FakeKube: one outdated unit at a time, budgets, trackers, faults."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kthena_py.controllers.modelserving.gang import PodGroupReconciler
from kthena_py.controllers.modelserving.rollout import RolloutReconciler
from kthena_py.controllers.modelserving.servinggroups import ServingGroupReconciler
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import ServerError
from kthena_py.kube.resources import CONFIGMAPS, PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.eviction import ENTRIES_KEY, tracker_name
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents

from .scene import NOW, REQUEST, make_ready, ms_doc, scene

REVISION = "modelserving.volcano.sh/revision"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


async def converged(
    replicas: int = 3, *, trackers: bool = False, clock: Clock | None = None
) -> tuple[FakeKube, Any, RolloutReconciler]:
    kube, servinggroups, events = scene(ms_doc(replicas=replicas))
    for _ in range(3):
        await servinggroups.reconcile(REQUEST)
        make_ready(kube)
    rollout = RolloutReconciler(kube, servinggroups.cache, events, trackers=trackers, wall_clock=clock or Clock())
    return kube, servinggroups, rollout


async def new_image(kube: FakeKube) -> None:
    roles = ms_doc()["spec"]["template"]["roles"]
    roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "img:2"
    await kube.patch(MODELSERVINGS, "llama", {"spec": {"template": {"roles": roles}}}, "ns")


def revisions(kube: FakeKube) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["labels"][REVISION] for p in kube.objects(PODS, "ns")}


async def test_nothing_to_do_on_a_converged_modelserving() -> None:
    kube, _, rollout = await converged()
    kube.calls.clear()
    await rollout.reconcile(REQUEST)
    assert [c for c in kube.calls if c.verb != "get"] == []


async def test_takes_down_one_outdated_group_then_waits_for_its_replacement() -> None:
    kube, servinggroups, rollout = await converged()
    before = revisions(kube)
    await new_image(kube)
    await rollout.reconcile(REQUEST)
    assert [c.name for c in kube.calls_of("delete", PODS)] == ["llama-2-prefill-0-0"]
    await rollout.reconcile(REQUEST)  # the budget (maxUnavailable 1) is spent until the replacement is ready
    assert len(kube.calls_of("delete", PODS)) == 1
    await servinggroups.reconcile(REQUEST)
    assert revisions(kube)["llama-2-prefill-0-0"] != before["llama-2-prefill-0-0"]


async def test_walks_every_group_to_the_new_revision() -> None:
    kube, servinggroups, rollout = await converged()
    old = set(revisions(kube).values())
    await new_image(kube)
    for _ in range(12):
        await rollout.reconcile(REQUEST)
        await servinggroups.reconcile(REQUEST)
        make_ready(kube)
        if not old & set(revisions(kube).values()):
            break
    assert len(revisions(kube)) == 3 and not old & set(revisions(kube).values())
    assert [c.name for c in kube.calls_of("delete", PODS)] == [f"llama-{g}-prefill-0-0" for g in (2, 1, 0)]


async def test_a_recorded_eviction_spends_the_rollouts_budget() -> None:
    kube, _, rollout = await converged(trackers=True)
    pod = kube.peek(PODS, "llama-0-prefill-0-0", "ns") or {}
    entry = {"expiresAt": format_time(NOW + 30), "triggerPodName": "llama-0-prefill-0-0", "triggerPodUID": "gone"}
    ms = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    owner = {"apiVersion": ms["apiVersion"], "kind": "ModelServing", "name": "llama", "uid": ms["metadata"]["uid"]}
    kube.put(
        CONFIGMAPS,
        {
            "metadata": {
                "name": tracker_name("llama"),
                "namespace": "ns",
                "labels": {naming.LABEL_NAME: "llama"},
                "ownerReferences": [{**owner, "controller": True}],
            },
            "data": {ENTRIES_KEY: json.dumps({"ServingGroup/ns/llama/llama-0": entry})},
        },
    )
    await kube.delete(PODS, pod["metadata"]["name"], "ns")  # the granted eviction happened
    rollout.cache.informer(CONFIGMAPS)
    kube.attach(rollout.cache)
    await new_image(kube)
    result = await rollout.reconcile(REQUEST)
    assert kube.calls_of("delete", PODS)[1:] == []  # only the eviction's own delete
    assert result is not None and result.requeue_after is not None and result.requeue_after <= 30.2


async def test_a_refused_delete_backs_off_instead_of_hammering() -> None:
    kube, _, rollout = await converged()
    await new_image(kube)

    def broken(call: Call) -> None:
        if call.verb == "delete" and call.rt == PODS:
            raise ServerError(500, "InternalError", "etcd timeout")

    remove = kube.intercept(broken)
    result = await rollout.reconcile(REQUEST)
    assert len(kube.objects(PODS, "ns")) == 3
    # The refused delete is tried again when its backoff ends, without waiting for another event.
    assert result is not None and result.requeue_after is not None and 0 < result.requeue_after <= 1.0
    remove()
    await rollout.reconcile(REQUEST)  # at once again: still backing off, not tried again yet
    assert [c.name for c in kube.calls_of("delete", PODS)] == ["llama-2-prefill-0-0"]
    assert len(kube.objects(PODS, "ns")) == 3


@pytest.mark.parametrize("owned", [True, False])
async def test_only_this_modelservings_tracker_spends_its_budget(owned: bool) -> None:
    # A tracker controlled by another UID was left by a deleted ModelServing of the same name: it records nothing
    # for this one, whose rollout goes on.
    kube, _, rollout = await converged(trackers=True)
    entry = {"expiresAt": format_time(NOW + 30), "triggerPodName": "llama-0-prefill-0-0", "triggerPodUID": "u"}
    ms = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    uid = ms["metadata"]["uid"] if owned else "a-deleted-predecessor"
    owner = {"apiVersion": ms["apiVersion"], "kind": "ModelServing", "name": "llama", "uid": uid, "controller": True}
    kube.put(
        CONFIGMAPS,
        {
            "metadata": {
                "name": tracker_name("llama"),
                "namespace": "ns",
                "labels": {naming.LABEL_NAME: "llama"},
                "ownerReferences": [owner],
            },
            "data": {ENTRIES_KEY: json.dumps({"ServingGroup/ns/llama/llama-0": entry})},
        },
    )
    rollout.cache.informer(CONFIGMAPS)
    kube.attach(rollout.cache)
    await new_image(kube)
    result = await rollout.reconcile(REQUEST)
    deleted = [c.name for c in kube.calls_of("delete", PODS)]
    if owned:  # llama-0 counts as unavailable: it is updated first, and the record's expiry is awaited
        assert deleted == ["llama-0-prefill-0-0"]
        assert result is not None and result.requeue_after == pytest.approx(30.1)
    else:  # every group counts as available: the rollout takes its usual first step
        assert deleted == ["llama-2-prefill-0-0"]
        assert result is None


def _units_moved(method: str) -> float:
    labels = {"namespace": "ns", "modelserving": "llama", "method": method}
    return REGISTRY.get_sample_value("kthena_rollout_units_total", labels) or 0.0


def _deadlines_missed() -> float:
    labels = {"namespace": "ns", "modelserving": "llama"}
    return REGISTRY.get_sample_value("kthena_rollout_progress_deadline_exceeded_total", labels) or 0.0


async def _in_place_change(kube: FakeKube, *, env: bool = False) -> None:
    """Ask for updates in place and change the image (or, with ``env``, something only a recreation can change)."""
    roles = ms_doc()["spec"]["template"]["roles"]
    container = roles[0]["entryTemplate"]["spec"]["containers"][0]
    if env:
        container["env"] = [{"name": "MODE", "value": "fast"}]
    else:
        container["image"] = "img:2"
    strategy = {"type": "ServingGroupRollingUpdate", "updateMethod": "InPlace", "progressDeadlineSeconds": 60}
    await kube.patch(
        MODELSERVINGS, "llama", {"spec": {"rolloutStrategy": strategy, "template": {"roles": roles}}}, "ns"
    )


async def test_metrics_count_the_typed_step_in_place_then_its_missed_deadline_once() -> None:
    clock = Clock()
    kube, _, rollout = await converged(clock=clock)
    await _in_place_change(kube)
    before = {m: _units_moved(m) for m in ("inplace", "recreate", "fallback")}
    missed = _deadlines_missed()
    await rollout.reconcile(REQUEST)
    assert [c.name for c in kube.calls_of("patch", PODS)] == ["llama-2-prefill-0-0"]
    assert {m: _units_moved(m) - before[m] for m in before} == {"inplace": 1, "recreate": 0, "fallback": 0}
    assert _deadlines_missed() == missed
    clock.now = NOW + 61  # the patched pod never became Ready on its new image
    await rollout.reconcile(REQUEST)
    assert _deadlines_missed() == missed + 1
    clock.now = NOW + 62  # still past its deadline, but it was counted when it was missed
    await rollout.reconcile(REQUEST)
    assert _deadlines_missed() == missed + 1


@pytest.mark.parametrize("in_place", [True, False])
async def test_metrics_count_a_recreation_as_a_fallback_only_when_in_place_was_asked_for(in_place: bool) -> None:
    kube, _, rollout = await converged()
    if in_place:
        await _in_place_change(kube, env=True)
    else:
        await new_image(kube)
    before = {m: _units_moved(m) for m in ("inplace", "recreate", "fallback")}
    await rollout.reconcile(REQUEST)
    assert [c.name for c in kube.calls_of("delete", PODS)] == ["llama-2-prefill-0-0"]
    moved = {m: _units_moved(m) - before[m] for m in before}
    assert moved == (
        {"inplace": 0, "recreate": 0, "fallback": 1} if in_place else {"inplace": 0, "recreate": 1, "fallback": 0}
    )


async def test_every_modelserving_reconciler_observes_the_recorded_disruptions_alike() -> None:
    # The ServingGroup and gang reconcilers read this ModelServing's tracker as the rollout does (one shared
    # observation): the recorded group is not available in the status, and each looks again when the record expires.
    kube, servinggroups, rollout = await converged(trackers=True)
    entry = {"expiresAt": format_time(NOW + 30), "triggerPodName": "llama-0-prefill-0-0", "triggerPodUID": "u"}
    ms = kube.peek(MODELSERVINGS, "llama", "ns") or {}
    owner = {"apiVersion": ms["apiVersion"], "kind": "ModelServing", "name": "llama", "uid": ms["metadata"]["uid"]}
    kube.put(
        CONFIGMAPS,
        {
            "metadata": {
                "name": tracker_name("llama"),
                "namespace": "ns",
                "labels": {naming.LABEL_NAME: "llama"},
                "ownerReferences": [{**owner, "controller": True}],
            },
            "data": {ENTRIES_KEY: json.dumps({"ServingGroup/ns/llama/llama-0": entry})},
        },
    )
    rollout.cache.informer(CONFIGMAPS)
    kube.attach(rollout.cache)
    events = RecordedEvents()
    groups = ServingGroupReconciler(
        kube, rollout.cache, events, wall_clock=lambda: NOW, podgroup_wait=0.0, trackers=True
    )
    gang = PodGroupReconciler(kube, rollout.cache, events, trackers=True, wall_clock=lambda: NOW)
    before = await servinggroups.reconcile(REQUEST)  # without trackers: nothing recorded, nothing to wait for
    assert before is None or before.requeue_after is None
    assert (kube.peek(MODELSERVINGS, "llama", "ns") or {})["status"]["availableReplicas"] == 3
    result = await groups.reconcile(REQUEST)
    assert result is not None and result.requeue_after == pytest.approx(30.1)
    assert (kube.peek(MODELSERVINGS, "llama", "ns") or {})["status"]["availableReplicas"] == 2
    again = await gang.reconcile(REQUEST)
    assert again is not None and again.requeue_after == pytest.approx(30.1)
