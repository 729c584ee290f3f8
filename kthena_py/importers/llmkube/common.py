"""What every LLMKube kind shares: its group, the rows for the object's envelope, and the emitted metadata.

Guarantees:

* :data:`API_VERSION` is the only LLMKube version the importer reads (``inference.llmkube.dev/v1alpha1``).
* :func:`envelope_rows` are the rows of ``apiVersion``, ``kind``, ``metadata`` and ``status`` for a kind, the same
  words for each kind; ``status`` is observed state and is always dropped (kthena_py's controllers write their
  own).
* :func:`emitted_metadata` is the metadata of every emitted object: the target name, the (overridden)
  namespace, the source's own labels and annotations (less kubectl's last-applied copy), and the origin labels
  and annotation (which win on a clash).
"""

from __future__ import annotations

from typing import Any

from kthena_py.importers.context import ImportDocument, Peer, origin_metadata
from kthena_py.importers.llmkube.values import read_str_map
from kthena_py.importers.report import FieldRule
from kthena_py.vocab.labels import KUBECTL_LAST_APPLIED

__all__ = ["API_VERSION", "GROUP", "PEER", "emitted_metadata", "envelope_rows"]

GROUP = "inference.llmkube.dev"
API_VERSION = f"{GROUP}/v1alpha1"
PEER: Peer = "llmkube"


def envelope_rows(kind: str, targets: str) -> tuple[FieldRule, ...]:
    """``apiVersion``, ``kind``, ``metadata`` (copied whole) and ``status`` rows of ``kind``."""
    return (
        FieldRule("apiVersion", "mapped", f"{targets} apiVersion", f"{API_VERSION} is the version read"),
        FieldRule("kind", "mapped", f"{targets} kind", f"{kind} selects the translator"),
        FieldRule(
            "metadata",
            "approximated",
            f"{targets} metadata",
            "name, namespace (or --namespace), labels and annotations are kept and the origin labels added; "
            "server-set fields (uid, resourceVersion, generation, managedFields, ownerReferences...) are dropped",
        ),
        FieldRule(
            "status",
            "dropped",
            "",
            f"observed state of the {kind}: kthena_py's controllers write their own status",
        ),
    )


def emitted_metadata(doc: ImportDocument, name: str | None = None) -> dict[str, Any]:
    """Metadata of an object emitted for ``doc`` (named ``name``, the source's name by default)."""
    origin = origin_metadata(doc, PEER)
    labels = dict(read_str_map(doc, "metadata.labels") or {})
    labels.update(origin["labels"])
    annotations = dict(read_str_map(doc, "metadata.annotations") or {})
    annotations.pop(KUBECTL_LAST_APPLIED, None)
    annotations.update(origin["annotations"])
    return {"name": name or doc.name, "namespace": doc.namespace, "labels": labels, "annotations": annotations}
