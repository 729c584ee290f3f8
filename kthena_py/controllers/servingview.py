"""A ModelServing and what it controls, as the informer cache shows them.

Shared by the ModelServing and eviction reconcilers, which do not import each other.

Guarantees: no API calls; :func:`observe` returns only objects controlled by the given ModelServing UID (leftovers
of a deleted same-named predecessor are never adopted); :func:`parse_modelserving` memoises by (uid,
resourceVersion) in a bounded LRU, derived data lost harmlessly on restart.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kthena_py.api.common import API_VERSION
from kthena_py.api.modelserving import ModelServing
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.core.types import MSRef, Observed
from kthena_py.runtime.cache import CacheReader
from kthena_py.vocab.labels import SERVING_NAME
from kthena_py.vocab.owners import controlled_by

__all__ = ["NAME_LABEL", "ms_ref", "observe", "parse_modelserving"]

NAME_LABEL = SERVING_NAME


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


def observe(cache: CacheReader, ref: MSRef) -> Observed:
    """Everything owned by the ModelServing ``ref``, as the cache sees it now."""
    return Observed(
        pods=tuple(o for o in cache.owned_by(PODS, ref.uid) if controlled_by(o, ref.uid)),
        services=tuple(o for o in cache.owned_by(SERVICES, ref.uid) if controlled_by(o, ref.uid)),
        podgroups=tuple(o for o in cache.owned_by(PODGROUPS, ref.uid) if controlled_by(o, ref.uid)),
        revisions=tuple(
            o
            for o in cache.by_label(CONTROLLER_REVISIONS, NAME_LABEL, ref.name, ref.namespace)
            if controlled_by(o, ref.uid)
        ),
    )
