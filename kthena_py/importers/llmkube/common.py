"""What every LLMKube kind shares: its group, the rows for the object's envelope, and the emitted metadata.

Guarantees:

* :data:`API_VERSION` is the only LLMKube version the importer reads (``inference.llmkube.dev/v1alpha1``).
* :func:`envelope_rows` are the rows of ``apiVersion``, ``kind``, ``metadata`` (the rows every peer shares,
  :data:`~kthena_py.importers.metadata.METADATA_FIELDS`, naming this kind's targets) and ``status`` (observed
  state, always dropped: kthena_py's controllers write their own).
* :func:`emitted_metadata` is the metadata of every emitted object: the target name, the (overridden)
  namespace, and the labels and annotations every peer carries
  (:func:`~kthena_py.importers.metadata.carried_metadata`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kthena_py.importers.context import ImportDocument, Peer
from kthena_py.importers.metadata import METADATA_FIELDS, carried_metadata
from kthena_py.importers.report import FieldRule

__all__ = ["API_VERSION", "GROUP", "PEER", "emitted_metadata", "envelope_rows"]

GROUP = "inference.llmkube.dev"
API_VERSION = f"{GROUP}/v1alpha1"
PEER: Peer = "llmkube"


def envelope_rows(kind: str, targets: str) -> tuple[FieldRule, ...]:
    """``apiVersion``, ``kind`` and ``metadata.*`` rows (shared, aimed at ``targets``) and the ``status`` row."""
    shared = tuple(replace(rule, target=rule.target.replace("ModelServing", targets)) for rule in METADATA_FIELDS)
    status = FieldRule(
        "status", "dropped", "", f"observed state of the {kind}: kthena_py's controllers write their own"
    )
    return (*shared, status)


def emitted_metadata(doc: ImportDocument, name: str | None = None) -> dict[str, Any]:
    """Metadata of an object emitted for ``doc`` (named ``name``, the source's name by default)."""
    return {"name": name or doc.name, "namespace": doc.namespace, **carried_metadata(doc, PEER)}
