"""UPDATE-only rules of a ModelServing: immutable fields and coordinated-rollout capacity.

Guarantees (each rule compares the stored ``old`` object with the new one, both defaulted):

* Role names are immutable as a set (no rename, addition or removal; reordering is allowed).
* ``spec.template.networkTopology`` is immutable.
* ``rolloutStrategy.roleCoordination`` cannot be added or removed, and its content cannot change.
* ``gangPolicy`` and ``gangPolicy.minRoleReplicas`` are required once set, and ``minRoleReplicas`` is
  immutable (Kthena's CEL rules).
* With role coordination, a changed dependency Role must keep target-version capacity outside its partition
  and, while old callers remain, room for one old plus one new replica (Kthena's update-time capacity checks);
  "changed" compares the role's template (name, entry/worker templates, workerReplicas), which is what
  Kthena's role template hash covers.
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.intstr import IntOrStringError
from kthena_py.api.modelserving import ModelServing, Role, RoleCoordination
from kthena_py.api.validation.errors import OMITTED, FieldError, forbidden, invalid
from kthena_py.api.validation.rollout import selected_roles
from kthena_py.vocab.conditions import COORDINATION_BLOCKED, REASON_COMPLETE

__all__ = ["COORDINATION_BLOCKED_CONDITION", "validate_modelserving_update"]

#: Condition type published while a coordinated role rollout is in progress (reason ``RolloutComplete`` when
#: done) by the rollout reconciler (``kthena_py.plan.modelserving.rollout.rollout``). Kthena's constant is
#: ``ModelServingCoordinatedRoleRolloutBlocked``; its string value is assumed.
COORDINATION_BLOCKED_CONDITION = COORDINATION_BLOCKED

_ROLES = "spec.template.roles"


def _dump(model: Any) -> Any:
    return None if model is None else to_dict(model)


def _go_list(names: list[str]) -> str:
    return "[" + " ".join(names) + "]"


def _immutable_fields(ms: ModelServing, old: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    old_names = [role.name for role in old.spec.template.roles]
    new_names = [role.name for role in ms.spec.template.roles]
    if sorted(old_names) != sorted(new_names):
        message = f"role names are immutable; existing role names are {_go_list(old_names)}"
        errors.append(invalid(_ROLES, new_names, message))
    old_topology = _dump(old.spec.template.network_topology)
    if old_topology != _dump(ms.spec.template.network_topology):
        errors.append(invalid("spec.template.networkTopology", OMITTED, "field is immutable"))
    old_coordination = old.spec.rollout_strategy.role_coordination if old.spec.rollout_strategy else None
    new_coordination = ms.spec.rollout_strategy.role_coordination if ms.spec.rollout_strategy else None
    path = "spec.rolloutStrategy.roleCoordination"
    if (old_coordination is None) != (new_coordination is None):
        errors.append(forbidden(path, "roleCoordination cannot be added or removed after creation"))
    elif _dump(old_coordination) != _dump(new_coordination):
        errors.append(invalid(path, OMITTED, "field is immutable"))
    old_gang, new_gang = old.spec.template.gang_policy, ms.spec.template.gang_policy
    had_minimums = old_gang is not None and old_gang.min_role_replicas is not None
    if old_gang is not None and new_gang is None:
        errors.append(invalid("spec.template", "object", "gangPolicy is required once set"))
    elif had_minimums and new_gang is not None and new_gang.min_role_replicas is None:
        errors.append(invalid("spec.template.gangPolicy", "object", "minRoleReplicas is required once set"))
    elif had_minimums and new_gang is not None and new_gang.min_role_replicas != old_gang.min_role_replicas:  # type: ignore[union-attr]
        errors.append(invalid("spec.template.gangPolicy.minRoleReplicas", OMITTED, "minRoleReplicas is immutable"))
    return errors


def _coordination(ms: ModelServing) -> RoleCoordination | None:
    strategy = ms.spec.rollout_strategy
    if strategy is None or strategy.type != "RoleRollingUpdate":
        return None
    return strategy.role_coordination


def _template_key(role: Role) -> dict[str, Any]:
    keep = ("name", "entryTemplate", "workerReplicas", "workerTemplate")
    return {key: value for key, value in to_dict(role).items() if key in keep}


def _partition(role: Role) -> int | None:
    if role.partition is None:
        return 0
    try:
        return role.partition.scaled_value(role.replicas, round_up=True)
    except IntOrStringError:
        return None


def _rollout_may_be_active(old: ModelServing) -> bool:
    """Conservative while status is stale: a spec update can arrive before the controller observed it."""
    if _coordination(old) is None:
        return False
    status = old.status
    if status is None or (status.observed_generation or 0) < old.generation:
        return old.generation > 0
    for condition in status.conditions or []:
        if condition.type == COORDINATION_BLOCKED_CONDITION:
            return condition.reason != REASON_COMPLETE
    return False


def _dependency_graph(coordination: RoleCoordination, selected: set[str]) -> dict[str, list[str]]:
    graph: dict[str, list[str]] = {}
    for dependency in coordination.dependencies or []:
        if dependency.role not in selected:
            continue
        targets = [target for target in dependency.depends_on or [] if target in selected]
        graph.setdefault(dependency.role, []).extend(targets)
    return graph


def _capacity_requirements(
    graph: dict[str, list[str]], selected: list[str], old_roles: dict[str, Role], new_roles: dict[str, Role]
) -> dict[str, bool]:
    """Roles that must provide target-version capacity; ``True`` if one old replica must also remain."""

    def changed(name: str) -> bool:
        new = new_roles.get(name)
        if new is None:
            return False
        old = old_roles.get(name)
        return old is None or _template_key(old) != _template_key(new)

    has_dependent = {target for targets in graph.values() for target in targets}
    required: dict[str, bool] = {}
    for root in selected:
        if root in has_dependent or not changed(root):
            continue
        stack, visited = [root], set()
        while stack:
            current = stack.pop()
            if current in visited:
                continue
            visited.add(current)
            for target in graph.get(current, []):
                if changed(target):
                    required.setdefault(target, False)
                stack.append(target)
    for caller, targets in graph.items():
        if changed(caller) and caller in old_roles:
            for target in targets:
                if changed(target):
                    required[target] = True
    return required


def _coordination_capacity(ms: ModelServing, old: ModelServing) -> list[FieldError]:
    coordination = _coordination(ms)
    if coordination is None:
        return []
    old_roles = {role.name: role for role in old.spec.template.roles}
    new_roles = {role.name: role for role in ms.spec.template.roles}
    selected = selected_roles(coordination, list(new_roles))
    graph = _dependency_graph(coordination, set(selected))
    errors: list[FieldError] = []
    if _rollout_may_be_active(old):
        dependencies = {target for targets in graph.values() for target in targets}
        for index, role in enumerate(ms.spec.template.roles):
            previous = old_roles.get(role.name)
            if role.name not in dependencies or previous is None:
                continue
            partition, old_partition = _partition(role), _partition(previous)
            moved = partition is not None and old_partition is not None and partition != old_partition
            if partition is None or not (previous.replicas != role.replicas or moved):
                continue
            if max(partition, 1) < role.replicas:
                continue
            message = (
                f'dependency Role "{role.name}" must retain capacity for one old and one target replica while '
                "coordinated rollout is in progress; wait for rollout completion or increase replicas/reduce partition"
            )
            errors.append(invalid(f"{_ROLES}[{index}]", role.name, message))
    requirements = _capacity_requirements(graph, selected, old_roles, new_roles)
    for index, role in enumerate(ms.spec.template.roles):
        if role.name not in requirements:
            continue
        partition = _partition(role)
        if partition is None:
            continue
        if partition >= role.replicas:
            message = f'changed dependency Role "{role.name}" must leave target-version capacity outside partition'
            errors.append(invalid(f"{_ROLES}[{index}].partition", role.partition, message))
            continue
        old_replicas = old_roles[role.name].replicas if role.name in old_roles else 0
        floor = 1 if requirements[role.name] else 0
        replacement = max(min(old_replicas, role.replicas) - max(partition, floor), 0)
        expansion = max(role.replicas - max(old_replicas, partition), 0)
        if replacement + expansion == 0:
            message = (
                f'changed dependency Role "{role.name}" cannot create target-version capacity while retaining the '
                "old request path; increase replicas or stage a scale-up before changing the Role template"
            )
            errors.append(invalid(f"{_ROLES}[{index}]", role.name, message))
    return errors


def validate_modelserving_update(ms: ModelServing, old: ModelServing) -> list[FieldError]:
    """Run the UPDATE-only rules.

    Args:
        ms: The new object.
        old: The stored object.

    Returns:
        Field errors for changed immutable fields and unsafe coordinated-rollout changes.
    """
    return [*_immutable_fields(ms, old), *_coordination_capacity(ms, old)]
