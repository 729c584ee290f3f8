"""The PodGroup (gang) reconciler through FakeKube: one PodGroup per ServingGroup, only with Volcano."""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.modelserving.failures import GANG_FAILURE
from kthena_py.controllers.modelserving.gang import FIELD_MANAGER, PodGroupReconciler
from kthena_py.controllers.modelserving.observe import PODGROUP_CRD_NAME, register_informers
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import Forbidden
from kthena_py.kube.resources import CRDS, PODGROUPS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import Call, FakeKube, RecordedEvents

REQUEST = Request("ns", "llama")


def podgroup_crd(sub_group_policy: bool = True) -> dict[str, Any]:
    spec_props: dict[str, Any] = {"minMember": {"type": "integer"}}
    if sub_group_policy:
        spec_props["subGroupPolicy"] = {"type": "array"}
    schema = {"openAPIV3Schema": {"properties": {"spec": {"properties": spec_props}}}}
    return {
        "metadata": {"name": PODGROUP_CRD_NAME},
        "spec": {"versions": [{"name": "v1beta1", "served": True, "schema": schema}]},
    }


def ms_doc(replicas: int = 2, scheduler: str = "volcano") -> dict[str, Any]:
    entry = {"spec": {"containers": [{"name": "main", "image": "img:1"}]}}
    role = {"name": "prefill", "replicas": 1, "workerReplicas": 0, "entryTemplate": entry}
    spec = {"replicas": replicas, "schedulerName": scheduler, "template": {"roles": [role]}}
    return {"metadata": {"name": "llama", "namespace": "ns"}, "spec": spec}


def scene(doc: dict[str, Any], *, crd: bool = True) -> tuple[FakeKube, PodGroupReconciler]:
    kube = FakeKube()
    kube.put(MODELSERVINGS, doc)
    if crd:
        kube.put(CRDS, podgroup_crd())
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    register_informers(cache)
    kube.attach(cache)
    return kube, PodGroupReconciler(kube, cache, RecordedEvents())


def podgroups(kube: FakeKube) -> list[str]:
    return [o["metadata"]["name"] for o in kube.objects(PODGROUPS, "ns")]


async def test_one_podgroup_per_servinggroup_owned_by_the_modelserving() -> None:
    kube, reconciler = scene(ms_doc(replicas=2))
    await reconciler.reconcile(REQUEST)
    assert podgroups(kube) == ["llama-0", "llama-1"]
    uid = (kube.peek(MODELSERVINGS, "llama", "ns") or {})["metadata"]["uid"]
    for pg in kube.objects(PODGROUPS, "ns"):
        assert pg["metadata"]["ownerReferences"][0]["uid"] == uid
        assert pg["spec"]["minMember"] == 1
    assert {c.options.get("field_manager") for c in kube.calls_of("create", PODGROUPS)} <= {FIELD_MANAGER, None}


async def test_converged_podgroups_are_not_written_again_and_a_deleted_one_comes_back() -> None:
    kube, reconciler = scene(ms_doc(replicas=2))
    await reconciler.reconcile(REQUEST)
    kube.calls.clear()
    await reconciler.reconcile(REQUEST)
    assert [c for c in kube.calls if c.rt == PODGROUPS] == []
    await kube.delete(PODGROUPS, "llama-1", "ns")
    await reconciler.reconcile(REQUEST)
    assert podgroups(kube) == ["llama-0", "llama-1"]


async def test_scaling_down_removes_the_groups_podgroup() -> None:
    kube, reconciler = scene(ms_doc(replicas=2))
    await reconciler.reconcile(REQUEST)
    await kube.patch(MODELSERVINGS, "llama", {"spec": {"replicas": 1}}, "ns")
    await reconciler.reconcile(REQUEST)
    assert podgroups(kube) == ["llama-0"]


async def test_nothing_without_volcano_or_without_the_crd() -> None:
    for kube, reconciler in (scene(ms_doc(scheduler="default-scheduler")), scene(ms_doc(), crd=False)):
        await reconciler.reconcile(REQUEST)
        assert podgroups(kube) == []
        # No PodGroup and no status field (the Scheduled condition is the scheduling reconciler's).
        assert [c for c in kube.calls if c.verb != "get"] == []


async def test_a_refused_podgroup_create_is_reported_on_its_condition() -> None:
    kube, reconciler = scene(ms_doc(replicas=1))

    def refuse(call: Call) -> None:
        if call.verb == "create" and call.rt == PODGROUPS:
            raise Forbidden(403, "Forbidden", "podgroups is forbidden: no RBAC")

    kube.intercept(refuse)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and (result.requeue_after or 0) > 0
    conditions = ((kube.peek(MODELSERVINGS, "llama", "ns") or {}).get("status") or {}).get("conditions") or []
    (failure,) = [c for c in conditions if c["type"] == GANG_FAILURE]
    assert failure["status"] == "True" and "no RBAC" in failure["message"]


async def test_an_update_of_a_podgroup_replaced_meanwhile_is_left_to_the_next_event() -> None:
    """The cache shows the ModelServing's new worker count but not that its PodGroup was replaced: the update's UID
    precondition fails (Conflict), which is no failure; the replacement is updated once the cache shows it."""
    kube, reconciler = scene(ms_doc(replicas=1))
    await reconciler.reconcile(REQUEST)
    old = kube.peek(PODGROUPS, "llama-0", "ns") or {}
    assert old["spec"]["minMember"] == 1
    kube.hold()
    roles = ms_doc()["spec"]["template"]["roles"]
    roles[0]["workerReplicas"] = 1
    roles[0]["workerTemplate"] = roles[0]["entryTemplate"]
    await kube.patch(MODELSERVINGS, "llama", {"spec": {"template": {"roles": roles}}}, "ns")
    await kube.delete(PODGROUPS, "llama-0", "ns")
    replacement = {k: v for k, v in old.items() if k != "status"}
    replacement["metadata"] = {k: v for k, v in old["metadata"].items() if k not in ("uid", "resourceVersion")}
    await kube.create(PODGROUPS, replacement, "ns")
    assert kube.deliver_held(1) == 2  # the ModelServing's change only
    result = await reconciler.reconcile(REQUEST)
    (update,) = [c for c in kube.calls_of("patch", PODGROUPS)]
    assert update.body["metadata"]["uid"] == old["metadata"]["uid"]
    assert (kube.peek(PODGROUPS, "llama-0", "ns") or {})["spec"]["minMember"] == 1  # the replacement is untouched
    conditions = ((kube.peek(MODELSERVINGS, "llama", "ns") or {}).get("status") or {}).get("conditions") or []
    assert [c for c in conditions if c["type"] == GANG_FAILURE and c["status"] == "True"] == []
    assert result is None or result.requeue_after is None  # not retried as a refusal: the watch brings the news
    kube.release()
    await reconciler.reconcile(REQUEST)
    assert (kube.peek(PODGROUPS, "llama-0", "ns") or {})["spec"]["minMember"] == 2
