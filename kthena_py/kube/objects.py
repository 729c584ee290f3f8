"""Small pure helpers over Kubernetes objects held as plain JSON dicts.

Guarantees: every accessor tolerates absent optional parts (``metadata``, ``labels``, ...) and never
mutates its argument unless its name says so.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kthena_py.vocab import owners
from kthena_py.vocab.pods import is_terminating

KubeObject = dict[str, Any]
"""An object as the API server serialises it (JSON decoded)."""


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return ``metadata`` or an empty mapping."""
    m = obj.get("metadata")
    if type(m) is dict:  # what decoded JSON holds: no abstract-class check on the hot path
        return m
    return m if isinstance(m, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    """Return ``metadata.name`` (empty when absent)."""
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    """Return ``metadata.namespace`` (empty for cluster-scoped objects)."""
    return str(meta(obj).get("namespace") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    """Return ``metadata.uid`` (empty when absent)."""
    return str(meta(obj).get("uid") or "")


def resource_version_of(obj: Mapping[str, Any]) -> str:
    """Return ``metadata.resourceVersion`` (empty when absent)."""
    return str(meta(obj).get("resourceVersion") or "")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """Return a copy of ``metadata.labels``."""
    return dict(meta(obj).get("labels") or {})


def label_of(obj: Mapping[str, Any], key: str) -> str | None:
    """Return the value of label ``key`` (``None`` when absent), without copying the labels."""
    labels = meta(obj).get("labels")
    return labels.get(key) if isinstance(labels, dict) else None


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """Return a copy of ``metadata.annotations``."""
    return dict(meta(obj).get("annotations") or {})


def owner_uids(obj: Mapping[str, Any]) -> list[str]:
    """Return the UIDs of all ``ownerReferences``."""
    return owners.owner_uids(obj)


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Return the owner reference with ``controller: true``, if any."""
    return owners.controller_ref(obj)


def object_key(obj: Mapping[str, Any]) -> str:
    """Return the cache key ``namespace/name`` (just ``name`` when cluster-scoped)."""
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Return whether the object has a ``deletionTimestamp``."""
    return is_terminating(obj)


def strip_managed_fields(obj: KubeObject) -> KubeObject:
    """Return a copy of ``obj`` without ``metadata.managedFields`` (the bulk of most objects)."""
    out = dict(obj)
    m = out.get("metadata")
    if isinstance(m, dict) and "managedFields" in m:
        out["metadata"] = {k: v for k, v in m.items() if k != "managedFields"}
    return out


def deep_copy(obj: KubeObject) -> KubeObject:
    """Return a deep copy, for callers that want to modify an object taken from a cache."""
    return copy.deepcopy(obj)
