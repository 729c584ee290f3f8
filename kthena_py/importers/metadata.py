"""The object metadata every peer kind carries, and what happens to it: one table, shared by every translator.

Guarantees:

* :data:`METADATA_FIELDS` covers ``apiVersion``, ``kind`` and every ``metadata`` field ``kubectl get -o yaml``
  prints; a translator puts it first in its own table.
* :data:`OBSERVED_STATE` lists the dropped fields that describe the peer object's life rather than what the user
  asked for (server-set metadata, ``status``): ``--strict`` does not count them, since every exported object
  has them.
* :func:`check_metadata` refuses metadata of the wrong shape (a name that is not a string, labels that are not
  an object of strings, ...) with an :class:`~kthena_py.importers.report.ImportFailure` naming the field, before
  any translator reads it.
* :func:`carried_metadata` is what the emitted primary object keeps of the input's metadata: its labels, and its
  annotations except kubectl's record of the peer object, under the origin labels and annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.importers.context import ImportDocument, Peer, origin_metadata
from kthena_py.importers.documents import mapping, string, string_map
from kthena_py.importers.report import FieldRule, ImportFailure
from kthena_py.vocab.labels import KUBECTL_LAST_APPLIED

__all__ = ["METADATA_FIELDS", "OBSERVED_STATE", "carried_metadata", "check_metadata"]

_SERVER_SET = "set by the API server for the peer object; the new objects get their own"

METADATA_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("apiVersion", "mapped", "annotation import.kthena-py.io/from", "selects the translator; recorded"),
    FieldRule("kind", "mapped", "label import.kthena-py.io/kind", "selects the translator; recorded"),
    FieldRule("metadata.name", "mapped", "metadata.name of every object emitted", ""),
    FieldRule("metadata.namespace", "mapped", "metadata.namespace of every object emitted", "--namespace overrides it"),
    FieldRule("metadata.labels", "mapped", "ModelServing metadata.labels", "the import labels are added"),
    FieldRule(
        "metadata.annotations",
        "approximated",
        "ModelServing metadata.annotations",
        "copied, except kubectl's last-applied-configuration (it describes the peer object)",
    ),
    FieldRule("metadata.uid", "dropped", "", _SERVER_SET),
    FieldRule("metadata.resourceVersion", "dropped", "", _SERVER_SET),
    FieldRule("metadata.generation", "dropped", "", _SERVER_SET),
    FieldRule("metadata.creationTimestamp", "dropped", "", _SERVER_SET),
    FieldRule("metadata.deletionTimestamp", "dropped", "", _SERVER_SET),
    FieldRule("metadata.deletionGracePeriodSeconds", "dropped", "", _SERVER_SET),
    FieldRule("metadata.selfLink", "dropped", "", _SERVER_SET),
    FieldRule("metadata.managedFields", "dropped", "", _SERVER_SET),
    FieldRule("metadata.generateName", "dropped", "", "the emitted objects need a fixed name (metadata.name is used)"),
    FieldRule("metadata.finalizers", "dropped", "", "finalizers of the peer's controllers; kthena_py's add their own"),
    FieldRule(
        "metadata.ownerReferences",
        "dropped",
        "",
        "they point at the peer object's owners (uids of that cluster); re-own the new objects yourself",
    ),
)
"""The object metadata, shared by every peer kind."""


OBSERVED_STATE: frozenset[str] = frozenset(
    {
        "metadata.uid",
        "metadata.resourceVersion",
        "metadata.generation",
        "metadata.creationTimestamp",
        "metadata.deletionTimestamp",
        "metadata.deletionGracePeriodSeconds",
        "metadata.selfLink",
        "metadata.managedFields",
        "metadata.finalizers",
        "metadata.ownerReferences",
        "status",
    }
)
"""Dropped fields that ``--strict`` does not count: set by the peer's cluster, not by the user."""


def check_metadata(doc: ImportDocument) -> None:
    """Raise :class:`ImportFailure` when ``metadata`` or its name, namespace, labels or annotations are misshapen."""
    mapping(doc, "metadata")
    if not string(doc, "metadata.name"):
        raise ImportFailure(doc.index, doc.source, "metadata.name", "required")
    string(doc, "metadata.namespace")
    string_map(doc, "metadata.labels")
    string_map(doc, "metadata.annotations")


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(key): str(item) for key, item in value.items()}


def carried_metadata(doc: ImportDocument, peer: Peer) -> dict[str, Any]:
    """``labels`` and ``annotations`` for the main object translated from ``doc`` (origin keys win)."""
    origin = origin_metadata(doc, peer)
    labels = _strings(doc.metadata.get("labels"))
    annotations = _strings(doc.metadata.get("annotations"))
    annotations.pop(KUBECTL_LAST_APPLIED, None)
    return {
        "labels": {**labels, **origin["labels"]},
        "annotations": {**annotations, **origin["annotations"]},
    }
