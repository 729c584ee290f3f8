"""Semantic validation of a ModelServing (the rules of Kthena's validating webhook and CRD CEL rules).

Guarantees:

* Pure: no I/O, no clock; the result depends only on the (schema-valid, defaulted) objects passed in.
* Rules run in Kthena's webhook order (modelserving.md §8) followed by the rollout rules of §4/§5; every rule
  reports all of its violations rather than stopping at the first. One deliberate exception, so that the first
  error is the real cause: role names are checked before the generated-name length, and the length check of a
  role whose name is itself invalid measures the name as if it were valid (an upper-case role name is reported
  once, at ``roles[i].name``, not also as a misleading ``metadata.name`` error).
* With ``old`` given (an UPDATE), the immutability rules of :mod:`kthena_py.api.validation.modelserving_update`
  run as well.
"""

from __future__ import annotations

from kthena_py.api.modelserving import ModelServing
from kthena_py.api.plugins import BUILTIN_PLUGINS
from kthena_py.api.validation.common import is_dns1035_label, validate_pod_template
from kthena_py.api.validation.errors import FieldError, duplicate, forbidden, invalid, not_supported, required
from kthena_py.api.validation.modelserving_update import validate_modelserving_update
from kthena_py.api.validation.rollout import (
    validate_eviction_strategy,
    validate_role_coordination,
    validate_rolling_updates,
)

__all__ = ["validate_modelserving"]

_ROLES = "spec.template.roles"
_DNS1035_HINT = (
    "role name must be a valid DNS-1035 label (lowercase alphanumeric characters or '-', must start with a letter)"
)


def _generated_names(ms: ModelServing) -> list[FieldError]:
    if not ms.name:
        return []  # generateName: the final name is not known offline
    errors: list[FieldError] = []
    for role in ms.spec.template.roles:
        # A role name that is no label is reported by _role_names; here only its length counts.
        role_name = role.name if not is_dns1035_label(role.name) else "r" * len(role.name)
        longest = f"{ms.name}-{ms.spec.replicas}-{role_name}-{role.replicas}-{role.worker_replicas}"
        problems = is_dns1035_label(longest)
        if problems:
            errors.append(invalid("metadata.name", ms.name, "invalid name: " + "; ".join(problems)))
    return errors


def _role_names(ms: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, role in enumerate(ms.spec.template.roles):
        path = f"{_ROLES}[{index}].name"
        problems = is_dns1035_label(role.name)
        if problems:
            errors.append(invalid(path, role.name, f"{_DNS1035_HINT}: " + "; ".join(problems)))
        if role.name in seen:
            errors.append(duplicate(path, role.name))
        seen.add(role.name)
    return errors


def _templates(ms: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, role in enumerate(ms.spec.template.roles):
        errors.extend(validate_pod_template(role.entry_template, f"{_ROLES}[{index}].entryTemplate"))
        errors.extend(validate_pod_template(role.worker_template, f"{_ROLES}[{index}].workerTemplate"))
    return errors


def _replicas(ms: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    if ms.spec.replicas < 0:
        errors.append(invalid("spec.replicas", ms.spec.replicas, "replicas must be a non-negative integer"))
    for index, role in enumerate(ms.spec.template.roles):
        if role.replicas < 0:
            message = "role replicas must be a non-negative integer"
            errors.append(invalid(f"{_ROLES}[{index}].replicas", role.replicas, message))
    return errors


def _gang_policy(ms: ModelServing) -> list[FieldError]:
    policy = ms.spec.template.gang_policy
    if policy is None or policy.min_role_replicas is None:
        return []
    replicas_by_role = {role.name: role.replicas for role in ms.spec.template.roles}
    errors: list[FieldError] = []
    for name, minimum in policy.min_role_replicas.items():
        path = f"spec.template.gangPolicy.minRoleReplicas[{name}]"
        if name not in replicas_by_role:
            errors.append(invalid(path, name, f"role {name} does not exist in template.roles"))
            continue
        replicas = replicas_by_role[name]
        if minimum > replicas:
            message = f"minRoleReplicas ({minimum}) for role {name} cannot exceed replicas ({replicas})"
            errors.append(invalid(path, minimum, message))
        if minimum < 0:
            errors.append(invalid(path, minimum, f"minRoleReplicas for role {name} must be non-negative"))
    return errors


def _workers(ms: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, role in enumerate(ms.spec.template.roles):
        path = f"{_ROLES}[{index}]"
        if role.worker_replicas < 0:
            message = "workerReplicas must be a non-negative integer"
            errors.append(invalid(f"{path}.workerReplicas", role.worker_replicas, message))
        if role.worker_replicas > 0 and role.worker_template is None:
            message = "workerTemplate is required when workerReplicas is greater than 0"
            errors.append(required(f"{path}.workerTemplate", message))
    return errors


def _recovery_pair(ms: ModelServing) -> list[FieldError]:
    strategy = ms.spec.rollout_strategy
    rollout_type = strategy.type if strategy else "ServingGroupRollingUpdate"
    if not (ms.spec.recovery_policy == "ServingGroupRecreate" and rollout_type == "RoleRollingUpdate"):
        return []
    message = (
        "incompatible recoveryPolicy and rolloutStrategy.type after applying defaults: "
        f"recoveryPolicy={ms.spec.recovery_policy}, rolloutStrategy.type={rollout_type}; valid pairs: "
        "(ServingGroupRecreate,ServingGroupRollingUpdate) or (RoleRecreate,RoleRollingUpdate)"
    )
    return [invalid("spec.rolloutStrategy.type", rollout_type, message)]


def _plugins(ms: ModelServing) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, plugin in enumerate(ms.spec.plugins or []):
        if plugin.name in seen:
            errors.append(duplicate(f"spec.plugins[{index}].name", plugin.name))
        elif plugin.name not in BUILTIN_PLUGINS:
            errors.append(not_supported(f"spec.plugins[{index}].name", plugin.name, sorted(BUILTIN_PLUGINS)))
        seen.add(plugin.name)
    return errors


def _network_topology(ms: ModelServing) -> list[FieldError]:
    topology = ms.spec.template.network_topology
    if topology is None:
        return []
    errors: list[FieldError] = []
    for key, policy in (("groupPolicy", topology.group_policy), ("rolePolicy", topology.role_policy)):
        if policy is not None and policy.highest_tier_allowed is not None and policy.highest_tier_name is not None:
            path = f"spec.template.networkTopology.{key}.highestTierName"
            errors.append(forbidden(path, "highestTierName and highestTierAllowed cannot be set simultaneously"))
    return errors


def validate_modelserving(ms: ModelServing, old: ModelServing | None = None) -> list[FieldError]:
    """Validate a ModelServing as Kthena's admission webhook and CEL rules would.

    Args:
        ms: The new object, schema-valid and with CRD defaults applied (any parsed model is).
        old: The stored object for an UPDATE, or ``None`` for a CREATE.

    Returns:
        All field errors, empty when the object is acceptable.
    """
    errors = [
        *_role_names(ms),
        *_generated_names(ms),
        *_templates(ms),
        *_replicas(ms),
        *validate_rolling_updates(ms),
        *validate_role_coordination(ms),
        *validate_eviction_strategy(ms),
        *_gang_policy(ms),
        *_workers(ms),
        *_recovery_pair(ms),
        *_plugins(ms),
        *_network_topology(ms),
    ]
    if old is not None:
        errors.extend(validate_modelserving_update(ms, old))
    return errors
