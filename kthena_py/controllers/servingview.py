"""A ModelServing and what it controls, as the informer cache shows them.

Shared by the ModelServing and eviction reconcilers, which do not import each other.

Guarantees: no API calls; :func:`observe` returns only objects controlled by the given ModelServing UID (leftovers
of a deleted same-named predecessor are never adopted); :func:`parse_modelserving` memoises by (uid,
resourceVersion) in a bounded LRU, derived data lost harmlessly on restart, and hands back the very same (frozen)
spec object while a ModelServing's spec is unchanged (equal as JSON), so that the hashes memoised per spec object
(:mod:`~kthena_py.plan.modelserving.core.revision`) are not computed again after each status write.

The serving gate: :func:`observe` also carries the gate of a ModelServing that names a ModelCache (the annotation
``serving.kthena-py.io/model-cache``), decided by the pure
:func:`~kthena_py.plan.modelserving.core.modelcache.decide_gate` from the cached ModelCache (or its absence), so
every ModelServing planner, and the eviction budget, plan the same revision. The ModelCache informer is optional
(:func:`watch_model_caches`: the CRD may not be installed; then every named cache is "not found"), and a
ModelServing without the annotation never reads it.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import Any

from pydantic import TypeAdapter

from kthena_py.api.common import API_VERSION
from kthena_py.api.modelcache import ModelCache
from kthena_py.api.modelserving import ModelServing, ModelServingSpec, ModelServingStatus
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.core.modelcache import CacheGate, cache_name, decide_gate, templates_of
from kthena_py.plan.modelserving.core.types import MSRef, Observed
from kthena_py.runtime.cache import CacheReader, SharedCache
from kthena_py.runtime.controller import Mapper
from kthena_py.runtime.reconcile import Request
from kthena_py.vocab.labels import SERVING_NAME
from kthena_py.vocab.owners import controlled_by

from .resources import MODELCACHES, MODELSERVINGS

__all__ = [
    "NAME_LABEL",
    "model_cache_changed",
    "model_cache_gate",
    "modelservings_of_cache",
    "ms_ref",
    "observe",
    "parse_modelserving",
    "watch_model_caches",
]

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
_SPECS: OrderedDict[str, tuple[Any, ModelServingSpec]] = OrderedDict()
"""The last parsed spec per ModelServing UID, with the JSON it was parsed from (bounded like ``_PARSED``)."""
_METADATA: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def parse_modelserving(obj: KubeObject) -> ModelServing:
    """Parse a cached ModelServing; an unreadable status is dropped rather than failing the spec.

    Results are memoised by (uid, resourceVersion) — the identity of an object's content — in a
    bounded LRU; this is derived data, lost harmlessly on restart, never a source of truth. A new
    resourceVersion whose spec equals the last one parsed for the same uid (a status or metadata change)
    reuses that spec object: the same value, without parsing it again.

    Raises:
        pydantic.ValidationError: The spec itself is invalid.
    """
    md = meta(obj)
    uid = str(md.get("uid") or "")
    key = (uid, str(md.get("resourceVersion") or ""))
    if all(key) and key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key]
    raw_spec = obj.get("spec") or {}
    prior = _SPECS.get(uid) if uid else None
    if prior is not None and prior[0] == raw_spec and obj.get("apiVersion", API_VERSION) == API_VERSION:
        _SPECS.move_to_end(uid)
        parsed = _with_spec(obj, prior[1])
    else:
        parsed = _parse_modelserving(obj)
        if uid:
            _SPECS[uid] = (raw_spec, parsed.spec)
            _SPECS.move_to_end(uid)
            if len(_SPECS) > _PARSED_MAX:
                _SPECS.popitem(last=False)
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


def _with_spec(obj: KubeObject, spec: ModelServingSpec) -> ModelServing:
    """The ModelServing ``obj`` around an already parsed ``spec``: what :func:`_parse_modelserving` gives for it."""
    fields: dict[str, Any] = {
        "api_version": API_VERSION,
        "kind": "ModelServing",
        "metadata": _METADATA.validate_python(obj.get("metadata") or {}),
        "spec": spec,
    }
    if obj.get("status"):
        with contextlib.suppress(ValueError):  # unreadable: dropped, as _parse_modelserving drops it
            fields["status"] = ModelServingStatus.model_validate(obj["status"])
    return ModelServing.model_construct(**fields)


def watch_model_caches(cache: SharedCache) -> None:
    """Cache ModelCaches (optional: without their CRD, a named cache is simply not found)."""
    cache.informer(MODELCACHES, optional=True)


_CACHES: OrderedDict[tuple[str, str], ModelCache] = OrderedDict()


def _parse_cache(obj: KubeObject) -> ModelCache:
    md = meta(obj)
    key = (str(md.get("uid") or ""), str(md.get("resourceVersion") or ""))
    if all(key) and key in _CACHES:
        _CACHES.move_to_end(key)
        return _CACHES[key]
    parsed = ModelCache.model_validate(obj)
    if all(key):
        _CACHES[key] = parsed
        if len(_CACHES) > _PARSED_MAX:
            _CACHES.popitem(last=False)
    return parsed


def model_cache_gate(cache: CacheReader, obj: KubeObject | None) -> CacheGate | None:
    """The serving gate of the cached ModelServing ``obj`` (``None``: it names no ModelCache, or is gone).

    Raises:
        pydantic.ValidationError: The ModelServing's spec is invalid (as :func:`parse_modelserving`).
    """
    if obj is None:
        return None
    name = cache_name(meta(obj).get("annotations"))
    if name is None:
        return None
    return gate_with(obj, cache.get(MODELCACHES, name, str(meta(obj).get("namespace") or "")))


def gate_with(obj: KubeObject, found: KubeObject | None) -> CacheGate | None:
    """The serving gate of ModelServing ``obj`` given the ModelCache it names as read (``found``; None: absent).

    Raises:
        pydantic.ValidationError: The ModelServing's spec is invalid (as :func:`parse_modelserving`).
    """
    annotations = meta(obj).get("annotations")
    if cache_name(annotations) is None:
        return None
    ms = parse_modelserving(obj)
    unreadable: str | None = None
    parsed: ModelCache | None = None
    if found is not None:
        try:
            parsed = _parse_cache(found)
        except ValueError as exc:
            unreadable = str(exc).splitlines()[0]
    return decide_gate(annotations, templates_of(ms), parsed, unreadable=unreadable)


def modelservings_of_cache(cache: CacheReader) -> Mapper:
    """Map a ModelCache to the ModelServings of its namespace that name it."""

    def mapper(obj: KubeObject) -> list[Request]:
        md = meta(obj)
        namespace, name = str(md.get("namespace") or ""), str(md.get("name") or "")
        return [
            Request(namespace, str(meta(ms).get("name")))
            for ms in cache.list(MODELSERVINGS, namespace)
            if cache_name(meta(ms).get("annotations")) == name
        ]

    return mapper


def model_cache_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Whether a ModelCache changed in what a gate reads (its spec, generation or status)."""
    if old is None:
        return True
    return (
        old.get("spec") != new.get("spec")
        or old.get("status") != new.get("status")
        or meta(old).get("generation") != meta(new).get("generation")
    )


def observe(cache: CacheReader, ref: MSRef) -> Observed:
    """Everything owned by the ModelServing ``ref`` (and its ModelCache gate), as the cache sees it now.

    Raises:
        pydantic.ValidationError: The ModelServing names a ModelCache but its spec is invalid.
    """
    gate = model_cache_gate(cache, cache.get(MODELSERVINGS, ref.name, ref.namespace))
    return Observed(
        model_cache=gate,
        pods=tuple(o for o in cache.owned_by(PODS, ref.uid) if controlled_by(o, ref.uid)),
        services=tuple(o for o in cache.owned_by(SERVICES, ref.uid) if controlled_by(o, ref.uid)),
        podgroups=tuple(o for o in cache.owned_by(PODGROUPS, ref.uid) if controlled_by(o, ref.uid)),
        revisions=tuple(
            o
            for o in cache.by_label(CONTROLLER_REVISIONS, NAME_LABEL, ref.name, ref.namespace)
            if controlled_by(o, ref.uid)
        ),
    )
