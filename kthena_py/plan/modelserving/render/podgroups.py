"""Plan the Volcano PodGroups (``scheduling.volcano.sh/v1beta1``) of a ModelServing's ServingGroups.

Guarantees:

* PodGroups exist iff gang scheduling applies (``schedulerName: volcano`` and the CRD served): then exactly one
  per desired ServingGroup (the same ordinals as the ServingGroup planner uses, from
  :func:`~kthena_py.plan.modelserving.core.state.build_state`), named like the group. Otherwise every observed
  PodGroup is deleted.
* While the ModelCache gate (``Observed.model_cache``) is closed, a missing PodGroup is created only for a group
  that has pods (no new gang for a group that cannot get pods yet); updates and deletes go on.
* Shape: labels ``name`` + ``group-name``, annotation ``scheduling.k8s.io/group-name``, a controller
  ownerReference *without* ``blockOwnerDeletion``; spec ``minMember`` = Σ_roles (1+W)·m, ``minResources`` =
  Σ_roles m·(entry requests + W·worker requests) with m = min(gangPolicy.minRoleReplicas[role], replicas) when the
  key exists, else replicas; ``queue`` from the ModelServing annotation ``scheduling.volcano.sh/queue-name``;
  ``priorityClassName`` from the first pod template that sets one; ``networkTopology`` = the group policy; then
  ``subGroupPolicy`` per role when the CRD has it, else ``minTaskMember`` ``{"<role>-<r>": 1+W for r < m}``.
* Resource sums are exact (:class:`decimal.Decimal`) and rendered canonically; a container's missing request
  falls back to its limit, as pod defaulting does.
* An existing PodGroup is patched (merge patch of the differing ``spec`` keys, removed keys set to ``null``) only
  when it differs semantically (quantities by value, a missing queue equal to Volcano's ``default``), so server
  defaults never cause an update loop. Deleted PodGroups are simply created again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.modelserving import ModelServing, PodTemplateSpec, Role
from kthena_py.api.networktopology import NetworkTopologySpec
from kthena_py.api.podspec import template_containers
from kthena_py.api.quantity import Quantity, QuantityError, QuantityFormat, format_quantity, parse_quantity
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.types import Delete, KubeObject, MSRef, Observed, Plan, PodGroupSupport, Update

__all__ = ["build_podgroup", "gang_members", "plan_podgroups", "role_resources"]

_MANAGED = (
    "minMember",
    "minResources",
    "queue",
    "priorityClassName",
    "networkTopology",
    "subGroupPolicy",
    "minTaskMember",
)
_TOPOLOGY_KEYS = ("mode", "highestTierAllowed", "highestTierName")
_SUBGROUP_KEYS = ("name", "labelSelector", "matchLabelKeys", "subGroupSize", "minSubGroups")

_Totals = dict[str, tuple[Decimal, QuantityFormat]]
# Sums and products never round (the default decimal context keeps only 28 digits).
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _add(totals: _Totals, name: str, value: Decimal, fmt: QuantityFormat) -> None:
    if name in totals:
        total, first = totals[name]
        totals[name] = (_EXACT.add(total, value), first)
    else:
        totals[name] = (value, fmt)


def _container_requests(container: Mapping[str, Any]) -> _Totals:
    resources = container.get("resources")
    found: _Totals = {}
    for kind in ("limits", "requests"):  # requests override limits
        section = resources.get(kind) if isinstance(resources, dict) else None
        for name, raw in (section or {}).items() if isinstance(section, dict) else ():
            if isinstance(raw, bool) or not isinstance(raw, str | int):
                continue
            try:
                quantity = Quantity(raw)
            except QuantityError:
                continue
            found[name] = (quantity.value, quantity.format)
    return found


def _template_requests(template: PodTemplateSpec | None) -> _Totals:
    totals: _Totals = {}
    for container in template_containers(template):
        for name, (value, fmt) in _container_requests(container).items():
            _add(totals, name, value, fmt)
    return totals


def role_resources(role: Role) -> _Totals:
    """Requests of one role instance: the entry pod plus ``workerReplicas`` worker pods (exact values)."""
    totals = dict(_template_requests(role.entry_template))
    worker = _template_requests(role.worker_template or role.entry_template) if role.worker_replicas else {}
    for name, (value, fmt) in worker.items():
        _add(totals, name, _EXACT.multiply(value, role.worker_replicas), fmt)
    return totals


def gang_members(ms: ModelServing, role: Role) -> int:
    """The gang minimum ``m`` of a role: ``min(minRoleReplicas[role], replicas)`` if set, else ``replicas``."""
    policy = ms.spec.template.gang_policy
    minimums = policy.min_role_replicas if policy is not None else None
    if minimums is not None and role.name in minimums:
        return max(0, min(minimums[role.name], role.replicas))
    return max(0, role.replicas)


def _topology(spec: NetworkTopologySpec | None) -> dict[str, Any] | None:
    return to_dict(spec) if spec is not None else None


def _priority_class(roles: Iterable[Role]) -> str | None:
    for role in roles:
        for template in (role.entry_template, role.worker_template):
            value = (template.spec or {}).get("priorityClassName") if template is not None else None
            if isinstance(value, str) and value:
                return value
    return None


def build_podgroup(state: PlanningState, ordinal: int, sub_group_policy: bool) -> KubeObject:
    """Build the desired PodGroup of ServingGroup ``ordinal`` (from the revision that group is on).

    Args:
        state: The planning state.
        ordinal: The ServingGroup ordinal.
        sub_group_policy: Whether the installed CRD supports ``spec.subGroupPolicy``.

    Returns:
        The PodGroup object.
    """
    ms, ref = state.ms, state.ref
    target = state.target(ordinal)
    roles = tuple(rt.role for rt in target.roles.values()) if target is not None else state.effective_roles(state.data)
    topology = ms.spec.template.network_topology
    name = naming.podgroup_name(ref.name, ordinal)
    totals: _Totals = {}
    min_member = 0
    for role in roles:
        members = gang_members(ms, role)
        min_member += (1 + role.worker_replicas) * members
        for resource, (value, fmt) in role_resources(role).items():
            _add(totals, resource, _EXACT.multiply(value, members), fmt)
    spec: dict[str, Any] = {"minMember": min_member}
    resources = {key: format_quantity(value, fmt) for key, (value, fmt) in sorted(totals.items()) if value}
    if resources:
        spec["minResources"] = resources
    queue = ms.annotations.get(naming.ANNOTATION_QUEUE)
    if queue:
        spec["queue"] = queue
    priority = _priority_class(roles)
    if priority:
        spec["priorityClassName"] = priority
    group_topology = _topology(topology.group_policy if topology else None)
    if group_topology:
        spec["networkTopology"] = group_topology
    role_topology = _topology(topology.role_policy if topology else None)
    if sub_group_policy:
        spec["subGroupPolicy"] = [_sub_group(ref.name, role, gang_members(ms, role), role_topology) for role in roles]
    else:
        spec["minTaskMember"] = {
            naming.role_id(role.name, r): 1 + role.worker_replicas
            for role in roles
            for r in range(gang_members(ms, role))
        }
    return {
        "apiVersion": naming.PODGROUP_API_VERSION,
        "kind": naming.PODGROUP_KIND,
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {naming.LABEL_NAME: ref.name, naming.LABEL_GROUP_NAME: naming.group_name(ref.name, ordinal)},
            "annotations": {naming.ANNOTATION_PODGROUP: name},
            "ownerReferences": [naming.owner_reference(ref, block_owner_deletion=False)],
        },
        "spec": spec,
    }


def _sub_group(ms: str, role: Role, members: int, topology: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": role.name,
        "labelSelector": {"matchLabels": {naming.LABEL_NAME: ms, naming.LABEL_ROLE: role.name}},
        "matchLabelKeys": [naming.LABEL_ROLE_ID],
        "subGroupSize": 1 + role.worker_replicas,
        "minSubGroups": members,
    }
    if topology:
        entry["networkTopology"] = topology
    return entry


def _resources_equal(existing: Any, desired: Any) -> bool:
    def values(raw: Any) -> dict[str, Decimal] | None:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            return None
        try:
            parsed = {k: parse_quantity(v) for k, v in raw.items()}
        except (QuantityError, TypeError):
            return None
        return {k: v for k, v in parsed.items() if v}

    return values(existing) == values(desired)


def _known(raw: Any, keys: tuple[str, ...]) -> Any:
    if not isinstance(raw, dict):
        return raw
    return {key: raw.get(key) for key in keys}


def _sub_groups_equal(existing: Any, desired: Any) -> bool:
    if not isinstance(existing, list) or not isinstance(desired, list) or len(existing) != len(desired):
        return existing == desired or (not existing and not desired)
    for old, new in zip(existing, desired, strict=True):
        if _known(old, _SUBGROUP_KEYS) != _known(new, _SUBGROUP_KEYS):
            return False
        if _known(old.get("networkTopology"), _TOPOLOGY_KEYS) != _known(new.get("networkTopology"), _TOPOLOGY_KEYS):
            return False
    return True


def _same(key: str, existing: Any, desired: Any) -> bool:
    if key == "minResources":
        return _resources_equal(existing, desired)
    if key == "queue":
        return bool((existing or "default") == (desired or "default"))
    if key == "networkTopology":
        return bool(_known(existing, _TOPOLOGY_KEYS) == _known(desired, _TOPOLOGY_KEYS))
    if key == "subGroupPolicy":
        return _sub_groups_equal(existing, desired)
    if key == "minTaskMember":
        return bool((existing or {}) == (desired or {}))
    return bool(existing == desired)


def _spec_patch(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key in _MANAGED:
        old, new = existing.get(key), desired.get(key)
        if _same(key, old, new):
            continue
        if isinstance(new, dict) and isinstance(old, dict):
            # A merge patch only removes map keys that are explicitly null.
            new = {**{k: None for k in old if k not in new}, **new}
        patch[key] = new
    return patch


def _has_pods(state: PlanningState, ordinal: int) -> bool:
    group = state.groups.get(ordinal)
    return group is not None and group.has_pods


def plan_podgroups(ms: ModelServing, ref: MSRef, observed: Observed, support: PodGroupSupport) -> Plan:
    """Plan the PodGroups of a ModelServing (see the module docstring).

    Args:
        ms: The ModelServing (parsed, defaulted; its annotations carry the Volcano queue).
        ref: Its identity.
        observed: The objects it owns (``podgroups`` and what decides the desired groups).
        support: PodGroup support of the cluster.

    Returns:
        Creates, updates and deletes of PodGroups (``status`` is left alone).
    """
    state = build_state(ms, ref, observed, support)
    gate = observed.model_cache
    closed = gate is not None and not gate.open
    existing: dict[str, KubeObject] = {}
    for obj in observed.podgroups:
        name = obj.get("metadata", {}).get("name")
        if isinstance(name, str):
            existing[name] = obj
    wanted = {naming.podgroup_name(ref.name, g): g for g in state.targets.plan.desired} if state.gang else {}
    creates: list[KubeObject] = []
    updates: list[Update] = []
    reasons: list[str] = []
    for name, ordinal in wanted.items():
        desired = build_podgroup(state, ordinal, support.sub_group_policy)
        current = existing.get(name)
        if current is None:
            if closed and not _has_pods(state, ordinal):
                reasons.append(
                    f"PodGroup {name}: waiting for ModelCache {gate.name if gate else ''} before creating it"
                )
                continue
            creates.append(desired)
            reasons.append(f"create PodGroup {name} (minMember {desired['spec']['minMember']})")
            continue
        metadata = current.get("metadata", {})
        if metadata.get("deletionTimestamp") is not None:
            reasons.append(f"PodGroup {name} is terminating; re-create it once it is gone")
            continue
        patch: dict[str, Any] = {}
        spec_patch = _spec_patch(current.get("spec") or {}, desired["spec"])
        if spec_patch:
            patch["spec"] = spec_patch
        for key in ("labels", "annotations"):
            have = metadata.get(key) or {}
            missing = {k: v for k, v in desired["metadata"][key].items() if have.get(k) != v}
            if missing:
                patch.setdefault("metadata", {})[key] = missing
        if patch:
            updates.append(Update("PodGroup", name, str(metadata.get("uid", "")), patch, "spec drift"))
            reasons.append(f"update PodGroup {name}: {sorted(spec_patch) or 'metadata'}")
    why = "no such ServingGroup" if state.gang else "gang scheduling does not apply"
    deletes = [
        Delete("PodGroup", name, str(obj.get("metadata", {}).get("uid", "")), why)
        for name, obj in sorted(existing.items())
        if name not in wanted and obj.get("metadata", {}).get("deletionTimestamp") is None
    ]
    reasons.extend(f"delete PodGroup {d.name}: {d.reason}" for d in deletes)
    return Plan(creates=tuple(creates), updates=tuple(updates), deletes=tuple(deletes), reasons=tuple(reasons))
