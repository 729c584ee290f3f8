"""The ServingGroup reconciler through FakeKube: creates, converges, reports refusals and invalid specs."""

from __future__ import annotations

import pytest

from kthena_py.controllers.modelserving.failures import REPLICA_FAILURE
from kthena_py.controllers.modelserving.servinggroups import FIELD_MANAGER
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import Conflict, Forbidden
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.runtime.reconcile import TerminalError
from kthena_py.testing.fake import Call
from kthena_py.testing.fake.faults import refuse

from .scene import REQUEST, ms_doc, names, scene, writes


async def test_creates_each_groups_pods_and_converges() -> None:
    kube, reconciler, _ = scene(ms_doc(replicas=2))
    await reconciler.reconcile(REQUEST)
    assert names(kube, PODS) == ["llama-0-prefill-0-0", "llama-1-prefill-0-0"]
    assert len(names(kube, CONTROLLER_REVISIONS)) == 1
    uid = (kube.peek(MODELSERVINGS, "llama", "ns") or {})["metadata"]["uid"]
    for pod in kube.objects(PODS, "ns"):
        (owner,) = pod["metadata"]["ownerReferences"]
        assert owner["uid"] == uid and owner["controller"] is True
    for _ in range(3):  # status and revisions settle; then a pass writes nothing
        await reconciler.reconcile(REQUEST)
    kube.calls.clear()
    await reconciler.reconcile(REQUEST)
    assert writes(kube) == []


async def test_a_role_with_workers_gets_its_headless_service() -> None:
    kube, reconciler, _ = scene(ms_doc(replicas=1, workers=1))
    await reconciler.reconcile(REQUEST)
    assert names(kube, PODS) == ["llama-0-prefill-0-0", "llama-0-prefill-0-1"]
    assert names(kube, SERVICES) == ["llama-0-prefill-0-0"]


async def test_a_deleted_pod_is_recreated() -> None:
    kube, reconciler, _ = scene(ms_doc(replicas=1))
    await reconciler.reconcile(REQUEST)
    (pod,) = kube.objects(PODS, "ns")
    await kube.delete(PODS, pod["metadata"]["name"], "ns")
    await reconciler.reconcile(REQUEST)
    (again,) = kube.objects(PODS, "ns")
    assert again["metadata"]["name"] == pod["metadata"]["name"]
    assert again["metadata"]["uid"] != pod["metadata"]["uid"]


async def test_status_is_written_by_its_field_manager() -> None:
    kube, reconciler, _ = scene(ms_doc(replicas=2))
    for _ in range(3):
        await reconciler.reconcile(REQUEST)
    status_writes = [c for c in kube.calls_of("patch", MODELSERVINGS) if c.subresource == "status"]
    assert status_writes and all(c.options["field_manager"] == FIELD_MANAGER for c in status_writes)
    assert (kube.peek(MODELSERVINGS, "llama", "ns") or {})["status"]["replicas"] == 2


async def test_a_refused_pod_create_is_reported_on_the_replica_failure_condition() -> None:
    kube, reconciler, events = scene(ms_doc(replicas=1))

    def quota(call: Call) -> None:
        if call.verb == "create" and call.rt == PODS:
            raise Forbidden(403, "Forbidden", 'pods "x" is forbidden: exceeded quota: compute-resources')

    kube.intercept(quota)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after is not None and result.requeue_after > 0
    conditions = (kube.peek(MODELSERVINGS, "llama", "ns") or {}).get("status", {}).get("conditions", [])
    failure = [c for c in conditions if c["type"] == REPLICA_FAILURE]
    assert failure and failure[0]["status"] == "True" and "exceeded quota" in failure[0]["message"]
    assert kube.objects(PODS, "ns") == []
    assert events.events


async def test_an_invalid_spec_is_a_terminal_error_with_an_event() -> None:
    doc = ms_doc()
    doc["spec"]["replicas"] = "many"
    kube, reconciler, events = scene(doc)
    with pytest.raises(TerminalError):
        await reconciler.reconcile(REQUEST)
    assert events.reasons() == ["InvalidSpec"]
    assert writes(kube) == []


async def test_volcano_without_the_podgroup_crd_warns_and_still_creates_pods() -> None:
    kube, reconciler, events = scene(ms_doc(replicas=1, scheduler="volcano"))
    await reconciler.reconcile(REQUEST)
    assert "PodGroupCRDMissing" in events.reasons()
    assert names(kube, PODS) == ["llama-0-prefill-0-0"]


async def test_a_deleted_modelserving_writes_nothing() -> None:
    kube, reconciler, _ = scene(ms_doc())
    await kube.delete(MODELSERVINGS, "llama", "ns")
    kube.calls.clear()
    assert await reconciler.reconcile(REQUEST) is None
    assert kube.calls == []


async def test_a_refused_status_write_fails_the_reconcile_for_a_retry() -> None:
    kube, reconciler, _ = scene(ms_doc(replicas=1))
    await reconciler.reconcile(REQUEST)  # the children; the status is left to the reconcile their events bring
    refusal = refuse(Conflict(409, "Conflict", "injected"), "patch", MODELSERVINGS, subresource="status")
    remove = kube.intercept(refusal)
    with pytest.raises(Conflict):  # the engine retries it with backoff
        await reconciler.reconcile(REQUEST)
    assert len(refusal.refused) == 1
    assert names(kube, PODS) == ["llama-0-prefill-0-0"]
    assert "status" not in (kube.peek(MODELSERVINGS, "llama", "ns") or {})
    remove()
    for _ in range(3):
        await reconciler.reconcile(REQUEST)
    assert (kube.peek(MODELSERVINGS, "llama", "ns") or {})["status"]["replicas"] == 1
    assert names(kube, PODS) == ["llama-0-prefill-0-0"]  # nothing created twice


async def test_a_modelserving_deleted_while_the_cache_lags_is_not_an_error() -> None:
    kube, reconciler, _ = scene(ms_doc(replicas=1))
    await reconciler.reconcile(REQUEST)  # the children
    kube.hold()
    await kube.delete(MODELSERVINGS, "llama", "ns")
    await reconciler.reconcile(REQUEST)  # its status write meets NotFound: nothing to report, nothing raised
    status_writes = [c for c in kube.calls_of("patch", MODELSERVINGS) if c.subresource == "status"]
    assert status_writes and kube.peek(MODELSERVINGS, "llama", "ns") is None


def test_a_tracker_wakes_the_modelserving_planners_only_when_its_records_change() -> None:
    from kthena_py.controllers.modelserving import tracker_records_changed

    tracker = {"metadata": {"name": "kthena-eviction-tracker-llama", "resourceVersion": "1"}, "data": {"a": "1"}}
    relabelled = {**tracker, "metadata": {**tracker["metadata"], "resourceVersion": "2"}}
    released = {**tracker, "data": {}}
    assert tracker_records_changed(None, tracker)
    assert not tracker_records_changed(tracker, relabelled)
    assert tracker_records_changed(tracker, released)
