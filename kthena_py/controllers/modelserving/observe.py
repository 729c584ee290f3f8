"""Read-only views of the cluster for the ModelServing reconcilers, all from the informer cache.

Guarantees: no API calls; every function tolerates objects that are absent or half-formed; only
objects controlled by the given ModelServing UID are returned as its own (leftovers of a deleted
same-named predecessor are never adopted; :func:`foreign_pods` lists them, since their names are
taken until the garbage collector removes them).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from kthena_py.api.common import API_VERSION
from kthena_py.api.modelserving import ModelServing
from kthena_py.kube.objects import KubeObject, controller_ref, meta
from kthena_py.kube.resources import CONTROLLER_REVISIONS, CRDS, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.types import MSRef, Observed, PodGroupSupport
from kthena_py.runtime.cache import CacheReader, SharedCache
from kthena_py.vocab.labels import SERVING_NAME

from ..resources import narrow_cache

PODGROUP_CRD_NAME = "podgroups.scheduling.volcano.sh"
PODGROUP_CRD_SELECTOR = f"metadata.name={PODGROUP_CRD_NAME}"
NAME_LABEL = SERVING_NAME


def register_informers(cache: SharedCache) -> None:
    """Make sure the cache watches everything the ModelServing reconcilers read (and only that)."""
    narrow_cache(cache)
    for rt in (PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    cache.informer(PODGROUPS, optional=True)
    cache.informer(CRDS, field_selector=PODGROUP_CRD_SELECTOR)
    cache.index_label(CONTROLLER_REVISIONS, NAME_LABEL)


def ms_ref(obj: KubeObject) -> MSRef:
    """The identity of a cached ModelServing."""
    md = meta(obj)
    return MSRef(
        name=str(md.get("name", "")),
        namespace=str(md.get("namespace", "")),
        uid=str(md.get("uid", "")),
        generation=int(md.get("generation") or 0),
    )


_PARSED: OrderedDict[tuple[str, str], ModelServing] = OrderedDict()
_PARSED_MAX = 2048


def parse_modelserving(obj: KubeObject) -> ModelServing:
    """Parse a cached ModelServing; an unreadable status is dropped rather than failing the spec.

    Results are memoised by (uid, resourceVersion) — the identity of an object's content — in a
    bounded LRU; this is derived data, lost harmlessly on restart, never a source of truth.

    Raises:
        pydantic.ValidationError: The spec itself is invalid.
    """
    md = meta(obj)
    key = (str(md.get("uid") or ""), str(md.get("resourceVersion") or ""))
    if all(key) and key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key]
    parsed = _parse_modelserving(obj)
    if all(key):
        _PARSED[key] = parsed
        if len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
    return parsed


def _parse_modelserving(obj: KubeObject) -> ModelServing:
    base: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", API_VERSION),
        "kind": "ModelServing",
        "metadata": obj.get("metadata") or {},
        "spec": obj.get("spec") or {},
    }
    if obj.get("status"):
        try:
            return ModelServing.model_validate({**base, "status": obj["status"]})
        except ValueError:
            pass
    return ModelServing.model_validate(base)


def _controlled_by(obj: KubeObject, uid: str) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == uid


def observe(cache: CacheReader, ref: MSRef) -> Observed:
    """Everything owned by the ModelServing ``ref``, as the cache sees it now."""
    return Observed(
        pods=tuple(o for o in cache.owned_by(PODS, ref.uid) if _controlled_by(o, ref.uid)),
        services=tuple(o for o in cache.owned_by(SERVICES, ref.uid) if _controlled_by(o, ref.uid)),
        podgroups=tuple(o for o in cache.owned_by(PODGROUPS, ref.uid) if _controlled_by(o, ref.uid)),
        revisions=tuple(
            o
            for o in cache.by_label(CONTROLLER_REVISIONS, NAME_LABEL, ref.name, ref.namespace)
            if _controlled_by(o, ref.uid)
        ),
    )


def foreign_pods(cache: CacheReader, ref: MSRef) -> list[KubeObject]:
    """Cached pods labelled with this ModelServing's name but not controlled by it.

    They are a same-named predecessor's pods that have not gone yet (or orphans): their names are not free.
    Only pods named the way this controller names pods (``<ms>-<group>-<role>-<ordinal>-<index>``) count.
    """
    shape = re.compile(rf"^{re.escape(ref.name)}-[0-9]+-.+-[0-9]+-[0-9]+$")
    return [
        o
        for o in cache.by_label(PODS, NAME_LABEL, ref.name, ref.namespace)
        if not _controlled_by(o, ref.uid) and shape.match(str(meta(o).get("name", "")))
    ]


def podgroup_support(cache: CacheReader) -> PodGroupSupport:
    """Whether Volcano's PodGroup CRD is served, and whether it has ``spec.subGroupPolicy``."""
    crd = cache.get(CRDS, PODGROUP_CRD_NAME, field_selector=PODGROUP_CRD_SELECTOR)
    if crd is None:
        return PodGroupSupport(crd_served=False)
    sub_group = False
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") != "v1beta1" or not version.get("served"):
            continue
        schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
        spec_props = (schema.get("spec") or {}).get("properties") or {}
        sub_group = "subGroupPolicy" in spec_props
        return PodGroupSupport(crd_served=True, sub_group_policy=sub_group)
    return PodGroupSupport(crd_served=False)
