"""What the activator's state annotation on a ModelServing should say, and the one write that makes it so.

The annotation (:data:`~kthena_py.vocab.labels.ACTIVATOR_STATE`) is what ``kubectl get ms`` prints in its
``Activator`` column; the activator keeps it, so the words are on a ModelServing only while an activator runs.

Guarantees:

* :func:`desired_state` is :data:`SCALED_TO_ZERO` (``scaled to zero (activator)``) exactly when the ModelServing is
  opted in (:func:`~kthena_py.plan.activator.targets.opted_in`: the annotation or an AutoscalingPolicy with
  ``minReplicas: 0``), not a ModelPool member (``pooled``: the pool controller, not the activator, brings it
  back) and its ``spec.replicas`` is the integer 0; otherwise ``None`` (no annotation). A missing
  ``spec.replicas`` counts as 1, the API default.
* :func:`needs_write` is true only when the annotation differs from :func:`desired_state` and the ModelServing is
  not being deleted: on a converged cluster it is false for every object, so a restart writes nothing, and several
  activators reading the same object agree.
* :func:`apply_body` is the smallest server-side apply body: ``apiVersion``, ``kind``, name, namespace, the
  ``resourceVersion`` read (so a stale read is refused with a conflict and a deleted object is never re-created),
  and the annotation only when there is a state to show. Omitting it removes the annotation this field manager
  applied before; nothing else of the object is claimed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kthena_py.plan.activator.targets import opted_in
from kthena_py.vocab.labels import ACTIVATOR_SCALED_TO_ZERO, ACTIVATOR_STATE

__all__ = ["SCALED_TO_ZERO", "apply_body", "current_state", "desired_state", "needs_write"]

SCALED_TO_ZERO = ACTIVATOR_SCALED_TO_ZERO
"""The annotation's value while the activator would wake the ModelServing on the next request."""


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _metadata(ms: Mapping[str, Any]) -> Mapping[str, Any]:
    return _dict(ms.get("metadata"))


def _at_zero(ms: Mapping[str, Any]) -> bool:
    replicas = _dict(ms.get("spec")).get("replicas", 1)
    return isinstance(replicas, int) and not isinstance(replicas, bool) and replicas == 0


def desired_state(ms: Mapping[str, Any], policies: Iterable[Mapping[str, Any]], pooled: bool = False) -> str | None:
    """The annotation value ``ms`` should carry, or ``None`` for none (see the module docstring)."""
    if not pooled and _at_zero(ms) and opted_in(ms, policies):
        return SCALED_TO_ZERO
    return None


def current_state(ms: Mapping[str, Any]) -> str | None:
    """The annotation value ``ms`` carries, or ``None``."""
    value = _dict(_metadata(ms).get("annotations")).get(ACTIVATOR_STATE)
    return None if value is None else str(value)


def needs_write(ms: Mapping[str, Any], policies: Iterable[Mapping[str, Any]], pooled: bool = False) -> bool:
    """Whether the annotation of ``ms`` must be written (see the module docstring)."""
    if _metadata(ms).get("deletionTimestamp") or not _metadata(ms).get("name"):
        return False
    return current_state(ms) != desired_state(ms, policies, pooled)


def apply_body(ms: Mapping[str, Any], desired: str | None) -> dict[str, Any]:
    """The server-side apply body that sets (``desired``) or drops (``None``) the annotation on ``ms``."""
    md = _metadata(ms)
    metadata: dict[str, Any] = {
        "name": md.get("name"),
        "namespace": md.get("namespace"),
        "resourceVersion": md.get("resourceVersion"),
    }
    if desired is not None:
        metadata["annotations"] = {ACTIVATOR_STATE: desired}
    return {"apiVersion": ms.get("apiVersion"), "kind": ms.get("kind"), "metadata": metadata}
