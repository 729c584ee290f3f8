"""The shared cache's transform (:func:`slim`) and the size measure of the cache benchmark (:func:`deep_size`)."""

from __future__ import annotations

import copy
import sys
from typing import Any

from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.sizing import deep_size
from kthena_py.runtime.slim import LAST_APPLIED, slim
from kthena_py.testing.fake import FakeKube


def applied() -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {
            "name": "ms",
            "namespace": "ns",
            "uid": "u-1",
            "annotations": {LAST_APPLIED: '{"spec": {"replicas": 2}}\n', "team": "serving"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "labels": {"app": "x"},
        },
        "spec": {"replicas": 2},
        "status": {"replicas": 2},
    }


def test_slim_drops_managed_fields_and_the_last_applied_annotation_only() -> None:
    obj = applied()
    original = copy.deepcopy(obj)
    out = slim(obj)
    assert obj == original  # the input is not modified
    expected = copy.deepcopy(original)
    del expected["metadata"]["managedFields"]
    del expected["metadata"]["annotations"][LAST_APPLIED]
    assert out == expected
    assert out["metadata"]["annotations"] == {"team": "serving"}


def test_slim_keeps_everything_of_an_object_without_either() -> None:
    obj = applied()
    del obj["metadata"]["managedFields"]
    del obj["metadata"]["annotations"][LAST_APPLIED]
    out = slim(obj)
    assert out == obj and out is not obj
    assert slim({"kind": "Status"}) == {"kind": "Status"}
    only = applied()
    only["metadata"]["annotations"] = {LAST_APPLIED: "{}"}
    assert slim(only)["metadata"]["annotations"] == {}


def test_the_shared_cache_stores_slim_objects() -> None:
    informer = SharedCache(FakeKube()).informer(PODS)
    stored = informer._prepare(applied())  # what the informer stores for a listed or watched object
    assert "managedFields" not in stored["metadata"]
    assert LAST_APPLIED not in stored["metadata"]["annotations"]
    assert stored["metadata"]["annotations"]["team"] == "serving"


def token_volume(name: str = "kube-api-access-x7k2q") -> dict[str, Any]:
    """The service-account token volume as the API server's admission adds it to a pod."""
    return {
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ],
            "defaultMode": 420,
        },
    }


def pod(*volumes: dict[str, Any]) -> dict[str, Any]:
    mounts = [{"name": str(v["name"]), "mountPath": f"/m/{v['name']}"} for v in volumes]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": mounts}], "volumes": list(volumes)},
        "status": {"phase": "Running"},
    }


def test_slim_drops_the_service_account_token_volume_of_a_pod_only() -> None:
    claim = {"name": "model", "persistentVolumeClaim": {"claimName": "weights"}}
    vault = token_volume("vault-token")  # a token volume the user asked for: another name
    lookalike = {"name": "kube-api-access-abc", "projected": {"sources": [{"configMap": {"name": "c"}}]}}
    obj = pod(claim, token_volume(), vault, lookalike)
    original = copy.deepcopy(obj)
    out = slim(obj)
    assert obj == original  # the input is not modified
    assert out["spec"]["volumes"] == [claim, vault, lookalike]
    assert out["spec"]["containers"] == original["spec"]["containers"]  # the mounts stay: containers are kept whole
    assert {k: v for k, v in out["spec"].items() if k != "volumes"} == {
        k: v for k, v in original["spec"].items() if k != "volumes"
    }
    assert {k: v for k, v in out.items() if k != "spec"} == {k: v for k, v in original.items() if k != "spec"}
    assert slim(pod(token_volume()))["spec"]["volumes"] == []


def test_slim_keeps_the_volumes_of_other_kinds_and_of_pods_without_a_token_volume() -> None:
    template = {**pod(token_volume()), "kind": "PodTemplate"}
    assert slim(template) == template
    plain = pod({"name": "scratch", "emptyDir": {}})
    assert slim(plain) == plain
    assert slim(pod()) == pod()
    odd = pod()
    odd["spec"]["volumes"] = "not a list"
    assert slim(odd) == odd


def test_the_shared_cache_stores_pods_without_their_token_volume() -> None:
    informer = SharedCache(FakeKube()).informer(PODS)
    listed = pod(token_volume())
    del listed["kind"]  # list items come without a kind; the informer sets it before the transform
    stored = informer._prepare(listed)
    assert stored["spec"]["volumes"] == []


def test_deep_size_counts_every_object_once() -> None:
    leaf = "x" * 100
    assert deep_size(leaf) == sys.getsizeof(leaf)
    one = {"k": leaf}
    assert deep_size(one) == sys.getsizeof(one) + sys.getsizeof("k") + sys.getsizeof(leaf)
    shared = [one, one, {"k": leaf}]
    inner = {"k": leaf}
    assert deep_size(shared) == sys.getsizeof(shared) + deep_size(one) + sys.getsizeof(shared[2])
    assert deep_size([one, inner]) < deep_size(one) + deep_size(inner)  # the shared key and leaf count once
    seen: set[int] = set()
    first = deep_size(one, seen)
    assert deep_size(one, seen) == 0 and first > 0  # measured together across calls


def test_deep_size_survives_cycles_and_depth() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert deep_size(cyclic) == sys.getsizeof(cyclic) + sys.getsizeof(1)
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):  # deeper than the recursion limit
        node["n"] = {}
        node = node["n"]
    assert deep_size(deep) > 5000 * sys.getsizeof({})
