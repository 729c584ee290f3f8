"""The adapter reconciler is woken only for ModelServings with (or once with) adapters, and their pods."""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.adapters.predicates import modelserving_matters, pod_matters
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.testing.fake import FakeKube
from kthena_py.vocab.labels import ADAPTER_LABEL_PREFIX, LORA_ADAPTERS, LORA_LOADING

ADAPTERS = '[{"name": "sql", "source": "hf://org/sql-lora"}]'


def ms(name: str, *, adapters: bool = False, condition: bool = False, generation: int = 1) -> dict[str, Any]:
    doc: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "generation": generation}, "spec": {}}
    if adapters:
        doc["metadata"]["annotations"] = {LORA_ADAPTERS: ADAPTERS}
    if condition:
        doc["status"] = {"conditions": [{"type": "AdaptersLoaded", "status": "True", "reason": "AllLoaded"}]}
    return doc


def pod(owner: str, *, ready: bool = False, labels: dict[str, str] | None = None, loading: bool = False) -> Any:
    ref = {"apiVersion": MODELSERVINGS.api_version, "kind": "ModelServing", "name": owner, "uid": "u"}
    md: dict[str, Any] = {"name": f"{owner}-0", "namespace": "ns", "ownerReferences": [{**ref, "controller": True}]}
    md["labels"] = dict(labels or {})
    if loading:
        md["annotations"] = {LORA_LOADING: "{}"}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": md, "status": {"phase": "Running", "conditions": conditions}}


def test_modelservings_with_or_once_with_adapters_pass() -> None:
    assert modelserving_matters(None, ms("a", adapters=True))
    assert not modelserving_matters(None, ms("plain"))
    assert modelserving_matters(None, ms("cleared", condition=True))  # a restart after the annotation went
    assert modelserving_matters(ms("a", adapters=True), ms("a", generation=2))  # the annotation removed
    assert modelserving_matters(ms("a"), ms("a", adapters=True, generation=1))  # the annotation added
    assert not modelserving_matters(ms("plain"), ms("plain", generation=2))
    assert not modelserving_matters(ms("a", adapters=True), ms("a", adapters=True))  # nothing changed


def test_pods_pass_for_an_owner_with_adapters_or_when_they_carry_some() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, ms("lora", adapters=True))
    kube.put(MODELSERVINGS, ms("plain"))
    cache = SharedCache(kube, namespace="ns")
    cache.informer(MODELSERVINGS)
    cache.informer(PODS)
    kube.attach(cache)
    matters = pod_matters(cache)
    assert matters(pod("lora"), pod("lora", ready=True))
    assert not matters(pod("plain"), pod("plain", ready=True))
    assert not matters(pod("lora"), pod("lora"))  # no state change
    labelled = {ADAPTER_LABEL_PREFIX + "sql": "loaded"}
    assert matters(pod("plain", labels=labelled), pod("plain", labels=labelled, ready=True))  # left to unload
    assert matters(pod("plain", loading=True), pod("plain", loading=True, ready=True))
    assert matters(None, pod("lora"))
    assert not matters(None, pod("plain"))
    assert not matters(None, pod("gone"))  # an owner the cache does not hold
