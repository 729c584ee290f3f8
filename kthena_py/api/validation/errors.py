r"""Kubernetes-style field errors (``k8s.io/apimachinery/pkg/util/validation/field``).

Guarantees: ``str(FieldError)`` renders exactly like Go's ``field.Error.Error()`` for scalar values, e.g.
``spec.template.roles[1].name: Duplicate value: "prefill"`` or
``spec.replicas: Invalid value: -1: replicas must be a non-negative integer``; ``Required``, ``Forbidden``
and ``TooLong`` never show the value. Composite values (lists, dicts) render as compact JSON where Go would
print a ``%#v`` struct dump. :func:`aggregate_message` builds the admission-webhook denial text
(``validation failed:\n  - <error>``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from kthena_py.api.duration import Duration
from kthena_py.api.intstr import IntOrString
from kthena_py.api.quantity import Quantity

__all__ = [
    "OMITTED",
    "ErrorType",
    "FieldError",
    "aggregate_message",
    "duplicate",
    "forbidden",
    "invalid",
    "not_found",
    "not_supported",
    "required",
    "too_long",
    "too_many",
]


class _Omitted:
    """Marker for "no value to show" (Go's ``omitValue``)."""

    def __repr__(self) -> str:
        return "OMITTED"


#: Pass as ``value`` to render an error without a value.
OMITTED: Any = _Omitted()


class ErrorType(StrEnum):
    """The error types of ``field.ErrorType``, by their short names."""

    INVALID = "Invalid"
    REQUIRED = "Required"
    DUPLICATE = "Duplicate"
    FORBIDDEN = "Forbidden"
    NOT_SUPPORTED = "NotSupported"
    NOT_FOUND = "NotFound"
    TOO_LONG = "TooLong"
    TOO_MANY = "TooMany"

    @property
    def label(self) -> str:
        """The text Kubernetes prints for this type, e.g. ``"Invalid value"``."""
        return _LABELS[self]


_LABELS = {
    ErrorType.INVALID: "Invalid value",
    ErrorType.REQUIRED: "Required value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
}
_VALUELESS = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG})


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, IntOrString):
        return value.value
    if isinstance(value, Quantity | Duration):
        return value.raw
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def format_value(value: Any) -> str:
    """Render a bad value like Go's ``field.Error`` does for scalars.

    Args:
        value: The value.

    Returns:
        ``null`` for ``None``, ``true``/``false`` for booleans, numbers as is, strings quoted, quantities and
        durations by their original text, anything else as compact JSON.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, str):
        return _go_quote(value)
    if isinstance(value, IntOrString):
        return format_value(value.value)
    if isinstance(value, Quantity | Duration):
        return str(value.raw)
    return json.dumps(_jsonable(value), separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class FieldError:
    """One validation error at a JSON path.

    Attributes:
        path: The field path, e.g. ``spec.template.roles[1].name`` or ``spec.x.minRoleReplicas[prefill]``.
        type: The error type (a :class:`ErrorType`, which is a ``str``).
        message: The detail text (may be empty).
        value: The offending value, or :data:`OMITTED`.
    """

    path: str
    type: ErrorType
    message: str = ""
    value: Any = field(default=OMITTED, compare=False)

    def body(self) -> str:
        """Render everything after ``<path>: `` (Go's ``ErrorBody``)."""
        text = self.type.label
        if self.type not in _VALUELESS and self.value is not OMITTED:
            text += f": {format_value(self.value)}"
        if self.message:
            text += f": {self.message}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"

    def with_prefix(self, prefix: str) -> FieldError:
        """Return this error with ``prefix`` prepended to its path (e.g. ``items[0]``)."""
        return FieldError(f"{prefix}.{self.path}" if self.path else prefix, self.type, self.message, self.value)


def invalid(path: str, value: Any, message: str) -> FieldError:
    """``field.Invalid``: the value is not acceptable."""
    return FieldError(path, ErrorType.INVALID, message, value)


def required(path: str, message: str = "") -> FieldError:
    """``field.Required``: a value must be provided."""
    return FieldError(path, ErrorType.REQUIRED, message)


def duplicate(path: str, value: Any) -> FieldError:
    """``field.Duplicate``: the value must be unique."""
    return FieldError(path, ErrorType.DUPLICATE, "", value)


def forbidden(path: str, message: str) -> FieldError:
    """``field.Forbidden``: the field may not be set here."""
    return FieldError(path, ErrorType.FORBIDDEN, message)


def not_found(path: str, value: Any) -> FieldError:
    """``field.NotFound``: the value refers to something that does not exist."""
    return FieldError(path, ErrorType.NOT_FOUND, "", value)


def not_supported(path: str, value: Any, valid: list[str]) -> FieldError:
    """``field.NotSupported``: the value is not one of ``valid``."""
    message = "supported values: " + ", ".join(_go_quote(item) for item in valid) if valid else ""
    return FieldError(path, ErrorType.NOT_SUPPORTED, message, value)


def too_long(path: str, max_length: int) -> FieldError:
    """``field.TooLong``: a string exceeds ``max_length`` bytes."""
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError(path, ErrorType.TOO_LONG, f"may not be more than {max_length} {unit}")


def too_many(path: str, actual: int, max_items: int) -> FieldError:
    """``field.TooMany``: a list (or map) has more than ``max_items`` entries."""
    unit = "item" if max_items == 1 else "items"
    return FieldError(path, ErrorType.TOO_MANY, f"must have at most {max_items} {unit}", actual)


def aggregate_message(errors: list[FieldError]) -> str:
    r"""Build the denial message Kthena's validating webhooks return.

    Args:
        errors: The errors, in order.

    Returns:
        ``"validation failed:\n  - <error>\n  - <error>"``.
    """
    return "validation failed:\n" + "\n".join(f"  - {error}" for error in errors)
