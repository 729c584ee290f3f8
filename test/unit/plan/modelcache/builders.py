"""Builders of ModelCaches, Jobs, pods and nodes as the API server would show them (for the planner tests)."""

from __future__ import annotations

import json
from typing import Any

from kthena_py.api.modelcache import ModelCache
from kthena_py.plan.modelcache import JobView, NodeView, fingerprint, job_view, node_view
from kthena_py.vocab.labels import (
    MODEL_CACHE_ATTEMPT,
    MODEL_CACHE_CONTENT,
    MODEL_CACHE_FINGERPRINT,
    MODEL_CACHE_JOB_KIND,
    MODEL_CACHE_NODE,
)
from kthena_py.vocab.times import format_time

SHA_A = "a" * 64
SHA_B = "b" * 64
PVC = {"persistentVolumeClaim": {"claimName": "models"}}
TEMPLATE = {"volumeClaimTemplate": {"size": "10Gi", "storageClassName": "fast"}}
NODE_LOCAL = {"nodeLocal": {"path": "/var/lib/models", "nodeSelector": {"gpu": "true"}}}


def cache(status: dict[str, Any] | None = None, **spec: Any) -> ModelCache:
    body: dict[str, Any] = {"source": "hf://org/llama", "storage": PVC, **spec}
    document: dict[str, Any] = {
        "metadata": {"name": "llama", "namespace": "ns", "uid": "cache-uid", "generation": 2},
        "spec": body,
    }
    if status is not None:
        document["status"] = status
    return ModelCache.model_validate(document)


def result(ok: bool = True, reason: str | None = None, message: str = "", **extra: Any) -> str:
    files = [
        {"name": "model.safetensors", "size": 2 * 1024**3, "sha256": SHA_A},
        {"name": "config.json", "size": 512, "sha256": SHA_B},
    ]
    body: dict[str, Any] = {"ok": ok, "message": message, "files": files if ok else [], **extra}
    if reason:
        body["reason"] = reason
    if ok:
        body["sizeBytes"] = sum(f["size"] for f in files)
        body["revision"] = "abc123"
    return json.dumps(body)


def pod(job_uid: str, phase: str = "Running", message: str | None = None, ip: str = "10.0.0.7") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "podIP": ip}
    if message is not None:
        status["containerStatuses"] = [
            {
                "name": "download",
                "state": {
                    "terminated": {
                        "exitCode": 0 if phase == "Succeeded" else 1,
                        "reason": "Completed" if phase == "Succeeded" else "Error",
                        "message": message,
                    }
                },
            }
        ]
    return {
        "metadata": {
            "name": f"p-{job_uid}",
            "creationTimestamp": format_time(100),
            "ownerReferences": [{"uid": job_uid, "controller": True}],
        },
        "status": status,
    }


def job(
    mc: ModelCache,
    state: str = "active",
    *,
    attempt: int = 0,
    node: str | None = None,
    created: float = 100.0,
    finished: float | None = None,
    pod_phase: str | None = "Running",
    message: str | None = None,
    fp: str | None = None,
    kind: str = "download",
    name: str | None = None,
    content: str | None = None,
) -> JobView:
    fp = fp or fingerprint(mc.spec)
    uid = name or f"job-{fp[:4]}-{node or ''}-{attempt}-{kind}" + (f"-{content}" if content else "")
    labels = {MODEL_CACHE_FINGERPRINT: fp, MODEL_CACHE_ATTEMPT: str(attempt), MODEL_CACHE_JOB_KIND: kind}
    if content is not None:
        labels[MODEL_CACHE_CONTENT] = content
    annotations = {MODEL_CACHE_NODE: node} if node else {}
    status: dict[str, Any] = {}
    if state == "succeeded":
        status = {
            "succeeded": 1,
            "completionTime": format_time(created + 60 if finished is None else finished),
            "conditions": [{"type": "Complete", "status": "True"}],
        }
    elif state == "failed":
        status = {
            "failed": 2,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "message": "Job has reached the specified backoff limit",
                    "lastTransitionTime": format_time(created + 30 if finished is None else finished),
                }
            ],
        }
    obj = {
        "metadata": {
            "name": name or uid,
            "uid": uid,
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": format_time(created),
            "ownerReferences": [{"uid": mc.uid, "controller": True}],
        },
        "spec": {"completions": 1},
        "status": status,
    }
    pods = [pod(uid, pod_phase, message)] if pod_phase is not None else []
    return job_view(obj, pods)


def node(name: str, ready: bool = True, **labels: str) -> NodeView:
    return node_view(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }
    )
