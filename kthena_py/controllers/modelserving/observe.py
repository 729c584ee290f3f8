"""Read-only views of the cluster for the ModelServing reconcilers, all from the informer cache.

Guarantees: no API calls; every function tolerates objects that are absent or half-formed; only
objects controlled by the given ModelServing UID are returned as its own (leftovers of a deleted
same-named predecessor are never adopted; :func:`foreign_pods` lists them, since their names are
taken until the garbage collector removes them).
"""

from __future__ import annotations

import re

from kthena_py.kube.objects import KubeObject, meta
from kthena_py.kube.resources import CONTROLLER_REVISIONS, CRDS, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.core.types import MSRef, PodGroupSupport
from kthena_py.runtime.cache import CacheReader, SharedCache
from kthena_py.vocab.owners import controlled_by

from ..resources import narrow_cache
from ..servingview import NAME_LABEL, ms_ref, observe, parse_modelserving

PODGROUP_CRD_NAME = "podgroups.scheduling.volcano.sh"
PODGROUP_CRD_SELECTOR = f"metadata.name={PODGROUP_CRD_NAME}"

__all__ = [
    "PODGROUP_CRD_SELECTOR",
    "foreign_pods",
    "ms_ref",
    "observe",
    "parse_modelserving",
    "podgroup_support",
    "register_informers",
]


def register_informers(cache: SharedCache) -> None:
    """Make sure the cache watches everything the ModelServing reconcilers read (and only that)."""
    narrow_cache(cache)
    for rt in (PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    cache.informer(PODGROUPS, optional=True)
    cache.informer(CRDS, field_selector=PODGROUP_CRD_SELECTOR)
    cache.index_label(CONTROLLER_REVISIONS, NAME_LABEL)


def foreign_pods(cache: CacheReader, ref: MSRef) -> list[KubeObject]:
    """Cached pods labelled with this ModelServing's name but not controlled by it.

    They are a same-named predecessor's pods that have not gone yet (or orphans): their names are not free.
    Only pods named the way this controller names pods (``<ms>-<group>-<role>-<ordinal>-<index>``) count.
    """
    shape = re.compile(rf"^{re.escape(ref.name)}-[0-9]+-.+-[0-9]+-[0-9]+$")
    return [
        o
        for o in cache.by_label(PODS, NAME_LABEL, ref.name, ref.namespace)
        if not controlled_by(o, ref.uid) and shape.match(str(meta(o).get("name", "")))
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
