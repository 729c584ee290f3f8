"""Schema validation: run a pydantic model and report its errors as Kubernetes field errors.

Guarantees:

* Every pydantic error becomes exactly one :class:`FieldError` whose path uses the JSON (camelCase) names,
  ``[i]`` for list indexes and ``[key]`` for map keys, e.g. ``spec.template.roles[0].name``.
* Messages follow the API server's CRD (OpenAPI) validation, so a corpus entry can be replayed against a
  real API server: ``<path> in body should be greater than or equal to 0``, ``Unsupported value: "x":
  supported values: ...``, ``Required value``, ``Too many: 5: must have at most 4 items``,
  ``Too long: may not be more than 12 bytes``, ``<path> in body should match '<pattern>'``,
  ``<path> in body must be of type integer: "string"``.
* Unknown fields (which the API server prunes silently, or rejects under ``fieldValidation=Strict``) are
  reported as ``Forbidden: unknown field "<path>"``; documents are read by JSON name only, so a snake_case
  key (accepted by ``Model.model_validate`` for Python callers) is an unknown field here.
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from kthena_py.api.validation.errors import (
    ErrorType,
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)

__all__ = ["loc_to_path", "parse_model"]

M = TypeVar("M", bound=BaseModel)

_TYPE_NAMES = {
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "string_type": "string",
    "bool_type": "boolean",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "list_type": "array",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``Optional`` wrappers from a type annotation."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return Any
            annotation = members[0]
        else:
            return annotation


def _model_field(model: type[BaseModel], name: str) -> Any:
    for field_name, info in model.model_fields.items():
        if name in (info.alias, field_name):
            return info.annotation
    return None


def loc_to_path(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic error location into a Kubernetes field path.

    Args:
        model: The root model the location is relative to.
        loc: The pydantic location, e.g. ``("spec", "template", "roles", 0, "name")``.

    Returns:
        The path, e.g. ``spec.template.roles[0].name``; map keys render as ``[key]``, while the fields of
        opaque embedded objects (``dict[str, Any]``, e.g. a pod spec) render as ``.field``.
    """
    text = ""
    current: Any = model
    items = [item for item in loc if item != "[key]"]
    for item in items:
        current = _unwrap(current)
        origin = get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            text += f".{item}" if text else str(item)
            current = _model_field(current, str(item))
        elif origin is list:
            text += f"[{item}]"
            current = get_args(current)[0]
        elif origin is dict and get_args(current)[1] is not Any:
            text += f"[{item}]"  # a map: the key is data
            current = get_args(current)[1]
        else:
            text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
            current = Any
    return text


def _enum_values(expected: str) -> list[str]:
    return re.findall(r"'([^']*)'", expected)


def _convert(model: type[BaseModel], error: ErrorDetails) -> FieldError:
    kind = error["type"]
    path = loc_to_path(model, error["loc"])
    value = error.get("input")
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    container = "properties" if isinstance(value, dict) else "items"
    if kind == "missing":
        return required(path)
    if kind == "extra_forbidden":
        return forbidden(path, f'unknown field "{path}"')
    if kind in ("literal_error", "enum"):
        return not_supported(path, value, _enum_values(str(ctx.get("expected", ""))))
    if kind in _TYPE_NAMES or kind == "k8s_type":
        expected = ctx.get("expected") if kind == "k8s_type" else _TYPE_NAMES[kind]
        message = f'{path} in body must be of type {expected}: "{_json_type(value)}"'
        return FieldError(path, ErrorType.INVALID, message, value)
    if kind == "greater_than_equal":
        return invalid(path, value, f"{path} in body should be greater than or equal to {ctx['ge']}")
    if kind == "less_than_equal":
        return invalid(path, value, f"{path} in body should be less than or equal to {ctx['le']}")
    if kind == "string_too_short":
        return invalid(path, value, f"{path} in body should be at least {ctx['min_length']} chars long")
    if kind == "string_too_long":
        return too_long(path, int(ctx["max_length"]))
    if kind == "string_pattern_mismatch":
        return invalid(path, value, f"{path} in body should match '{ctx['pattern']}'")
    if kind == "too_short":
        count = ctx["min_length"]
        return invalid(path, len(value), f"{path} in body should have at least {count} {container}")
    if kind == "too_long":
        actual = ctx.get("actual_length")
        return too_many(path, int(actual) if actual is not None else len(value), int(ctx["max_length"]))
    if kind == "k8s_invalid":
        return invalid(path, value, str(ctx.get("detail", error["msg"])))
    return invalid(path, value, error["msg"])


def parse_model(model: type[M], document: Any) -> tuple[M | None, list[FieldError]]:
    """Validate a JSON document against a model.

    Args:
        model: The model class, e.g. :class:`~kthena_py.api.ModelServing`.
        document: The decoded JSON/YAML document.

    Returns:
        ``(instance, [])`` when the document is schema-valid, else ``(None, errors)``.
    """
    try:
        # Manifests use the JSON names only: a snake_case key is an unknown field to the API server.
        return model.model_validate(document, by_alias=True, by_name=False), []
    except ValidationError as exc:
        return None, [_convert(model, error) for error in exc.errors()]
