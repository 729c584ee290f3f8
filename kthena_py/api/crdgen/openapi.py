"""Turn Kubernetes' published OpenAPI v3 schemas into inline structural schemas a CRD may embed.

This is the pure half of ``hack/vendor-openapi.py``: the script fetches ``/openapi/v3/api/v1`` from a real
kube-apiserver once, and :func:`inline_schema` converts the closure of each type we embed (``PodSpec``,
``Affinity``, ``ObjectReference``, ...) into the JSON committed under ``kthena_py/api/crdgen/data/``.

Guarantees of :func:`inline_schema` (modelled on what controller-gen emits for embedded core types):

* Every ``$ref`` (bare or wrapped in a one-element ``allOf``) is replaced by the referenced schema; the
  referring property's own ``description`` wins over the type's. A reference cycle raises ``ValueError``
  (CRD schemas cannot be recursive).
* ``Quantity`` becomes ``anyOf: [integer, string]`` + ``x-kubernetes-int-or-string`` + the quantity pattern;
  ``IntOrString`` becomes ``anyOf: [integer, string]`` + ``x-kubernetes-int-or-string``.
* Only keys a CRD's ``JSONSchemaProps`` accepts are kept; patch-strategy and union extensions and ``enum`` are
  dropped (a Kubernetes enum marker lists known values, not necessarily every value a pod accepts, and
  controller-gen does not emit them either).
* Defaults: a non-zero default (``protocol: TCP``) is kept; zero-value defaults (``""``, ``0``, ``false``,
  ``{}``, ``[]``) that OpenAPI generation adds to non-pointer fields are dropped, except on a property that is a
  key of an ``x-kubernetes-list-type: map`` list and not required (the API server requires map keys to be
  required or defaulted).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["INT_OR_STRING", "QUANTITY_PATTERN", "inline_schema", "int_or_string", "quantity"]

#: The pattern controller-gen puts on every ``resource.Quantity`` field.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_REF_PREFIX = "#/components/schemas/"

_ALLOWED = frozenset(
    {
        "description",
        "type",
        "format",
        "title",
        "default",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "maxProperties",
        "minProperties",
        "required",
        "items",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
        "properties",
        "additionalProperties",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
_KNOWN_FORMATS = frozenset({"int32", "int64", "float", "double", "byte", "date-time", "date", "password"})


def int_or_string(description: str | None = None) -> dict[str, Any]:
    """The structural schema of an ``IntOrString`` field."""
    schema: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    if description:
        schema["description"] = description
    return schema


def quantity(description: str | None = None) -> dict[str, Any]:
    """The structural schema of a ``resource.Quantity`` field (int-or-string plus the quantity pattern)."""
    schema = int_or_string(description)
    schema["pattern"] = QUANTITY_PATTERN
    return schema


def _is_zero(value: Any) -> bool:
    return value in ("", 0, False, None) or value == {} or value == []


def _ref_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return ref.removeprefix(_REF_PREFIX)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
        inner = all_of[0].get("$ref")
        if isinstance(inner, str):
            return inner.removeprefix(_REF_PREFIX)
    return None


class _Inliner:
    def __init__(self, components: Mapping[str, Any]) -> None:
        self.components = components

    def resolve(self, node: Mapping[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        name = _ref_name(node)
        description = node.get("description")
        if name is not None:
            if name in stack:
                raise ValueError(f"recursive schema: {' -> '.join((*stack, name))}")
            if name == _QUANTITY:
                return quantity(description)
            if name == INT_OR_STRING:
                return int_or_string(description)
            target = self.components.get(name)
            if not isinstance(target, Mapping):
                raise ValueError(f"unknown schema {name}")
            resolved = self.resolve(target, (*stack, name))
            outer = {key: value for key, value in node.items() if key not in ("$ref", "allOf")}
            outer = self.clean(outer, stack)
            resolved.update({key: value for key, value in outer.items() if key != "description"})
            if description:
                resolved["description"] = description
            return resolved
        return self.clean(node, stack)

    def clean(self, node: Mapping[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key not in _ALLOWED:
                continue
            if key == "format" and value not in _KNOWN_FORMATS:
                continue
            if key == "properties":
                out[key] = {prop: self.resolve(schema, stack) for prop, schema in value.items()}
            elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
                out[key] = self.resolve(value, stack)
            elif key in ("allOf", "anyOf", "oneOf"):
                out[key] = [self.resolve(item, stack) for item in value]
            else:
                out[key] = copy.deepcopy(value)
        return out


def _fix_defaults(schema: dict[str, Any], keep: frozenset[str] = frozenset()) -> None:
    """Drop zero-value defaults below ``schema``, keeping those of the property names in ``keep``."""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            if "default" in prop and _is_zero(prop["default"]) and name not in keep:
                del prop["default"]
            _fix_defaults(prop)
    items = schema.get("items")
    if isinstance(items, dict):
        item_keep: frozenset[str] = frozenset()
        if schema.get("x-kubernetes-list-type") == "map":
            required = set(items.get("required") or [])
            item_keep = frozenset(set(schema.get("x-kubernetes-list-map-keys") or []) - required)
        if "default" in items and _is_zero(items["default"]):
            del items["default"]
        _fix_defaults(items, item_keep)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        if "default" in additional and _is_zero(additional["default"]):
            del additional["default"]
        _fix_defaults(additional)
    for key in ("allOf", "anyOf", "oneOf"):
        for item in schema.get(key) or []:
            if isinstance(item, dict):
                _fix_defaults(item)


def inline_schema(components: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Inline the schema ``name`` and everything it references into one structural schema.

    Args:
        components: ``components.schemas`` of an OpenAPI v3 document served by kube-apiserver.
        name: The schema to inline, e.g. ``io.k8s.api.core.v1.PodSpec``.

    Returns:
        A self-contained schema (see the module docstring for the transformations).

    Raises:
        ValueError: ``name`` or a referenced schema is unknown, or the references are recursive.
    """
    schema = _Inliner(components).resolve({"$ref": _REF_PREFIX + name}, ())
    schema.pop("default", None)
    _fix_defaults(schema)
    return schema
