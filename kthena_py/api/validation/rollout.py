"""Rollout rules of a ModelServing: rolling-update budgets, role coordination and the eviction budget.

Guarantees: the checks and messages are those of Kthena's validating webhook (modelserving.md §4, §5, §8),
with percentages resolved exactly like the controller resolves them (``maxUnavailable`` rounded down,
``maxSurge``, ``partition`` and ``minAvailable`` rounded up). A budget check is skipped when the value itself is
malformed (that error is reported instead) or when no replica is outside the partition (nothing to roll).
"""

from __future__ import annotations

from kthena_py.api.common import to_dict
from kthena_py.api.intstr import IntOrString, is_valid_percent, resolve_scaled
from kthena_py.api.modelserving import ModelServing, RoleCoordination
from kthena_py.api.validation.common import validate_int_or_percent
from kthena_py.api.validation.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_found,
    required,
)

__all__ = ["selected_roles", "validate_eviction_strategy", "validate_role_coordination", "validate_rolling_updates"]

_ROLLOUT = "spec.rolloutStrategy"
_ROLES = "spec.template.roles"
_BOTH_ZERO = "maxUnavailable and maxSurge cannot both resolve to 0"


def _resolve(value: IntOrString | None, total: int, round_up: bool) -> int:
    return resolve_scaled(value, total, round_up=round_up, if_none=0)


def _budget_errors(
    path: str, replicas: int, max_unavailable: IntOrString, max_surge: IntOrString | None, partition: int
) -> list[FieldError]:
    if replicas <= partition:
        return []
    unavailable = _resolve(max_unavailable, replicas, round_up=False)
    surge = _resolve(max_surge, replicas, round_up=True)
    if unavailable == 0 and surge == 0:
        return [invalid(f"{path}.maxUnavailable", max_unavailable, _BOTH_ZERO)]
    return []


def validate_rolling_updates(ms: ModelServing) -> list[FieldError]:
    """Validate ``rollingUpdateConfiguration`` and the per-role rolling fields.

    Args:
        ms: The ModelServing (after defaulting).

    Returns:
        Field errors, in spec order.
    """
    errors: list[FieldError] = []
    strategy = ms.spec.rollout_strategy
    role_rolling = strategy is not None and strategy.type == "RoleRollingUpdate"
    config = strategy.rolling_update_configuration if strategy else None
    if config is not None:
        path = f"{_ROLLOUT}.rollingUpdateConfiguration"
        if role_rolling:
            message = "rollingUpdateConfiguration is only valid when rolloutStrategy.type is ServingGroupRollingUpdate"
            errors.append(forbidden(path, message))
        else:
            found = [
                *validate_int_or_percent(config.max_unavailable, f"{path}.maxUnavailable"),
                *validate_int_or_percent(config.max_surge, f"{path}.maxSurge"),
                *validate_int_or_percent(config.partition, f"{path}.partition"),
            ]
            errors.extend(found)
            if not found:
                replicas = ms.spec.replicas
                partition = _resolve(config.partition, replicas, round_up=True)
                errors.extend(_budget_errors(path, replicas, config.max_unavailable, config.max_surge, partition))
    for index, role in enumerate(ms.spec.template.roles):
        path = f"{_ROLES}[{index}]"
        found = [
            *validate_int_or_percent(role.max_unavailable, f"{path}.maxUnavailable"),
            *validate_int_or_percent(role.max_surge, f"{path}.maxSurge"),
            *validate_int_or_percent(role.partition, f"{path}.partition"),
        ]
        errors.extend(found)
        if not role_rolling:
            # Role-level rolling fields take no effect here; maxUnavailable is CRD-defaulted, so only the
            # fields a user must have set explicitly are rejected.
            only = "is only valid when rolloutStrategy.type is RoleRollingUpdate"
            if role.partition is not None:
                errors.append(forbidden(f"{path}.partition", f"partition {only}"))
            if role.max_surge is not None:
                errors.append(forbidden(f"{path}.maxSurge", f"maxSurge {only}"))
            continue
        if found:
            continue
        partition = _resolve(role.partition, role.replicas, round_up=True)
        budget = _budget_errors(path, role.replicas, role.max_unavailable, role.max_surge, partition)
        errors.extend(budget)
        unavailable = _resolve(role.max_unavailable, role.replicas, round_up=False)
        if not budget and role.replicas > partition and unavailable > role.replicas:
            message = f"maxUnavailable cannot be greater than replicas ({role.replicas})"
            errors.append(invalid(f"{path}.maxUnavailable", role.max_unavailable, message))
    return errors


def _validate_max_skew(coordination: RoleCoordination, path: str) -> list[FieldError]:
    max_skew = coordination.max_skew
    if max_skew is None:
        return [required(path, "maxSkew is required")]
    if not isinstance(max_skew.value, str):
        return [invalid(path, max_skew, "must be a percentage string, for example 10%")]
    messages = is_valid_percent(max_skew.value)
    if messages:
        return [invalid(path, max_skew, message) for message in messages]
    if not 0 < int(max_skew.value[:-1]) <= 100:
        return [invalid(path, max_skew, "must be greater than 0% and no greater than 100%")]
    return []


def _has_cycle(graph: dict[str, list[str]]) -> bool:
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> bool:
        if node in done:
            return False
        if node in visiting:
            return True
        visiting.add(node)
        cyclic = any(visit(child) for child in graph.get(node, []))
        visiting.discard(node)
        done.add(node)
        return cyclic

    return any(visit(node) for node in sorted(graph))


def selected_roles(coordination: RoleCoordination, role_names: list[str]) -> list[str]:
    """Return the roles taking part in coordination (all roles when ``roles`` is empty), in spec order."""
    if not coordination.roles:
        return list(role_names)
    chosen = set(coordination.roles)
    return [name for name in role_names if name in chosen]


def validate_role_coordination(ms: ModelServing) -> list[FieldError]:
    """Validate ``rolloutStrategy.roleCoordination`` (CREATE and UPDATE).

    Args:
        ms: The ModelServing (after defaulting).

    Returns:
        Field errors: placement, ``maxSkew``, the role set and the dependency graph.
    """
    strategy = ms.spec.rollout_strategy
    coordination = strategy.role_coordination if strategy else None
    if strategy is None or coordination is None:
        return []
    path = f"{_ROLLOUT}.roleCoordination"
    errors: list[FieldError] = []
    if strategy.type != "RoleRollingUpdate":
        errors.append(forbidden(path, "coordination is only valid when rolloutStrategy.type is RoleRollingUpdate"))
    errors.extend(_validate_max_skew(coordination, f"{path}.maxSkew"))
    names = [role.name for role in ms.spec.template.roles]
    known = set(names)
    selected: set[str] = set()
    if not coordination.roles:
        selected = set(known)
    for index, name in enumerate(coordination.roles or []):
        if name in selected:
            errors.append(duplicate(f"{path}.roles[{index}]", name))
        elif name not in known:
            errors.append(not_found(f"{path}.roles[{index}]", name))
        else:
            selected.add(name)
    if len(selected) < 2:
        message = "at least two Roles must participate in coordination"
        errors.append(invalid(f"{path}.roles", coordination.roles or [], message))
    graph: dict[str, list[str]] = {}
    owners: set[str] = set()
    for index, dependency in enumerate(coordination.dependencies or []):
        dep_path = f"{path}.dependencies[{index}]"
        if dependency.role in owners:
            errors.append(duplicate(f"{dep_path}.role", dependency.role))
        owners.add(dependency.role)
        if dependency.role not in known:
            errors.append(not_found(f"{dep_path}.role", dependency.role))
        elif dependency.role not in selected:
            errors.append(invalid(f"{dep_path}.role", dependency.role, "must belong to the coordinated Role set"))
        seen: set[str] = set()
        for position, target in enumerate(dependency.depends_on or []):
            target_path = f"{dep_path}.dependsOn[{position}]"
            if target in seen:
                errors.append(duplicate(target_path, target))
                continue
            seen.add(target)
            if target == dependency.role:
                errors.append(invalid(target_path, target, "a Role cannot depend on itself"))
            elif target not in known:
                errors.append(not_found(target_path, target))
            elif target not in selected:
                errors.append(invalid(target_path, target, "must belong to the coordinated Role set"))
            else:
                graph.setdefault(dependency.role, []).append(target)
    if _has_cycle(graph):
        value = [to_dict(dependency) for dependency in coordination.dependencies or []]
        errors.append(invalid(f"{path}.dependencies", value, "dependency graph must be acyclic"))
    return errors


def validate_eviction_strategy(ms: ModelServing) -> list[FieldError]:
    """Validate ``rolloutStrategy.evictionStrategy`` (the eviction protection budget).

    Args:
        ms: The ModelServing (after defaulting).

    Returns:
        Field errors for a missing or unreachable ``minAvailable``/``roleMinAvailable``.
    """
    strategy = ms.spec.rollout_strategy
    eviction = strategy.eviction_strategy if strategy else None
    if eviction is None:
        return []
    path = f"{_ROLLOUT}.evictionStrategy"
    errors: list[FieldError] = []
    if eviction.protection_level == "ServingGroup":
        value = eviction.min_available
        if value is None:
            message = "minAvailable is required when evictionStrategy.protectionLevel is ServingGroup"
            return [required(f"{path}.minAvailable", message)]
        found = validate_int_or_percent(value, f"{path}.minAvailable")
        if found:
            return found
        replicas = ms.spec.replicas
        resolved = value.scaled_value(replicas, round_up=True)
        if replicas >= 0 and resolved > replicas:  # negative replicas are reported on their own
            message = f"minAvailable ({resolved}) cannot exceed replicas ({replicas})"
            errors.append(invalid(f"{path}.minAvailable", value, message))
        return errors
    if not eviction.role_min_available:
        message = "roleMinAvailable is required when evictionStrategy.protectionLevel is Role"
        return [required(f"{path}.roleMinAvailable", message)]
    replicas_by_role = {role.name: role.replicas for role in ms.spec.template.roles}
    for name, value in eviction.role_min_available.items():
        key_path = f"{path}.roleMinAvailable[{name}]"
        if name not in replicas_by_role:
            errors.append(invalid(key_path, name, f"role {name} does not exist in template.roles"))
            continue
        found = validate_int_or_percent(value, key_path)
        if found:
            errors.extend(found)
            continue
        replicas = replicas_by_role[name]
        resolved = value.scaled_value(replicas, round_up=True)
        if replicas >= 0 and resolved > replicas:
            message = f"roleMinAvailable ({resolved}) for role {name} cannot exceed replicas ({replicas})"
            errors.append(invalid(key_path, value, message))
    return errors
