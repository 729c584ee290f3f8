"""What FakeKube answers besides stored objects: error Statuses, the Scale subresource, and constants.

Guarantees: errors carry a Kubernetes ``Status`` body with the code and reason the API server gives, so code that
reads ``ApiError.body`` sees what it would see from a real server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.kube.errors import Conflict, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType

__all__ = ["TIMESTAMP", "WITHOUT_STATUS", "conflict", "not_found", "scale_of", "spec_of", "status_body", "store_key"]

WITHOUT_STATUS = frozenset({"ConfigMap", "Secret", "Event", "Lease", "ControllerRevision", "ServiceAccount"})
"""Kinds without a status subresource: a write of the main resource writes all of it."""

TIMESTAMP = "2026-01-01T00:00:00Z"
"""``creationTimestamp`` (and ``deletionTimestamp``) of the fake's objects."""


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A failure ``Status`` as the API server sends it."""
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}


def not_found(rt: ResourceType, name: str) -> NotFound:
    """404 for ``name`` of ``rt``."""
    message = f'{rt.plural} "{name}" not found'
    return NotFound(404, "NotFound", message, status_body(404, "NotFound", message))


def conflict(rt: ResourceType, name: str, why: str) -> Conflict:
    """409 Conflict (a failed precondition) for ``name`` of ``rt``."""
    message = f'Operation cannot be fulfilled on {rt.plural} "{name}": {why}'
    return Conflict(409, "Conflict", message, status_body(409, "Conflict", message))


def store_key(obj: Mapping[str, Any]) -> str:
    """The key an informer's store files ``obj`` under."""
    md = obj.get("metadata") or {}
    return f"{md['namespace']}/{md['name']}" if md.get("namespace") else str(md.get("name"))


def spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What raises ``metadata.generation`` when it changes: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def scale_of(obj: Mapping[str, Any]) -> KubeObject:
    """The ``autoscaling/v1`` Scale of ``obj`` (``spec.replicas``, ``status.replicas``)."""
    md = obj.get("metadata") or {}
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {k: md.get(k) for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")},
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas") or 0)},
        "status": {"replicas": int((obj.get("status") or {}).get("replicas") or 0)},
    }
