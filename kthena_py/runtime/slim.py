"""The shared cache's transform: drop from each cached object what no reconciler reads.

:func:`slim` is what :class:`~kthena_py.runtime.cache.SharedCache` applies to every object before storing it.

Guarantees:

* Dropped: ``metadata.managedFields`` and the annotation :data:`LAST_APPLIED` (kubectl's copy of the last
  applied manifest, as large as the spec it copies). No reconciler reads either, and no writer sends a cached
  object's metadata back whole (writes are server-side applies, merge patches that name their own keys, or
  bodies built afresh), so dropping them from the cache never drops them from the cluster.
* Dropped from a Pod's ``spec.volumes``: the service-account token volume the API server's admission adds to every
  pod (named ``kube-api-access-*``, a ``projected`` volume with a ``serviceAccountToken`` source; about a quarter of
  a cached pod, ``bench/cache_memory.py``). The only reader of a cached pod's volumes looks for claims
  (:mod:`kthena_py.plan.modelcache.retire`); no writer sends a cached pod's volumes back (the in-place update patches
  ``spec.containers`` alone, and volumes cannot change on a pod). Every other volume is kept, a token volume of any
  other name too, and the containers' ``volumeMounts`` of it stay (containers are kept whole).
* Everything else is kept, value for value.
* Cheap: only ``metadata``, its ``annotations``, and a pod's ``spec`` and ``volumes`` list are copied (shallowly),
  and only when something is dropped from them; the input is not modified.
* Not done, on purpose (measured with ``bench/cache_memory.py``): interning keys and strings. The client's
  JSON parser (pydantic-core) already shares repeated short strings between decodes, so interning saved
  nothing per pod and cost ~30x the transform's time. Nor are pod container fields dropped: the in-place update
  patches ``spec.containers`` rebuilt from the cached pod, so a cache that lacked a field of them would remove it
  from the pod.
"""

from __future__ import annotations

from kthena_py.kube.objects import KubeObject
from kthena_py.vocab.labels import KUBECTL_LAST_APPLIED

__all__ = ["LAST_APPLIED", "SERVICE_ACCOUNT_VOLUME_PREFIX", "slim"]

LAST_APPLIED = KUBECTL_LAST_APPLIED
SERVICE_ACCOUNT_VOLUME_PREFIX = "kube-api-access-"
"""The name the API server gives the service-account token volume it adds to a pod (a random suffix follows)."""


def slim(obj: KubeObject) -> KubeObject:
    """Return a copy of ``obj`` without what the module docstring lists."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return dict(obj)
    out = dict(obj)
    annotations = metadata.get("annotations")
    last_applied = isinstance(annotations, dict) and LAST_APPLIED in annotations
    if "managedFields" in metadata or last_applied:
        kept = {k: v for k, v in metadata.items() if k != "managedFields"}
        if last_applied:
            assert isinstance(annotations, dict)
            kept["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        out["metadata"] = kept
    if obj.get("kind") == "Pod":
        spec = obj.get("spec")
        volumes = spec.get("volumes") if isinstance(spec, dict) else None
        if isinstance(volumes, list) and volumes:
            remaining = [v for v in volumes if not _service_account_volume(v)]
            if len(remaining) < len(volumes):
                assert isinstance(spec, dict)
                out["spec"] = {**spec, "volumes": remaining}
    return out


def _service_account_volume(volume: object) -> bool:
    """Whether ``volume`` is the token volume the API server's admission adds to every pod (module docstring)."""
    if not isinstance(volume, dict):
        return False
    name = volume.get("name")
    projected = volume.get("projected")
    if (
        not isinstance(name, str)
        or not name.startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)
        or not isinstance(projected, dict)
    ):
        return False
    sources = projected.get("sources")
    return isinstance(sources, list) and any(
        isinstance(source, dict) and "serviceAccountToken" in source for source in sources
    )
