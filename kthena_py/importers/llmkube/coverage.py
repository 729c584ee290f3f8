"""Which field-table rows the fields present in a document fall under.

Guarantees:

* A row whose path is a prefix of no other row is a *whole* row: it covers the field and everything below it (a
  Kubernetes type copied as it is, such as a probe or an affinity, or a map with free keys such as
  ``nodeSelector``). Every other row is a leaf of an object the walk descends into.
* :func:`covered_rows` walks the document and returns each row that covers a present field exactly once, in the
  table's order, however many list items carry it (``[]`` in a path stands for every item).
* A present field that no row covers raises :class:`~kthena_py.importers.report.ImportFailure` naming the
  document and the field (``unknown field``); so does a field whose value has the wrong shape for the table (a
  scalar where the table has an object or a list).
* Empty objects and lists, and ``null`` values, are not present fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kthena_py.importers.context import ImportDocument
from kthena_py.importers.report import FieldRule, ImportFailure

__all__ = ["covered_rows", "whole_paths"]


def whole_paths(table: Sequence[FieldRule]) -> frozenset[str]:
    """The rows that cover their whole subtree (no other row lies below them)."""
    paths = [rule.path for rule in table]
    return frozenset(
        path
        for path in paths
        if not any(other.startswith(path + ".") or other.startswith(path + "[]") for other in paths)
    )


def _inner_paths(table: Sequence[FieldRule]) -> frozenset[str]:
    inner: set[str] = set()
    for rule in table:
        path = rule.path
        while True:
            cut = max(path.rfind("."), path.rfind("[]"))
            if cut <= 0:
                break
            path = path[:cut]
            inner.add(path)
    return frozenset(inner)


def covered_rows(doc: ImportDocument, table: Sequence[FieldRule]) -> list[FieldRule]:
    """The rows of ``table`` covering the fields present in ``doc``, each once, in the table's order."""
    by_path = {rule.path: rule for rule in table}
    whole = whole_paths(table)
    inner = _inner_paths(table)
    hit: set[str] = set()

    def walk(value: Any, path: str) -> None:
        if value is None:
            return
        if path in whole:
            if value != {} and value != []:
                hit.add(path)
            return
        if path and path not in inner:
            raise ImportFailure(doc.index, doc.source, path, "unknown field: no rule in the LLMKube field table")
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for item in value:
                walk(item, f"{path}[]")
        else:
            shape = "a list" if any(p.startswith(path + "[]") for p in by_path) else "an object"
            raise ImportFailure(doc.index, doc.source, path, f"expected {shape}, got {type(value).__name__}")

    walk(doc.body, "")
    return [rule for rule in table if rule.path in hit]
