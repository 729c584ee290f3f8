"""Read-only views of the cluster for the ModelBooster reconciler, all from the informer cache.

Guarantees: no API calls; children (ModelCaches included) are found by the booster's names and by its
``model-uid`` label (the planner decides which of them it controls); a networking kind counts as served only when
its CRD is in the cache, serves ``v1alpha1`` and is Established.
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.common import API_VERSION
from kthena_py.api.modelbooster import ModelBooster
from kthena_py.kube.objects import KubeObject, meta, object_key
from kthena_py.kube.resources import CRDS, ResourceType
from kthena_py.plan.modelbooster import Children, Observed
from kthena_py.plan.modelbooster.children import Kind
from kthena_py.plan.modelbooster.naming import LABEL_MODEL_UID
from kthena_py.runtime.cache import CacheReader

from ..resources import MODELCACHES, MODELROUTES, MODELSERVERS, MODELSERVINGS

__all__ = [
    "CHILD_TYPES",
    "MODEL_CACHE_CRD",
    "NETWORKING_CRDS",
    "crd_selector",
    "crd_served",
    "observe",
    "parse_booster",
]

CHILD_TYPES: dict[Kind, ResourceType] = {
    "ModelServing": MODELSERVINGS,
    "ModelServer": MODELSERVERS,
    "ModelRoute": MODELROUTES,
    "ModelCache": MODELCACHES,
}
MODEL_CACHE_CRD = f"{MODELCACHES.plural}.{MODELCACHES.group}"
"""The ModelCache CRD (ours): without it, the prefetch opt-in falls back to the per-pod downloader."""
NETWORKING_CRDS: dict[Kind, str] = {
    "ModelServer": f"{MODELSERVERS.plural}.{MODELSERVERS.group}",
    "ModelRoute": f"{MODELROUTES.plural}.{MODELROUTES.group}",
}


def crd_selector(name: str) -> str:
    """The field selector of the informer that watches one CRD."""
    return f"metadata.name={name}"


def parse_booster(obj: KubeObject) -> ModelBooster:
    """Parse a cached booster (its status is not read).

    Raises:
        pydantic.ValidationError: The spec is invalid.
    """
    return ModelBooster.model_validate(
        {
            "apiVersion": obj.get("apiVersion", API_VERSION),
            "kind": "ModelBooster",
            "metadata": obj.get("metadata") or {},
            "spec": obj.get("spec") or {},
        }
    )


def crd_served(cache: CacheReader, name: str) -> bool:
    """Whether the CRD ``name`` is in the cache, serves ``v1alpha1`` and is Established."""
    crd = cache.get(CRDS, name, field_selector=crd_selector(name))
    if crd is None:
        return False
    versions = (crd.get("spec") or {}).get("versions") or []
    served = any(v.get("name") == "v1alpha1" and v.get("served") for v in versions)
    conditions: list[dict[str, Any]] = (crd.get("status") or {}).get("conditions") or []
    established = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
    return served and established


def observe(cache: CacheReader, booster: ModelBooster, children: Children) -> Observed:
    """The cached children of ``booster`` and which child kinds are served."""
    desired: dict[Kind, KubeObject | None] = {
        "ModelServing": children.modelserving,
        "ModelServer": children.modelserver,
        "ModelRoute": children.modelroute,
        "ModelCache": children.modelcache,
    }
    found: dict[Kind, tuple[KubeObject, ...]] = {}
    for kind, rt in CHILD_TYPES.items():
        objects = {object_key(o): o for o in cache.by_label(rt, LABEL_MODEL_UID, booster.uid, booster.namespace)}
        want = desired[kind]
        named = cache.get(rt, str(meta(want).get("name")), booster.namespace) if want is not None else None
        if named is not None:
            objects[object_key(named)] = named
        found[kind] = tuple(objects[k] for k in sorted(objects))
    served: set[Kind] = {"ModelServing"}
    served.update(kind for kind, crd in NETWORKING_CRDS.items() if crd_served(cache, crd))
    return Observed(
        modelservings=found["ModelServing"],
        modelservers=found["ModelServer"],
        modelroutes=found["ModelRoute"],
        served=frozenset(served),
        modelcaches=found["ModelCache"],
    )
