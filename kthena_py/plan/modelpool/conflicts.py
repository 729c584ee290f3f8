"""Members another writer claims: listed by another ModelPool, or targeted by an AutoscalingPolicy.

Admission refuses both (:mod:`kthena_py.api.validation.poolmembers`), but two objects written at the same moment,
or objects older than the webhook, can still coexist. The controller reports them and decides who writes:

* **A member in two pools** is managed by the *older* pool only: the one created first (``creationTimestamp``),
  ties (and pools without a readable timestamp, taken as newest) broken by name. The younger pool neither
  scales the member nor makes it resident (:attr:`MemberConflicts.yielded`); it still counts the member's pods
  in its slot guard while they exist (never two members up in a one-slot pool). Both pools report
  ``MembersValid=False/MemberInAnotherPool`` naming the other pool (:attr:`MemberConflicts.kept` on the older).
* **A member targeted by an AutoscalingPolicy** stays managed by the pool (the pool keeps writing its replicas:
  the slot invariant is the pool's promise), and ``MembersValid=False/MemberAutoscaled`` names the policy that
  fights it (:attr:`MemberConflicts.autoscaled`).

Pure: the same rules over decoded objects as admission (:func:`~kthena_py.api.validation.poolmembers.pool_members`,
:func:`~kthena_py.api.validation.poolmembers.policy_targets`), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kthena_py.api.validation.poolmembers import policy_targets, pool_members
from kthena_py.plan.modelpool.demand import parse_demand_time
from kthena_py.plan.modelpool.view import PoolSpec

__all__ = ["MemberConflicts", "managed_spec", "member_conflicts", "pool_age_key"]


@dataclass(frozen=True)
class MemberConflicts:
    """Who else claims this pool's members (member -> the other objects' names, sorted)."""

    yielded: Mapping[str, str] = field(default_factory=dict)
    """Members an older pool keeps (member -> that pool): this pool leaves them alone."""
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Members this pool keeps that younger pools also list (member -> those pools)."""
    autoscaled: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Members AutoscalingPolicies target (member -> those policies)."""

    @property
    def empty(self) -> bool:
        """No conflict at all."""
        return not (self.yielded or self.kept or self.autoscaled)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    name = _dict(obj.get("metadata")).get("name")
    return name if isinstance(name, str) else ""


def pool_age_key(pool: Mapping[str, Any]) -> tuple[float, str]:
    """Sort key, oldest first: creation time (unreadable: newest), then name."""
    created = parse_demand_time(_dict(pool.get("metadata")).get("creationTimestamp"))
    return (created if created is not None else float("inf"), _name(pool))


def member_conflicts(
    pool: Mapping[str, Any], pools: Iterable[Mapping[str, Any]], policies: Iterable[Mapping[str, Any]]
) -> MemberConflicts:
    """The conflicts of ``pool``'s members with the other ``pools`` and the ``policies`` of its namespace.

    ``pools`` may include ``pool`` itself (skipped by name).
    """
    own = _name(pool)
    mine = {member for _, member in pool_members(pool)}
    mine_key = pool_age_key(pool)
    yielded: dict[str, str] = {}
    kept: dict[str, list[str]] = {}
    for other in sorted(pools, key=pool_age_key):
        if _name(other) == own:
            continue
        for member in {m for _, m in pool_members(other)} & mine:
            if pool_age_key(other) < mine_key:
                yielded.setdefault(member, _name(other))
            else:
                kept.setdefault(member, []).append(_name(other))
    autoscaled: dict[str, list[str]] = {}
    for policy in sorted(policies, key=_name):
        for _, target in policy_targets(policy):
            if target in mine and _name(policy) not in autoscaled.get(target, []):
                autoscaled.setdefault(target, []).append(_name(policy))
    return MemberConflicts(
        yielded=yielded,
        kept={m: tuple(p) for m, p in kept.items() if m not in yielded},
        autoscaled={m: tuple(p) for m, p in autoscaled.items()},
    )


def managed_spec(spec: PoolSpec, conflicts: MemberConflicts) -> PoolSpec:
    """The spec the swap planner acts on: ``spec`` without the members an older pool keeps (nor such a default)."""
    return replace(
        spec,
        members=tuple(m for m in spec.members if m not in conflicts.yielded),
        default=None if spec.default in conflicts.yielded else spec.default,
    )
