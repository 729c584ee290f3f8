"""The field table of LLMKube's ModelPool: every field of the kind, and where it goes in kthena_py's ModelPool.

kthena_py's ModelPool (``serving.kthena-py.io/v1alpha1``) has the same shape: members that share a GPU slot,
swapped on demand; its members are the ModelServings imported from the InferenceServices the pool lists (same
names). ``slots`` is left at its default, 1: LLMKube's pool has one slot.
"""

from __future__ import annotations

from kthena_py.importers.llmkube.common import envelope_rows
from kthena_py.importers.report import FieldRule

__all__ = ["MODELPOOL_TABLE"]

_POOL = "ModelPool spec"

MODELPOOL_TABLE: tuple[FieldRule, ...] = (
    *envelope_rows("ModelPool", "ModelPool"),
    FieldRule(
        "spec.members[].inferenceServiceRef.name",
        "mapped",
        f"{_POOL}.members[].modelServingRef.name",
        "the ModelServing imported from that InferenceService has its name",
    ),
    FieldRule("spec.default", "mapped", f"{_POOL}.default"),
    FieldRule("spec.gpu", "mapped", f"{_POOL}.gpu"),
    FieldRule("spec.nodeSelector", "mapped", f"{_POOL}.nodeSelector"),
    FieldRule("spec.swapBudget", "mapped", f"{_POOL}.swapBudget"),
    FieldRule("spec.swapPolicy", "mapped", f"{_POOL}.swapPolicy"),
)
