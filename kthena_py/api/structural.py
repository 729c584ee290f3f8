"""What the API server does with a custom object before any validation: strict decoding and structural defaults.

The CRDs' structural schemas (:func:`kthena_py.api.crdgen.kind_schema`, with the full Kubernetes pod schema
embedded in the pod templates) drive both walks, so offline tools see an object exactly as the server stores it:

* :func:`unknown_fields` lists every field the schema does not know, anywhere (inside pod templates too), in the
  form of the server's strict field validation: ``spec.template.roles[0].entryTemplate.spec.containers[0].foo``
  (list indexes as ``[i]``, map keys as ``.key``). At the root, ``metadata`` is checked against ObjectMeta's
  fields; inside ``x-kubernetes-preserve-unknown-fields`` nothing is unknown. ``kubectl apply`` asks for strict
  validation, so the server refuses such an object with ``unknown field "<path>"``.
* :func:`apply_defaults` applies every ``default`` of the schema as the server's structural defaulting does: a
  property that is missing (or ``null`` where the schema is not nullable) gets a deep copy of its default, then
  defaulting recurses into every present property, list item and map value (so defaults inside a defaulted
  object apply too). For example every container port gets ``protocol: TCP``.

Both are pure, never modify their input, and accept any JSON value (wrong types are left to the validators).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

__all__ = ["OBJECT_META_FIELDS", "apply_defaults", "kind_schema_of", "unknown_fields", "with_defaults"]

#: The fields of ``metav1.ObjectMeta`` (what the server decodes an object's root ``metadata`` into).
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)

Schema = dict[str, Any]


@functools.cache
def _schemas() -> dict[str, Schema]:
    from kthena_py.api.crdgen.crd import KIND_SPECS
    from kthena_py.api.crdgen.schema import kind_schema

    return {spec.kind: kind_schema(spec.model) for spec in KIND_SPECS}


def kind_schema_of(kind: str) -> Schema | None:
    """The ``openAPIV3Schema`` of one of our kinds (``None`` for any other kind). Do not modify it."""
    return _schemas().get(kind)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk_unknown(schema: Schema, value: Any, path: str, found: list[str]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = _child(path, str(key))
            if key in properties:
                _walk_unknown(properties[key], item, child, found)
            elif isinstance(additional, dict):
                _walk_unknown(additional, item, child, found)
            elif additional is True:
                continue
            elif properties or schema.get("type") == "object":
                found.append(child)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk_unknown(schema["items"], item, f"{path}[{index}]", found)


def unknown_fields(schema: Schema, document: Any) -> list[str]:
    """Return the path of every field of a top-level object that ``schema`` does not know, in document order.

    Args:
        schema: The kind's ``openAPIV3Schema`` (see :func:`kind_schema_of`).
        document: The decoded object.
    """
    found: list[str] = []
    if not isinstance(document, dict):
        return found
    properties: dict[str, Schema] = schema.get("properties") or {}
    for key, value in document.items():
        if key == "metadata" and isinstance(value, dict):
            found.extend(f"metadata.{name}" for name in value if name not in OBJECT_META_FIELDS)
        elif key in properties:
            _walk_unknown(properties[key], value, str(key), found)
        else:
            found.append(str(key))
    return found


def _nullable_null(value: Any, schema: Schema) -> bool:
    return value is None and not schema.get("nullable")


def _default_in_place(schema: Schema, value: Any) -> None:
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        for key, prop in properties.items():
            if "default" in prop and (key not in value or _nullable_null(value[key], prop)):
                value[key] = copy.deepcopy(prop["default"])
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                _default_in_place(properties[key], item)
            elif isinstance(additional, dict):
                _default_in_place(additional, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default_in_place(schema["items"], item)


def apply_defaults(schema: Schema, document: Any) -> Any:
    """Return a copy of ``document`` with the schema's defaults applied (see the module docstring)."""
    result = copy.deepcopy(document)
    _default_in_place(schema, result)
    return result


def with_defaults(document: Any) -> Any:
    """Return a copy of a ModelServing, AutoscalingPolicy or ModelBooster with its CRD's defaults applied.

    Documents of other kinds (or that are not objects) are returned as a copy, unchanged.
    """
    kind = document.get("kind") if isinstance(document, dict) else None
    schema = kind_schema_of(kind) if isinstance(kind, str) else None
    return copy.deepcopy(document) if schema is None else apply_defaults(schema, document)
