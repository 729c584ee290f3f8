"""Benchmark: bytes per cached pod (and ModelServing), by informer transform (printed, never asserted).

Builds the pods of N ModelServings (``bench/converge.py``'s ``modelserving(i)``, 8 pods each) as the API
server returns them once kwok runs them: the rendered pod plus the API server's defaults (service-account
volume, tolerations, ...), a Running status (conditions with ``lastTransitionTime``, ``containerStatuses``,
host and pod IPs) and server metadata (uid, resourceVersion, creationTimestamp, managedFields of three
writers). The ModelServings themselves are measured too, as ``kubectl apply`` leaves them (with the
last-applied annotation). Each object is serialised to JSON and decoded one by one, as watch events are (the
informers' steady state), with :mod:`json` and with pydantic-core's parser (what the client uses), then passed
through a transform:

* ``none``: the decoded object as it is (the baseline of the ratios);
* ``strip-managed-fields``: drops ``metadata.managedFields`` (the cache's transform before issue 15);
* ``slim``: :func:`kthena_py.runtime.slim.slim` (the cache's transform now; for a pod it also drops the
  service-account token volume, which ``strip-managed-fields``, the transform before issue 15, kept).

Printed per transform: deep bytes per object (:func:`kthena_py.runtime.sizing.deep_size` over all objects
together, shared strings counted once), tracemalloc bytes per object (what the kept objects hold, the
interpreter's string table included), the ratio of both to the baseline, and the transform's time per object.

Usage: python bench/cache_memory.py [--modelservings N]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_core import from_json

sys.path.insert(0, str(Path(__file__).resolve().parent))

from converge import modelserving

from kthena_py.kube.objects import KubeObject, strip_managed_fields
from kthena_py.plan.modelserving.offline.render import render
from kthena_py.runtime.sizing import deep_size
from kthena_py.runtime.slim import slim

Transform = Callable[[KubeObject], KubeObject]


def interned(obj: Any) -> Any:
    """``slim`` plus every dict key and string of up to 256 characters interned (evaluated, not adopted)."""
    if isinstance(obj, dict):
        return {sys.intern(k): interned(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [interned(v) for v in obj]
    if isinstance(obj, str) and len(obj) <= 256:
        return sys.intern(obj)
    return obj


TRANSFORMS: list[tuple[str, Transform | None]] = [
    ("none", None),
    ("strip-managed-fields", strip_managed_fields),
    ("slim", slim),
    ("slim+intern (rejected)", lambda o: interned(slim(o))),
]
DECODERS: list[tuple[str, Callable[[bytes], Any]]] = [("json.loads", json.loads), ("pydantic-core", from_json)]


def _managed(manager: str, operation: str, fields: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": "2026-12-01T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _fields(obj: Any) -> Any:
    """A FieldsV1-like set of the object's fields (``f:`` keys, ``{}`` leaves), as managedFields hold."""
    if isinstance(obj, dict):
        return {f"f:{k}": _fields(v) for k, v in obj.items()}
    if isinstance(obj, list):
        keys = [f'k:{{"name":"{v.get("name", i)}"}}' if isinstance(v, dict) else f"v:{v}" for i, v in enumerate(obj)]
        return {key: {} for key in keys}
    return {}


def as_served(pod: dict[str, Any], i: int) -> dict[str, Any]:
    """``pod`` as the API server returns it after kwok made it Running (defaults, status, server metadata)."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    created = f"2026-12-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z"
    for c in spec["containers"]:
        c.setdefault("imagePullPolicy", "Always")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("volumeMounts", []).append(
            {
                "name": f"kube-api-access-{i:05x}",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        )
    spec.update(
        {
            "restartPolicy": spec.get("restartPolicy", "Always"),
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": f"kwok-node-{i % 10}",
            "securityContext": {},
            "schedulerName": spec.get("schedulerName", "default-scheduler"),
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "volumes": [
                {
                    "name": f"kube-api-access-{i:05x}",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
        }
    )
    pod_ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    host_ip = f"172.18.0.{i % 10 + 2}"
    pod["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": created}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": created,
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": c["name"],
                "state": {"running": {"startedAt": created}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": c["image"],
                "imageID": "",
                "started": True,
            }
            for c in spec["containers"]
        ],
    }
    metadata = pod["metadata"]
    metadata.update(
        {
            "uid": f"{i:08x}-5b1c-4f6e-9d3a-{i * 7919:012x}",
            "resourceVersion": str(100000 + i * 3),
            "creationTimestamp": created,
        }
    )
    metadata["managedFields"] = [
        _managed("kthena-py-servinggroups", "Update", _fields({k: v for k, v in pod.items() if k != "status"})),
        _managed("kube-scheduler", "Update", {"f:status": {"f:conditions": {}}}, "status"),
        _managed("kwok", "Update", _fields({"status": pod["status"]}), "status"),
    ]
    return pod


def as_applied(ms: dict[str, Any], i: int) -> dict[str, Any]:
    """A ModelServing as ``kubectl apply`` leaves it (last-applied annotation, server metadata, a status)."""
    ms = copy.deepcopy(ms)
    metadata = ms["metadata"]
    metadata["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(ms) + "\n"}
    metadata.update(
        {
            "uid": f"{i:08x}-0a0a-4b4b-8c8c-{i * 104729:012x}",
            "resourceVersion": str(90000 + i),
            "generation": 1,
            "creationTimestamp": "2026-12-01T10:00:00Z",
        }
    )
    ms["status"] = {
        "observedGeneration": 1,
        "replicas": 2,
        "availableReplicas": 2,
        "updatedReplicas": 2,
        "currentReplicas": 2,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "AllGroupsReady",
                "message": "All Serving groups are ready",
                "lastTransitionTime": "2026-12-01T10:00:15Z",
            }
        ],
    }
    metadata["managedFields"] = [
        _managed("kubectl-client-side-apply", "Update", _fields({"metadata": {"annotations": {}}, "spec": ms["spec"]})),
        _managed("kthena-py-servinggroups", "Apply", _fields({"status": ms["status"]}), "status"),
    ]
    return ms


def measure(
    docs: list[bytes], decode: Callable[[bytes], Any], transform: Transform | None
) -> tuple[float, float, float]:
    """Deep bytes per object, tracemalloc bytes per object, transform microseconds per object."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [decode(doc) if transform is None else transform(decode(doc)) for doc in docs]
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    spent = 0.0
    if transform is not None:  # timed apart (tracemalloc slows every allocation), without collector pauses
        decoded = [decode(doc) for doc in docs]
        gc.disable()
        try:
            for obj in decoded:
                started = time.perf_counter()
                transform(obj)
                spent += time.perf_counter() - started
        finally:
            gc.enable()
    deep = deep_size(kept) - sys.getsizeof(kept)
    n = len(docs)
    return deep / n, (traced - sys.getsizeof(kept)) / n, spent / n * 1e6


def report(title: str, docs: list[bytes]) -> None:
    print(f"\n{title}: {len(docs)} objects, {sum(map(len, docs)) / len(docs):,.0f} JSON bytes each on average")
    print(
        f"{'decoder':<14} {'transform':<22} {'deep B/obj':>11} {'ratio':>6} {'traced B/obj':>13} {'ratio':>6} "
        f"{'us/obj':>7}"
    )
    for dname, decode in DECODERS:
        base: tuple[float, float, float] | None = None
        for tname, transform in TRANSFORMS:
            deep, traced, micros = measure(docs, decode, transform)
            base = base or (deep, traced, micros)
            print(
                f"{dname:<14} {tname:<22} {deep:>11,.0f} {deep / base[0]:>6.2f} {traced:>13,.0f} "
                f"{traced / base[1]:>6.2f} {micros:>7.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--modelservings", type=int, default=100, help="ModelServings (8 pods each; default 100)")
    args = parser.parse_args()
    pods: list[dict[str, Any]] = []
    servings: list[dict[str, Any]] = []
    for i in range(args.modelservings):
        ms = modelserving(i)
        servings.append(as_applied(ms, i))
        pods += [o for o in render(ms) if o["kind"] == "Pod"]
    pod_docs = [json.dumps(as_served(p, i)).encode() for i, p in enumerate(pods)]
    ms_docs = [json.dumps(ms).encode() for ms in servings]
    report("Pods", pod_docs)
    report("ModelServings (kubectl-applied)", ms_docs)


if __name__ == "__main__":
    main()
