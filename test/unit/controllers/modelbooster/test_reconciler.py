"""The reconciler's decisions that no real API server can provoke, through FakeKube.

A backend type outside the CRD enum (Kthena's Go constants) cannot be stored by our CRD; such a stored object
must still get Kthena's ``Failed`` condition and nothing else. The end-to-end behaviour is proven in the
cluster tier (test/cluster/test_modelbooster.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_py.controllers.modelbooster import Settings
from kthena_py.controllers.modelbooster.reconciler import BoosterReconciler
from kthena_py.controllers.modelbooster.settings import ImageSource
from kthena_py.controllers.resources import MODELBOOSTERS, MODELROUTES, MODELSERVERS, MODELSERVINGS
from kthena_py.kube import ApiError, ServerError
from kthena_py.kube.resources import CRDS
from kthena_py.plan.modelbooster.naming import ANNOTATION_MIGRATED
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request, TerminalError
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.testing.fake.faults import refuse


def _booster(type_: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": {"name": "mb", "namespace": "ns", "uid": "u1", "generation": 3, **metadata},
        "spec": {
            "backend": {
                "name": "b",
                "type": type_,
                "modelURI": "hf://x/y",
                "replicas": 1,
                "workers": [{"type": "server", "image": "img", "replicas": 1}],
            }
        },
    }


def _reconciler(obj: dict[str, Any]) -> tuple[BoosterReconciler, FakeKube, RecordedEvents]:
    kube = FakeKube()
    kube.put(MODELBOOSTERS, copy.deepcopy(obj))
    cache = SharedCache(kube)
    for rt in (MODELBOOSTERS, MODELSERVINGS, MODELSERVERS, MODELROUTES, CRDS):
        cache.informer(rt)
    kube.attach(cache)
    kube.calls.clear()
    events = RecordedEvents()
    images = ImageSource(kube, Settings(downloader_image="d", runtime_image="r"))
    return BoosterReconciler(kube, cache, events, images, wall_clock=lambda: 0.0), kube, events


def recorded(events: RecordedEvents) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in events.events]


@pytest.mark.parametrize("type_", ["SGLang", "MindIE", "MindIEDisaggregated"])
async def test_unsupported_backend_type_fails_with_kthenas_message_and_touches_nothing(type_: str) -> None:
    reconciler, client, events = _reconciler(_booster(type_))
    with pytest.raises(TerminalError):
        await reconciler.reconcile(Request("ns", "mb"))
    message = f"not support model backend type: {type_}"
    assert recorded(events) == [("Warning", "InvalidSpec", message)]
    (call,) = client.calls  # any other call is a test failure
    assert (call.verb, f"{call.rt.kind}/{call.subresource or ''}") == ("patch", "ModelBooster/status")
    status = call.body["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == ("True", "ModelAbnormal", message)
    assert status["observedGeneration"] == 3


async def test_a_migrated_booster_is_left_alone() -> None:
    reconciler, client, events = _reconciler(_booster("vLLM", annotations={ANNOTATION_MIGRATED: "true"}))
    assert await reconciler.reconcile(Request("ns", "mb")) is None
    assert client.calls == [] and recorded(events) == []


async def test_a_booster_creates_its_modelserving_reports_progress_and_then_stays_quiet() -> None:
    reconciler, client, events = _reconciler(_booster("vLLM"))
    await reconciler.reconcile(Request("ns", "mb"))
    (ms,) = client.objects(MODELSERVINGS, "ns")
    (owner,) = ms["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("ModelBooster", "u1", True)
    status = (client.peek(MODELBOOSTERS, "mb", "ns") or {})["status"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["Initialized"] == ("True", "ModelCreating") and status["observedGeneration"] == 3
    assert ("Normal", "ModelServingCreated", f"ModelServing {ms['metadata']['name']} created") in recorded(events)
    client.calls.clear()
    await reconciler.reconcile(Request("ns", "mb"))  # converged: reads only
    assert [c.verb for c in client.calls if c.verb not in ("get", "list")] == []


def failed_condition(client: FakeKube) -> tuple[str, str, str] | None:
    status = (client.peek(MODELBOOSTERS, "mb", "ns") or {}).get("status") or {}
    for c in status.get("conditions") or []:
        if c["type"] == "Failed":
            return c["status"], c["reason"], c["message"]
    return None


async def test_a_refused_child_write_sets_failed_and_raises_for_a_retry() -> None:
    reconciler, client, events = _reconciler(_booster("vLLM"))
    refusal = refuse(ServerError(500, "InternalError", "etcd is down"), "patch", MODELSERVINGS)
    remove = client.intercept(refusal)
    with pytest.raises(ApiError):  # the engine retries it with backoff
        await reconciler.reconcile(Request("ns", "mb"))
    (call,) = refusal.refused
    message = f"cannot create ModelServing {call.name}: etcd is down"
    assert ("Warning", "ModelServingFailed", message) in recorded(events)
    failed = failed_condition(client)
    assert failed is not None and failed[0] == "True" and failed[2] == message
    assert client.objects(MODELSERVINGS, "ns") == []
    remove()
    await reconciler.reconcile(Request("ns", "mb"))
    assert len(client.objects(MODELSERVINGS, "ns")) == 1
    failed = failed_condition(client)
    assert failed is None or failed[0] == "False"


async def test_a_foreign_child_the_cache_has_not_seen_is_never_adopted() -> None:
    """The live read before a create finds a ModelServing of the child's name that another owner controls."""
    reconciler, client, events = _reconciler(_booster("vLLM"))
    await reconciler.reconcile(Request("ns", "mb"))
    (ms,) = client.objects(MODELSERVINGS, "ns")
    name = ms["metadata"]["name"]
    await client.delete(MODELSERVINGS, name, "ns")
    client.hold()  # the cache saw the child go, and will not see the newcomer
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "someone-else", "controller": True}
    foreign = {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [owner]}, "spec": {"replicas": 7}}
    await client.create(MODELSERVINGS, foreign)
    client.calls.clear()
    with pytest.raises(ApiError):
        await reconciler.reconcile(Request("ns", "mb"))
    message = f"ModelServing {name} already exists and is not controlled by this ModelBooster"
    assert [e for e in recorded(events) if e[1] == "ModelServingFailed"] == [("Warning", "ModelServingFailed", message)]
    assert [c.verb for c in client.calls if c.rt == MODELSERVINGS] == ["get"]  # read, never written
    assert (client.peek(MODELSERVINGS, name, "ns") or {})["spec"] == {"replicas": 7}
    failed = failed_condition(client)
    assert failed is not None and failed[0] == "True" and failed[2] == message


async def test_a_refused_status_write_raises_after_the_children() -> None:
    reconciler, client, _ = _reconciler(_booster("vLLM"))
    client.intercept(
        refuse(ServerError(500, "InternalError", "injected"), "patch", MODELBOOSTERS, subresource="status")
    )
    with pytest.raises(ServerError):
        await reconciler.reconcile(Request("ns", "mb"))
    assert len(client.objects(MODELSERVINGS, "ns")) == 1
    assert "status" not in (client.peek(MODELBOOSTERS, "mb", "ns") or {})
