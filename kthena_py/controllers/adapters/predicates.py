"""What wakes the adapter reconciler: only ModelServings that have, or had, LoRA adapters, and their pods.

Guarantees: a ModelServing passes while its ``serving.kthena-py.io/lora-adapters`` annotation is set, in the
change's old or new version, or while it carries an ``AdaptersLoaded`` condition (a manager restarted after the
annotation was removed still clears it). A pod passes :func:`~kthena_py.runtime.controller.pod_state_changed` and
then only when its owner (read from the cache) passes, or when the pod itself carries adapter labels or a load
intent (adapters to unload after the annotation went). Every other ModelServing, the fleet that names no adapter,
costs the reconciler nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.kube.objects import KubeObject, controller_ref, meta, namespace_of
from kthena_py.runtime.cache import CacheReader
from kthena_py.runtime.controller import Predicate, pod_state_changed, spec_or_metadata_changed
from kthena_py.vocab.conditions import ADAPTERS_LOADED
from kthena_py.vocab.labels import ADAPTER_LABEL_PREFIX, LORA_ADAPTERS, LORA_LOADING

from ..resources import MODELSERVINGS

__all__ = ["modelserving_has_adapters", "modelserving_matters", "pod_matters"]


def modelserving_has_adapters(obj: Mapping[str, Any] | None) -> bool:
    """Whether the ModelServing names adapters or still reports on them."""
    if obj is None:
        return False
    if LORA_ADAPTERS in (meta(obj).get("annotations") or {}):
        return True
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == ADAPTERS_LOADED for c in conditions)


def modelserving_matters(old: KubeObject | None, new: KubeObject) -> bool:
    """ModelServings: a spec or metadata change of one that has (or had) adapters."""
    return spec_or_metadata_changed(old, new) and (modelserving_has_adapters(old) or modelserving_has_adapters(new))


def _carries_adapters(pod: KubeObject | None) -> bool:
    if pod is None:
        return False
    metadata = meta(pod)
    if LORA_LOADING in (metadata.get("annotations") or {}):
        return True
    labels = metadata.get("labels")
    return isinstance(labels, dict) and any(k.startswith(ADAPTER_LABEL_PREFIX) for k in labels)


def pod_matters(cache: CacheReader) -> Predicate:
    """Pods: the state changes the reconciler acts on, of pods whose ModelServing has adapters or that carry some."""

    def predicate(old: KubeObject | None, new: KubeObject) -> bool:
        if not pod_state_changed(old, new):
            return False
        if _carries_adapters(new) or _carries_adapters(old):
            return True
        ref = controller_ref(new)
        if ref is None or ref.get("kind") != MODELSERVINGS.kind:
            return False
        return modelserving_has_adapters(cache.get(MODELSERVINGS, str(ref.get("name") or ""), namespace_of(new)))

    return predicate
