"""What the in-memory store answers besides stored objects: error Statuses, the Scale subresource, and constants.

Guarantees: errors carry a Kubernetes ``Status`` body with the code and reason the API server gives, so code that
reads ``ApiError.body`` sees what it would see from a real server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.kube.errors import AlreadyExists, Conflict, Invalid, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import ResourceType

__all__ = [
    "TIMESTAMP",
    "WITHOUT_STATUS",
    "already_exists",
    "conflict",
    "invalid",
    "not_found",
    "scale_of",
    "spec_of",
    "status_body",
]

WITHOUT_STATUS = frozenset({"ConfigMap", "Secret", "Event", "Lease", "ControllerRevision", "ServiceAccount"})
"""Kinds without a status subresource: a write of the main resource writes all of it."""

TIMESTAMP = "2026-01-01T00:00:00Z"
"""``creationTimestamp`` (and ``deletionTimestamp``) of the store's objects unless it is given a clock."""


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A failure ``Status`` as the API server sends it."""
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}


def not_found(rt: ResourceType, name: str) -> NotFound:
    """404 for ``name`` of ``rt``."""
    message = f'{rt.plural} "{name}" not found'
    return NotFound(404, "NotFound", message, status_body(404, "NotFound", message))


def already_exists(rt: ResourceType, name: str) -> AlreadyExists:
    """409 AlreadyExists for ``name`` of ``rt``."""
    message = f'{rt.plural} "{name}" already exists'
    return AlreadyExists(409, "AlreadyExists", message, status_body(409, "AlreadyExists", message))


def invalid(message: str) -> Invalid:
    """422 Invalid with ``message``."""
    return Invalid(422, "Invalid", message, status_body(422, "Invalid", message))


def conflict(rt: ResourceType, name: str, why: str) -> Conflict:
    """409 Conflict (a failed precondition) for ``name`` of ``rt``."""
    message = f'Operation cannot be fulfilled on {rt.plural} "{name}": {why}'
    return Conflict(409, "Conflict", message, status_body(409, "Conflict", message))


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
