"""Reading peer manifests: documents out of parsed YAML, the fields present in one, typed field values.

Guarantees:

* :func:`expand` turns parsed YAML documents into :class:`~kthena_py.importers.context.ImportDocument` s, in
  input order, expanding ``kind: List`` (and ``<Kind>List``) items the way ``kubectl get -o yaml`` prints them;
  empty documents are skipped; anything that is not an object is an :class:`ImportFailure` naming the document.
* :func:`report_fields` walks a document against a field table and returns one report line per rule whose field
  is present (once, however many list items carry it), in table order. A present field that no rule covers is an
  :class:`ImportFailure` naming the document and the field ("unknown field"); so is a field whose value has the
  wrong shape for the walk (a list where an object is expected, ...).
  A rule covers its field's whole value: a rule on ``metadata.labels`` covers every label; the walk descends
  into an object only when rules name fields inside it, into a list's items when rules name ``path[].field``.
* The ``string``/``integer``/... readers return a field's value or ``None`` when absent, and raise an
  :class:`ImportFailure` naming the field and the expected type otherwise (a bool is not an integer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kthena_py.importers.context import ImportDocument, rule_line
from kthena_py.importers.report import FieldRule, ImportFailure, ReportLine

__all__ = [
    "boolean",
    "expand",
    "field",
    "integer",
    "mapping",
    "object_list",
    "report_fields",
    "string",
    "string_list",
    "string_map",
]


def _is_list_kind(body: Mapping[str, Any]) -> bool:
    kind = body.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(body.get("items"), list)


def expand(bodies: Iterable[object], namespace: str | None = None) -> tuple[ImportDocument, ...]:
    """The documents of the input, lists expanded, indexes counted after expansion."""
    found: list[ImportDocument] = []
    for position, body in enumerate(bodies):
        if body is None:
            continue
        if not isinstance(body, Mapping):
            raise ImportFailure(len(found), "", "", f"YAML document {position} is not an object")
        items: Sequence[object] = body["items"] if _is_list_kind(body) else [body]
        for item in items:
            if not isinstance(item, Mapping):
                raise ImportFailure(len(found), "", "items[]", f"an item of {body.get('kind')} is not an object")
            found.append(ImportDocument(index=len(found), body=item, namespace_override=namespace))
    return tuple(found)


def _descend_prefixes(table: Sequence[FieldRule]) -> tuple[set[str], set[str]]:
    """Paths whose value is an object to walk into, and paths whose value is a list of objects to walk into."""
    objects: set[str] = {""}
    lists: set[str] = set()
    for rule in table:
        parts = rule.path.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent.endswith("[]"):
                lists.add(parent[:-2])
                objects.add(parent)
            else:
                objects.add(parent)
    return objects, lists


def report_fields(doc: ImportDocument, table: Sequence[FieldRule]) -> list[ReportLine]:
    """One line per rule whose field is present in ``doc`` (table order); unknown fields fail."""
    rules = {rule.path: rule for rule in table}
    objects, lists = _descend_prefixes(table)
    present: set[str] = set()

    def walk(value: Mapping[str, Any], prefix: str) -> None:
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if path in rules:
                present.add(path)
            elif path in lists:
                if not isinstance(child, list):
                    raise ImportFailure(doc.index, doc.source, path, f"expected a list, got {_type_name(child)}")
                for item in child:
                    if not isinstance(item, Mapping):
                        raise ImportFailure(
                            doc.index, doc.source, f"{path}[]", f"expected an object, got {_type_name(item)}"
                        )
                    walk(item, f"{path}[]")
            elif path in objects:
                if child is None:
                    continue
                if not isinstance(child, Mapping):
                    raise ImportFailure(doc.index, doc.source, path, f"expected an object, got {_type_name(child)}")
                walk(child, path)
            else:
                raise ImportFailure(doc.index, doc.source, path, "unknown field")

    walk(doc.body, "")
    return [rule_line(doc, rule) for rule in table if rule.path in present]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def field(body: Mapping[str, Any], path: str) -> object:
    """The value at a dotted path (no list steps), ``None`` when any step is absent or not an object."""
    value: object = body
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _fail(doc: ImportDocument, path: str, expected: str, value: object) -> ImportFailure:
    return ImportFailure(doc.index, doc.source, path, f"expected {expected}, got {_type_name(value)}")


def string(doc: ImportDocument, path: str) -> str | None:
    """A string field."""
    value = field(doc.body, path)
    if value is None or isinstance(value, str):
        return value
    raise _fail(doc, path, "a string", value)


def integer(doc: ImportDocument, path: str) -> int | None:
    """An integer field (a whole float such as ``2.0`` is accepted, as the API server's JSON decoding does)."""
    value = field(doc.body, path)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _fail(doc, path, "an integer", value)


def boolean(doc: ImportDocument, path: str) -> bool | None:
    """A boolean field."""
    value = field(doc.body, path)
    if value is None or isinstance(value, bool):
        return value
    raise _fail(doc, path, "a boolean", value)


def mapping(doc: ImportDocument, path: str) -> Mapping[str, Any] | None:
    """An object field."""
    value = field(doc.body, path)
    if value is None or isinstance(value, Mapping):
        return value
    raise _fail(doc, path, "an object", value)


def string_map(doc: ImportDocument, path: str) -> dict[str, str] | None:
    """An object of strings (labels, env); numbers and booleans are refused, as the API server does."""
    value = mapping(doc, path)
    if value is None:
        return None
    for key, item in value.items():
        if not isinstance(item, str):
            raise _fail(doc, f"{path}.{key}", "a string", item)
    return {str(key): str(item) for key, item in value.items()}


def string_list(doc: ImportDocument, path: str) -> list[str] | None:
    """A list of strings."""
    value = field(doc.body, path)
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail(doc, path, "a list of strings", value)
    for item in value:
        if not isinstance(item, str):
            raise _fail(doc, f"{path}[]", "a string", item)
    return [str(item) for item in value]


def object_list(doc: ImportDocument, path: str) -> list[Mapping[str, Any]] | None:
    """A list of objects."""
    value = field(doc.body, path)
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail(doc, path, "a list", value)
    for item in value:
        if not isinstance(item, Mapping):
            raise _fail(doc, f"{path}[]", "an object", item)
    return list(value)
