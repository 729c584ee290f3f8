"""What a translator gets: one input document, the whole input around it, and the user's options.

Guarantees:

* :class:`ImportDocument` is one peer object as it was read (after expanding ``kind: List``), with its index in
  the input and the names a report needs. ``namespace`` is the ``--namespace`` override when one was given, the
  object's own namespace otherwise (``default`` when it has none), so every emitted object lands in one place.
* :class:`ImportContext` lets a translator look at the other input documents (an InferenceService's Model) and
  read the options; it never reads a file or a cluster.
* :func:`origin_metadata` is the one place the origin labels and annotation are built: every emitted object
  carries them (peer, source kind, source name, and ``<apiVersion> <Kind> <namespace>/<name>``). A name longer
  than a label value may be (63) is shortened in the label to its first 54 characters, ``-`` and 8 hex digits of
  its sha256 (still unique, still a valid label value); the annotation always holds it whole.
* :func:`rule_line` turns a field table row into a report line for one document.

A translator has the signature of :data:`Translator`; it returns the objects it emits and one report line for
every field present in its document, and raises :class:`~kthena_py.importers.report.ImportFailure` for bad input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kthena_py.importers.report import FieldRule, ReportLine
from kthena_py.vocab.labels import IMPORTED_FROM, IMPORTED_KIND, IMPORTED_NAME, IMPORTED_PEER

__all__ = [
    "DEFAULT_NAMESPACE",
    "ImportContext",
    "ImportDocument",
    "ImportOptions",
    "Peer",
    "ResourceProfile",
    "Translator",
    "label_value",
    "origin_metadata",
    "rule_line",
]

Peer = Literal["kubeai", "llmkube"]
DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class ResourceProfile:
    """One of KubeAI's resource profiles (its system config ``resourceProfiles.<name>``).

    ``requests``/``limits`` are per unit: a Model's ``resourceProfile: "<name>:<count>"`` multiplies them by
    ``count``, as KubeAI does.
    """

    image_name: str = ""
    """Which entry of the engine's image map to use (``cpu``, ``nvidia-gpu``...), ``""`` for the default."""
    requests: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    runtime_class_name: str = ""
    scheduler_name: str = ""


@dataclass(frozen=True)
class ImportOptions:
    """The CLI's options, as a translator sees them."""

    namespace: str | None = None
    """``--namespace``: every emitted object goes there (and references follow)."""
    strict: bool = False
    """``--strict``: fail when a field would be dropped (enforced by ``translate``)."""
    kubeai_profiles: Mapping[str, ResourceProfile] | None = None
    """KubeAI's resource profiles from ``--kubeai-config``; ``None``: KubeAI's documented defaults."""
    kubeai_images: Mapping[str, Mapping[str, str]] | None = None
    """KubeAI's ``modelServers.<engine>.images`` from ``--kubeai-config`` (engines it names replace the defaults)."""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class ImportDocument:
    """One input object (a mapping as parsed), and where it sits in the input."""

    index: int
    body: Mapping[str, Any]
    namespace_override: str | None = None

    @property
    def api_version(self) -> str:
        """``apiVersion``, ``""`` when absent."""
        return _text(self.body.get("apiVersion"))

    @property
    def kind(self) -> str:
        """``kind``, ``""`` when absent."""
        return _text(self.body.get("kind"))

    @property
    def metadata(self) -> Mapping[str, Any]:
        """``metadata``, empty when absent."""
        metadata = self.body.get("metadata")
        return metadata if isinstance(metadata, Mapping) else {}

    @property
    def name(self) -> str:
        """``metadata.name``, ``""`` when absent."""
        return _text(self.metadata.get("name"))

    @property
    def namespace(self) -> str:
        """The ``--namespace`` override, else ``metadata.namespace``, else ``default``."""
        if self.namespace_override:
            return self.namespace_override
        return _text(self.metadata.get("namespace")) or DEFAULT_NAMESPACE

    @property
    def source(self) -> str:
        """``Kind/namespace/name``, the way reports and errors name the document."""
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ImportContext:
    """The options and every document of the input."""

    options: ImportOptions
    documents: tuple[ImportDocument, ...] = ()

    def find(self, kind: str, name: str) -> ImportDocument | None:
        """Another input document of this kind and name (first match), or ``None``."""
        for document in self.documents:
            if document.kind == kind and document.name == name:
                return document
        return None


Translator = Callable[[ImportDocument, ImportContext], tuple[list[dict[str, Any]], list[ReportLine]]]


def rule_line(doc: ImportDocument, rule: FieldRule, *, note: str | None = None) -> ReportLine:
    """The report line of ``rule`` applied to ``doc`` (``note`` replaces the rule's note when given)."""
    return ReportLine(
        document=doc.index,
        source=doc.source,
        path=rule.path,
        outcome=rule.outcome,
        target=rule.target,
        note=rule.note if note is None else note,
    )


LABEL_VALUE_MAX = 63


def label_value(text: str) -> str:
    """``text`` if it fits a label value, else its first 54 characters, ``-`` and 8 hex digits of its sha256."""
    if len(text) <= LABEL_VALUE_MAX:
        return text
    return f"{text[:54]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def origin_metadata(doc: ImportDocument, peer: Peer) -> dict[str, Any]:
    """``labels`` and ``annotations`` naming the peer object an emitted object was translated from."""
    original_namespace = _text(doc.metadata.get("namespace")) or DEFAULT_NAMESPACE
    return {
        "labels": {IMPORTED_PEER: peer, IMPORTED_KIND: doc.kind, IMPORTED_NAME: label_value(doc.name)},
        "annotations": {IMPORTED_FROM: f"{doc.api_version} {doc.kind} {original_namespace}/{doc.name}"},
    }
