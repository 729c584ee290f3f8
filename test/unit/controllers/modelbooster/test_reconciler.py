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
from kthena_py.kube.resources import CRDS
from kthena_py.plan.modelbooster.naming import ANNOTATION_MIGRATED
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request, TerminalError
from kthena_py.testing.fake import FakeKube, RecordedEvents


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
