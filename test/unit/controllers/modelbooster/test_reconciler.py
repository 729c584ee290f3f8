"""The reconciler's decisions that no real API server can provoke, with a recording fake client.

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


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def patch(self, rt: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        self.calls.append(("patch", f"{rt.kind}/{kw.get('subresource') or ''}", body))
        return {}

    def __getattr__(self, name: str) -> Any:  # any other call is a test failure
        raise AssertionError(f"unexpected client call {name}")


class Events:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, _: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


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


def _reconciler(obj: dict[str, Any]) -> tuple[BoosterReconciler, RecordingClient, Events]:
    cache = SharedCache(None)  # type: ignore[arg-type]  # never started: filled by hand
    for rt in (MODELBOOSTERS, MODELSERVINGS, MODELSERVERS, MODELROUTES, CRDS):
        cache.informer(rt)
    cache.informer(MODELBOOSTERS).store.upsert(copy.deepcopy(obj))
    client, events = RecordingClient(), Events()
    images = ImageSource(client, Settings(downloader_image="d", runtime_image="r"))  # type: ignore[arg-type]
    return BoosterReconciler(client, cache, events, images, wall_clock=lambda: 0.0), client, events  # type: ignore[arg-type]


@pytest.mark.parametrize("type_", ["SGLang", "MindIE", "MindIEDisaggregated"])
async def test_unsupported_backend_type_fails_with_kthenas_message_and_touches_nothing(type_: str) -> None:
    reconciler, client, events = _reconciler(_booster(type_))
    with pytest.raises(TerminalError):
        await reconciler.reconcile(Request("ns", "mb"))
    message = f"not support model backend type: {type_}"
    assert events.events == [("Warning", "InvalidSpec", message)]
    ((verb, target, body),) = client.calls
    assert (verb, target) == ("patch", "ModelBooster/status")
    status = body["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == ("True", "ModelAbnormal", message)
    assert status["observedGeneration"] == 3


async def test_a_migrated_booster_is_left_alone() -> None:
    reconciler, client, events = _reconciler(_booster("vLLM", annotations={ANNOTATION_MIGRATED: "true"}))
    assert await reconciler.reconcile(Request("ns", "mb")) is None
    assert client.calls == [] and events.events == []
