"""Validate a raw manifest end to end: dispatch by ``apiVersion``/``kind``, strict decoding, schema, semantic rules.

Kthena's kinds are ``workload.serving.volcano.sh/v1alpha1``; ModelCache and ModelPool are
``serving.kthena-py.io/v1alpha1`` (:data:`API_VERSIONS`): a kind under the other group's apiVersion is an
unsupported ``apiVersion``.

Guarantees, in the API server's order:

1. Strict decoding (what ``kubectl apply`` asks for): a field the CRD's structural schema does not know,
   anywhere, including inside pod templates (:func:`kthena_py.api.structural.unknown_fields`), is reported as
   ``Forbidden: unknown field "<path>"``, and nothing else is checked, as the server stops there.
2. Schema errors; semantic (webhook) rules only run on schema-valid objects, so a document gets either its
   schema errors or its semantic errors.

List kinds are validated item by item, with paths prefixed by ``items[i]``. Unknown kinds and API versions are
reported, never raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from kthena_py.api.autoscaling import AutoscalingPolicy, AutoscalingPolicyList
from kthena_py.api.common import API_VERSION
from kthena_py.api.modelbooster import ModelBooster, ModelBoosterList
from kthena_py.api.modelcache import MODEL_CACHE_API_VERSION, ModelCache, ModelCacheList
from kthena_py.api.modelpool import MODEL_POOL_API_VERSION, MODEL_POOL_KIND, ModelPool, ModelPoolList
from kthena_py.api.modelserving import ModelServing, ModelServingList
from kthena_py.api.structural import kind_schema_of, unknown_fields
from kthena_py.api.validation.autoscaling import validate_autoscalingpolicy
from kthena_py.api.validation.errors import FieldError, forbidden, invalid, not_supported, required
from kthena_py.api.validation.modelbooster import validate_modelbooster
from kthena_py.api.validation.modelcache import validate_modelcache
from kthena_py.api.validation.modelpool import validate_modelpool
from kthena_py.api.validation.modelserving import validate_modelserving
from kthena_py.api.validation.schema import parse_model

__all__ = ["API_VERSIONS", "KINDS", "validate_document"]

_Semantic = Callable[[Any, Any], list[FieldError]]
#: kind -> (model, list model, semantic validator)
KINDS: dict[str, tuple[type[BaseModel], type[BaseModel], _Semantic]] = {
    "ModelServing": (ModelServing, ModelServingList, validate_modelserving),
    "AutoscalingPolicy": (AutoscalingPolicy, AutoscalingPolicyList, validate_autoscalingpolicy),
    "ModelBooster": (ModelBooster, ModelBoosterList, validate_modelbooster),
    "ModelCache": (ModelCache, ModelCacheList, validate_modelcache),
    MODEL_POOL_KIND: (ModelPool, ModelPoolList, validate_modelpool),
}
#: The apiVersion of each kind that is not Kthena's (``workload.serving.volcano.sh/v1alpha1``).
API_VERSIONS: dict[str, str] = {"ModelCache": MODEL_CACHE_API_VERSION, MODEL_POOL_KIND: MODEL_POOL_API_VERSION}


def _strict(kind: str, doc: Any) -> list[FieldError]:
    schema = kind_schema_of(kind)
    if schema is None:
        return []
    return [forbidden(path, f'unknown field "{path}"') for path in unknown_fields(schema, doc)]


def _single(kind: str, semantic: _Semantic, doc: Any, old_doc: Any) -> list[FieldError]:
    unknown = _strict(kind, doc)
    if unknown:
        return unknown
    model = KINDS[kind][0]
    obj, errors = parse_model(model, doc)
    if obj is None:
        return errors
    old = None
    if old_doc is not None:
        old, old_errors = parse_model(model, old_doc)
        if old is None:
            return [error.with_prefix("oldObject") for error in old_errors]
    return semantic(obj, old)


def validate_document(doc: Any, old: Any = None) -> list[FieldError]:
    """Validate one decoded manifest as the API server plus Kthena's webhooks would.

    Args:
        doc: The decoded JSON/YAML object (a dict).
        old: For an UPDATE, the stored object (same kind); ``None`` for a CREATE.

    Returns:
        Field errors; empty when the object would be admitted.
    """
    if not isinstance(doc, dict):
        return [invalid("", type(doc).__name__, "a manifest must be a JSON object")]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version is None:
        return [required("apiVersion")]
    list_kinds = {f"{name}List": name for name in KINDS}
    known = sorted({API_VERSION, *API_VERSIONS.values()})
    if api_version not in known:
        return [not_supported("apiVersion", api_version, known)]
    item = list_kinds.get(kind, kind) if isinstance(kind, str) else None
    if item in KINDS and api_version != API_VERSIONS.get(item, API_VERSION):
        return [not_supported("apiVersion", api_version, [API_VERSIONS.get(item, API_VERSION)])]
    if kind in KINDS:
        return _single(kind, KINDS[kind][2], doc, old)
    if kind in list_kinds:
        item_kind = list_kinds[kind]
        _, list_model, semantic = KINDS[item_kind]
        items = doc.get("items")
        if isinstance(items, list):
            unknown = [
                error.with_prefix(f"items[{index}]")
                for index, item in enumerate(items)
                for error in _strict(item_kind, item)
            ]
            if unknown:
                return unknown
        parsed, errors = parse_model(list_model, doc)
        if parsed is None:
            return errors
        found: list[FieldError] = []
        for index, item in enumerate(doc.get("items") or []):
            found.extend(error.with_prefix(f"items[{index}]") for error in _single(item_kind, semantic, item, None))
        return found
    if kind is None:
        return [required("kind")]
    return [not_supported("kind", kind, [*KINDS, *list_kinds])]
