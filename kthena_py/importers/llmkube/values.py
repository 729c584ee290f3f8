"""Typed reads of an input document's fields, failing with the document and the field on a wrong type.

Guarantees:

* Every reader takes a dotted path without list markers (``spec.vllmConfig.dtype``) and returns ``None`` when the
  field (or an object above it) is absent or ``null``.
* A value of the wrong type raises :class:`~kthena_py.importers.report.ImportFailure` naming the document and the
  field, with the type expected and the type found; ``bool`` is never accepted as a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.importers.context import ImportDocument
from kthena_py.importers.report import ImportFailure

__all__ = [
    "read_bool",
    "read_float",
    "read_int",
    "read_object",
    "read_objects",
    "read_str",
    "read_str_list",
    "read_str_map",
]


def _raw(doc: ImportDocument, path: str) -> Any:
    value: Any = doc.body
    walked = ""
    for key in path.split("."):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ImportFailure(doc.index, doc.source, walked, f"expected an object, got {type(value).__name__}")
        value = value.get(key)
        walked = f"{walked}.{key}" if walked else key
    return value


def _wrong(doc: ImportDocument, path: str, expected: str, value: Any) -> ImportFailure:
    return ImportFailure(doc.index, doc.source, path, f"expected {expected}, got {type(value).__name__} {value!r}")


def read_str(doc: ImportDocument, path: str) -> str | None:
    """A string field."""
    value = _raw(doc, path)
    if value is None or isinstance(value, str):
        return value
    raise _wrong(doc, path, "a string", value)


def read_int(doc: ImportDocument, path: str) -> int | None:
    """An integer field."""
    value = _raw(doc, path)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _wrong(doc, path, "an integer", value)


def read_float(doc: ImportDocument, path: str) -> float | None:
    """A number field (integers accepted)."""
    value = _raw(doc, path)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _wrong(doc, path, "a number", value)


def read_bool(doc: ImportDocument, path: str) -> bool | None:
    """A boolean field."""
    value = _raw(doc, path)
    if value is None or isinstance(value, bool):
        return value
    raise _wrong(doc, path, "a boolean", value)


def read_object(doc: ImportDocument, path: str) -> Mapping[str, Any] | None:
    """An object field (kept as it is: a Kubernetes type copied whole)."""
    value = _raw(doc, path)
    if value is None or isinstance(value, Mapping):
        return value
    raise _wrong(doc, path, "an object", value)


def read_objects(doc: ImportDocument, path: str) -> list[Mapping[str, Any]] | None:
    """A list of objects."""
    value = _raw(doc, path)
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(item, Mapping) for item in value):
        return list(value)
    raise _wrong(doc, path, "a list of objects", value)


def read_str_list(doc: ImportDocument, path: str) -> list[str] | None:
    """A list of strings."""
    value = _raw(doc, path)
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise _wrong(doc, path, "a list of strings", value)


def read_str_map(doc: ImportDocument, path: str) -> dict[str, str] | None:
    """A map of strings to strings (labels, a node selector)."""
    value = _raw(doc, path)
    if value is None:
        return None
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise _wrong(doc, path, "a map of strings", value)
