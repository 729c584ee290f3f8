"""The shared cache's transform: drop from each cached object what no reconciler reads.

:func:`slim` is what :class:`~kthena_py.runtime.cache.SharedCache` applies to every object before storing it.

Guarantees:

* Dropped: ``metadata.managedFields`` and the annotation :data:`LAST_APPLIED` (kubectl's copy of the last
  applied manifest, as large as the spec it copies). No reconciler reads either, and no writer sends a cached
  object's metadata back whole (writes are server-side applies, merge patches that name their own keys, or
  bodies built afresh), so dropping them from the cache never drops them from the cluster. Everything else
  is kept, value for value.
* Cheap: only ``metadata`` and its ``annotations`` are copied (shallowly); the input is not modified.
* Not done, on purpose (measured with ``bench/cache_memory.py``): interning keys and strings. The client's
  JSON parser (pydantic-core) already shares repeated short strings between decodes, so interning saved
  nothing per pod and cost ~30x the transform's time. Nor are pod spec fields dropped (the service-account
  volume is ~a quarter of a cached pod): the in-place update patches ``spec.containers`` rebuilt from the
  cached pod, so a cache that lacked a field of them would remove it from the pod.
"""

from __future__ import annotations

from kthena_py.kube.objects import KubeObject
from kthena_py.vocab.labels import KUBECTL_LAST_APPLIED

__all__ = ["LAST_APPLIED", "slim"]

LAST_APPLIED = KUBECTL_LAST_APPLIED


def slim(obj: KubeObject) -> KubeObject:
    """Return a copy of ``obj`` without ``metadata.managedFields`` and the last-applied annotation."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return dict(obj)
    annotations = metadata.get("annotations")
    last_applied = isinstance(annotations, dict) and LAST_APPLIED in annotations
    if "managedFields" not in metadata and not last_applied:
        return dict(obj)
    kept = {k: v for k, v in metadata.items() if k != "managedFields"}
    if last_applied:
        assert isinstance(annotations, dict)
        kept["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return {**obj, "metadata": kept}
