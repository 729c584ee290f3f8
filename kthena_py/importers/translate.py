"""``translate(peer, input, options)``: a peer's manifests in, kthena_py's objects and the field report out.

Guarantees:

* Accepts YAML text (several documents, ``kind: List`` expanded) or already parsed documents. Invalid YAML, a
  document that is not an object, an apiVersion/kind the peer has no translator for, a field no rule covers or
  a value of the wrong type raise :class:`~kthena_py.importers.report.ImportFailure` naming the document (and
  the field); nothing is returned then, so the CLI writes nothing.
* Every document's metadata is checked first (:func:`~kthena_py.importers.metadata.check_metadata`): a name is
  required, labels and annotations are objects of strings. Documents are translated in input order; each may
  look at the others (:class:`ImportContext`). Two documents emitting the same object (kind, namespace, name)
  are refused, naming the second; so is a document whose emitted object our own admission would refuse (a name
  the peer accepts but a ModelServing cannot carry), naming the field and the rule.
* ``options.strict``: when any field of the desired state would be dropped (observed state, i.e. ``status`` and
  server-set metadata, is not counted), :class:`StrictViolation` is raised, carrying the translation so the
  report can still be shown.
* Pure: no file, cluster or clock; the peer packages are looked up in :data:`PEERS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any, cast

import yaml

from kthena_py.api.validation import KINDS, validate_document
from kthena_py.importers.context import ImportContext, ImportDocument, ImportOptions, Translator
from kthena_py.importers.documents import expand
from kthena_py.importers.metadata import OBSERVED_STATE, check_metadata
from kthena_py.importers.report import FieldRule, ImportFailure, ReportLine, Translation

__all__ = ["PEERS", "StrictViolation", "field_tables", "parse", "translate", "translators"]

PEERS: Mapping[str, str] = {"kubeai": "kthena_py.importers.kubeai", "llmkube": "kthena_py.importers.llmkube"}
"""Each peer's package: it exports ``TRANSLATORS`` and ``FIELD_TABLES`` keyed by ``(apiVersion, kind)``."""


class StrictViolation(Exception):
    """``--strict`` and fields would be dropped: the translation (for its report) and the dropped lines."""

    def __init__(self, translation: Translation, dropped: tuple[ReportLine, ...]) -> None:
        names = ", ".join(f"document {line.document} ({line.source}) {line.path}" for line in dropped)
        super().__init__(f"--strict: {len(dropped)} field(s) would be dropped: {names}")
        self.translation = translation
        self.dropped = dropped


def _package(peer: str) -> Any:
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r} (one of {', '.join(PEERS)})")
    try:
        return importlib.import_module(PEERS[peer])
    except ModuleNotFoundError as exc:
        if exc.name != PEERS[peer]:
            raise
        raise ValueError(f"no translators for {peer} in this build") from None


def translators(peer: str) -> dict[tuple[str, str], Translator]:
    """The peer's translators by ``(apiVersion, kind)``."""
    return cast("dict[tuple[str, str], Translator]", _package(peer).TRANSLATORS)


def field_tables(peer: str) -> dict[tuple[str, str], tuple[FieldRule, ...]]:
    """The peer's field tables by ``(apiVersion, kind)``."""
    return cast("dict[tuple[str, str], tuple[FieldRule, ...]]", _package(peer).FIELD_TABLES)


def parse(text: str) -> list[object]:
    """The YAML documents of ``text``; invalid YAML names the document it is in (0-based)."""
    found: list[object] = []
    try:
        for body in yaml.safe_load_all(text):
            found.append(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ImportFailure(len(found), "", "", f"invalid YAML{where}: {problem}") from None
    return found


def _check_emitted(doc: ImportDocument, obj: Mapping[str, Any]) -> None:
    """Refuse a document whose translation our admission would refuse, naming the field and the rule.

    Say a name valid for the peer's kind (``0``) that cannot name a ModelServing: nothing is emitted then. Only
    the kinds our admission validates (Kthena's and ours) are checked; core objects (Services) are the API
    server's to judge.
    """
    if obj.get("kind") not in KINDS:
        return
    errors = validate_document(obj)
    if errors:
        first = errors[0]
        raise ImportFailure(
            doc.index, doc.source, first.path, f"the {obj.get('kind')} it makes is invalid: {first.message}"
        )


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = obj.get("metadata") or {}
    return str(obj.get("kind")), str(metadata.get("namespace")), str(metadata.get("name"))


def translate(peer: str, text_or_docs: str | Iterable[object], options: ImportOptions) -> Translation:
    """Translate every document of the input; see the module docstring for the failures."""
    table = translators(peer)
    bodies = parse(text_or_docs) if isinstance(text_or_docs, str) else list(text_or_docs)
    documents = expand(bodies, options.namespace)
    context = ImportContext(options=options, documents=documents)
    objects: list[dict[str, Any]] = []
    report: list[ReportLine] = []
    emitted: dict[tuple[str, str, str], int] = {}
    for doc in documents:
        translator = _translator(peer, table, doc)
        check_metadata(doc)
        made, lines = translator(doc, context)
        for obj in made:
            _check_emitted(doc, obj)
            key = _key(obj)
            if key in emitted:
                raise ImportFailure(
                    doc.index,
                    doc.source,
                    "metadata.name",
                    f"{key[0]} {key[1]}/{key[2]} is also made by document {emitted[key]}",
                )
            emitted[key] = doc.index
        objects.extend(made)
        report.extend(lines)
    translation = Translation(objects=tuple(objects), report=tuple(report))
    if options.strict:
        dropped = tuple(line for line in report if line.outcome == "dropped" and line.path not in OBSERVED_STATE)
        if dropped:
            raise StrictViolation(translation, dropped)
    return translation


def _translator(peer: str, table: Mapping[tuple[str, str], Translator], doc: ImportDocument) -> Translator:
    found = table.get((doc.api_version, doc.kind))
    if found is not None:
        return found
    known = ", ".join(f"{api_version} {kind}" for api_version, kind in table)
    if not doc.api_version:
        raise ImportFailure(doc.index, doc.source, "apiVersion", "required")
    if not doc.kind:
        raise ImportFailure(doc.index, doc.source, "kind", "required")
    path = "kind" if any(api_version == doc.api_version for api_version, _ in table) else "apiVersion"
    raise ImportFailure(
        doc.index, doc.source, path, f"{peer} has no translator for {doc.api_version} {doc.kind} (known: {known})"
    )
