"""The admission rules across objects that keep a ModelPool the only writer of its members' replicas.

A pool controller scales its members between 0 and 1 to honour ``slots``; anyone else writing a member's replicas
would break that invariant (two models on one GPU). So, within one namespace:

* a ModelServing is a member of at most one ModelPool (:func:`modelpool_conflicts`);
* no AutoscalingPolicy targets a pool member, whether its ``homogeneousTarget``, one of its
  ``heterogeneousTarget.params`` or its ``disaggregatedTarget`` names it (a disaggregated target scales the
  member's roles, which brings its pods up as surely as ``spec.replicas``): a new pool listing a targeted
  ModelServing is refused (:func:`modelpool_conflicts`), and so is a new policy targeting a member
  (:func:`autoscalingpolicy_conflicts`).

Guarantees: pure functions over decoded objects (plain dicts, as the webhook receives them and the API server
lists them), tolerant of malformed neighbours (a stored object our schema refuses still counts by whatever members
or targets it names). The object under review is excluded from its own neighbours by name. Every error is
``Forbidden`` at the path of the offending reference, and its message names the other object and says why.

Two objects admitted at the same moment can still conflict (the webhook sees neither in the other's list); the
pool controller reports that in its ``MembersValid`` condition.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kthena_py.api.common import MODEL_SERVING_KIND
from kthena_py.api.validation.errors import FieldError, forbidden

__all__ = [
    "ONE_WRITER",
    "autoscalingpolicy_conflicts",
    "modelpool_conflicts",
    "policy_targets",
    "pool_members",
]

ONE_WRITER = "the pool controller is the only writer of its members' replicas"
"""Why a member may not be autoscaled (the end of every such message)."""


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name(obj: Mapping[str, Any]) -> str:
    name = _dict(obj.get("metadata")).get("name")
    return name if isinstance(name, str) else ""


def pool_members(pool: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field path, ModelServing name)`` of every member a decoded ModelPool lists (unnamed ones skipped)."""
    found = []
    for index, member in enumerate(_list(_dict(pool.get("spec")).get("members"))):
        name = _dict(_dict(member).get("modelServingRef")).get("name")
        if isinstance(name, str) and name:
            found.append((f"spec.members[{index}].modelServingRef.name", name))
    return found


def _target_ref(ref: Any, path: str) -> list[tuple[str, str]]:
    ref = _dict(ref)
    kind, name = ref.get("kind"), ref.get("name")
    if kind not in (None, "", MODEL_SERVING_KIND) or not isinstance(name, str) or not name:
        return []
    return [(f"{path}.name", name)]


def policy_targets(policy: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field path, ModelServing name)`` of every ModelServing a decoded AutoscalingPolicy scales."""
    spec = _dict(policy.get("spec"))
    found = _target_ref(
        _dict(_dict(spec.get("homogeneousTarget")).get("target")).get("targetRef"),
        "spec.homogeneousTarget.target.targetRef",
    )
    for index, param in enumerate(_list(_dict(spec.get("heterogeneousTarget")).get("params"))):
        found += _target_ref(
            _dict(_dict(param).get("target")).get("targetRef"),
            f"spec.heterogeneousTarget.params[{index}].target.targetRef",
        )
    found += _target_ref(_dict(spec.get("disaggregatedTarget")).get("targetRef"), "spec.disaggregatedTarget.targetRef")
    return found


def modelpool_conflicts(
    pool: Mapping[str, Any],
    pools: Iterable[Mapping[str, Any]],
    policies: Iterable[Mapping[str, Any]],
    *,
    ignore: Collection[str] = (),
) -> list[FieldError]:
    """The errors of a ModelPool whose members are in another pool or targeted by an AutoscalingPolicy.

    Args:
        pool: The ModelPool under review.
        pools: The other ModelPools of its namespace (the pool itself, by name, is ignored).
        policies: The AutoscalingPolicies of its namespace.
        ignore: Members not to check (on UPDATE, those the stored pool already lists).
    """
    own = _name(pool)
    owners: dict[str, str] = {}
    for other in sorted(pools, key=_name):
        if _name(other) != own:
            for _, member in pool_members(other):
                owners.setdefault(member, _name(other))
    scalers: dict[str, str] = {}
    for policy in sorted(policies, key=_name):
        for _, target in policy_targets(policy):
            scalers.setdefault(target, _name(policy))
    errors: list[FieldError] = []
    for path, member in pool_members(pool):
        if member in ignore:
            continue
        if member in owners:
            errors.append(
                forbidden(
                    path,
                    f'ModelServing "{member}" is already a member of ModelPool "{owners[member]}": a ModelServing '
                    f"belongs to one pool at most ({ONE_WRITER})",
                )
            )
        if member in scalers:
            errors.append(
                forbidden(
                    path,
                    f'ModelServing "{member}" is the target of AutoscalingPolicy "{scalers[member]}": {ONE_WRITER}; '
                    "delete the policy or leave the ModelServing out of the pool",
                )
            )
    return errors


def autoscalingpolicy_conflicts(
    policy: Mapping[str, Any], pools: Iterable[Mapping[str, Any]], *, ignore: Collection[str] = ()
) -> list[FieldError]:
    """The errors of an AutoscalingPolicy that targets a member of a ModelPool.

    Args:
        policy: The AutoscalingPolicy under review.
        pools: The ModelPools of its namespace.
        ignore: Targets not to check (on UPDATE, those the stored policy already names).
    """
    owners: dict[str, str] = {}
    for pool in sorted(pools, key=_name):
        for _, member in pool_members(pool):
            owners.setdefault(member, _name(pool))
    return [
        forbidden(
            path,
            f'ModelServing "{target}" is a member of ModelPool "{owners[target]}": {ONE_WRITER}, so no '
            "AutoscalingPolicy may target it",
        )
        for path, target in policy_targets(policy)
        if target in owners and target not in ignore
    ]
