"""What happened to every field of a peer's manifest: mapped, approximated or dropped, and why.

Guarantees:

* A :class:`FieldRule` is one row of a translator's field table: a field of the peer's kind (a dotted path
  with ``[]`` for list items, e.g. ``spec.adapters[].name``), its :data:`Outcome`, where it goes in kthena_py
  (``target``) and a note (how it is approximated, or why it is dropped). Each translator keeps one table in code;
  the docs render the same table, so the two cannot drift.
* A :class:`ReportLine` is a rule applied to one document: which document (index in the input and
  ``kind/name``) and which field it was, for fields that were actually present.
* :class:`ImportFailure` is bad input: it names the document and the field, and the CLI turns it into exit
  code 2 with nothing on stdout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OUTCOMES", "FieldRule", "ImportFailure", "Outcome", "ReportLine", "Translation"]

Outcome = Literal["mapped", "approximated", "dropped"]
OUTCOMES: tuple[Outcome, ...] = ("mapped", "approximated", "dropped")


@dataclass(frozen=True)
class FieldRule:
    """One field of a peer kind and what the translator does with it."""

    path: str
    outcome: Outcome
    target: str
    """Where it goes (``ModelServing spec.replicas``), or ``""`` when dropped."""
    note: str = ""
    """How it is approximated, or why it is dropped (required for both)."""


@dataclass(frozen=True)
class ReportLine:
    """A rule as applied to one input document."""

    document: int
    """0-based index of the document in the input (after expanding ``kind: List``)."""
    source: str
    """``Kind/namespace/name`` of the input object."""
    path: str
    outcome: Outcome
    target: str
    note: str


@dataclass(frozen=True)
class Translation:
    """The objects translated from the input, and the report on its fields."""

    objects: tuple[dict[str, object], ...]
    report: tuple[ReportLine, ...]


class ImportFailure(Exception):
    """Input that cannot be translated: names the document and the field."""

    def __init__(self, document: int, source: str, path: str, message: str) -> None:
        where = f"document {document}" + (f" ({source})" if source else "") + (f", {path}" if path else "")
        super().__init__(f"{where}: {message}")
        self.document = document
        self.source = source
        self.path = path
        self.message = message
