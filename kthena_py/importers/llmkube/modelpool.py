"""LLMKube ModelPool -> kthena_py ModelPool: the same members (as ModelServings), default, slot and budget.

Guarantees:

* One ModelPool, same name, in ``serving.kthena-py.io/v1alpha1``, with only fields of kthena_py's ModelPool API;
  members keep their order; ``slots`` is left to its default (1, LLMKube's single slot).
* A member without a name, or listed twice, is refused with the field named (kthena_py's admission would refuse
  the pool anyway, with less context).
* Every field present appears once in the report under its row of
  :data:`~kthena_py.importers.llmkube.modelpool_table.MODELPOOL_TABLE`.
"""

from __future__ import annotations

from typing import Any

from kthena_py.importers.context import ImportContext, ImportDocument
from kthena_py.importers.documents import integer, object_list, report_fields, string, string_map
from kthena_py.importers.llmkube.common import emitted_metadata
from kthena_py.importers.llmkube.modelpool_table import MODELPOOL_TABLE
from kthena_py.importers.report import ImportFailure, ReportLine

__all__ = ["MODELPOOL_API_VERSION", "translate_modelpool"]

MODELPOOL_API_VERSION = "serving.kthena-py.io/v1alpha1"
_MEMBER_NAME = "spec.members[].inferenceServiceRef.name"


def _members(doc: ImportDocument) -> list[dict[str, Any]]:
    names: list[str] = []
    for index, member in enumerate(object_list(doc, "spec.members") or []):
        ref = member.get("inferenceServiceRef")
        name = ref.get("name") if isinstance(ref, dict) else None
        if not isinstance(name, str) or not name:
            raise ImportFailure(doc.index, doc.source, _MEMBER_NAME, f"member #{index} names no InferenceService")
        if name in names:
            raise ImportFailure(doc.index, doc.source, _MEMBER_NAME, f"member {name!r} is listed twice")
        names.append(name)
    if not names:
        raise ImportFailure(doc.index, doc.source, "spec.members", "a pool needs at least one member")
    return [{"modelServingRef": {"name": name}} for name in names]


def translate_modelpool(doc: ImportDocument, context: ImportContext) -> tuple[list[dict[str, Any]], list[ReportLine]]:
    """kthena_py's ModelPool for an LLMKube ModelPool, and the report on every field present."""
    lines = report_fields(doc, MODELPOOL_TABLE)
    spec: dict[str, Any] = {"members": _members(doc)}
    default = string(doc, "spec.default")
    if default:
        spec["default"] = default
    gpu = integer(doc, "spec.gpu")
    if gpu is not None:
        spec["gpu"] = gpu
    node_selector = string_map(doc, "spec.nodeSelector")
    if node_selector:
        spec["nodeSelector"] = node_selector
    for field in ("swapPolicy", "swapBudget"):
        value = string(doc, f"spec.{field}")
        if value:
            spec[field] = value
    pool = {"apiVersion": MODELPOOL_API_VERSION, "kind": "ModelPool", "metadata": emitted_metadata(doc), "spec": spec}
    return [pool], lines
