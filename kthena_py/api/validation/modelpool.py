"""Semantic validation of a ModelPool (our validating webhook and ``kthena-py validate``).

Guarantees: pure. The schema (pydantic) has already checked each field alone (``members`` non-empty, names,
``slots >= 1``, ``swapPolicy``); these rules span fields, each reported at its own path:

* every member names a different ModelServing (``Duplicate value`` at the second listing);
* ``default``, when set, names a member (the API server's CEL rule says the same,
  :data:`kthena_py.api.modelpool.DEFAULT_NOT_A_MEMBER_MESSAGE`);
* ``swapBudget`` is positive (also a CEL rule, :data:`kthena_py.api.modelpool.SWAP_BUDGET_MESSAGE`).

The rules across objects (a ModelServing in two pools, an AutoscalingPolicy on a member) need the other objects
of the namespace: :mod:`kthena_py.api.validation.poolmembers`.
"""

from __future__ import annotations

from kthena_py.api.modelpool import DEFAULT_NOT_A_MEMBER_MESSAGE, SWAP_BUDGET_MESSAGE, ModelPool, member_names
from kthena_py.api.validation.errors import FieldError, duplicate, invalid

__all__ = ["validate_modelpool"]


def validate_modelpool(pool: ModelPool, old: ModelPool | None = None) -> list[FieldError]:
    """Validate a parsed ModelPool; return the field errors (``old`` is accepted for symmetry, no rule uses it)."""
    del old  # every field may change: the controller re-plans from the new spec
    spec = pool.spec
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, name in enumerate(member_names(spec)):
        if name in seen:
            errors.append(duplicate(f"spec.members[{index}].modelServingRef.name", name))
        seen.add(name)
    if spec.default is not None and spec.default not in seen:
        errors.append(invalid("spec.default", spec.default, DEFAULT_NOT_A_MEMBER_MESSAGE))
    if spec.swap_budget.nanoseconds <= 0:
        errors.append(invalid("spec.swapBudget", spec.swap_budget.raw, SWAP_BUDGET_MESSAGE))
    return errors
