"""Render the pods and headless Services of a role instance.

Guarantees for every rendered pod:

* Name ``<ms>-<g>-<role>-<r>-<i>`` in the ModelServing's namespace, with a controller ownerReference
  (``blockOwnerDeletion: true``).
* Labels: the template's labels, then the controller labels on top (``name``, ``group-name``, ``role``,
  ``role-id``, ``revision``, ``role-template-hash``, and ``entry: "true"`` on entry pods only). Controller-owned
  keys in a template or set by a plugin are dropped/overwritten, so a worker can never carry the entry label.
* Annotations: the template's; with gang scheduling (``schedulerName: volcano`` and the PodGroup CRD served)
  also ``scheduling.k8s.io/group-name`` = the group and ``volcano.sh/task-spec`` = ``<role>-<r>``.
* Spec: the template's spec (deep-copied, never shared with the model), ``schedulerName`` forced to the
  ModelServing's, and ``GROUP_SIZE`` / ``ENTRY_ADDRESS`` / ``WORKER_INDEX`` set in every container and init
  container (a variable of the same name is replaced; ours follow the template's variables).
* A revision that names a ModelCache (``RevisionData.model_cache``) gets its read-only volume, mounts and env in
  every container, and, for a node-local cache, node affinity to ``RenderContext.cache_nodes``
  (:mod:`kthena_py.plan.modelserving.render.modelcache`), before the plugins run (they see the pod as it will be).
* Plugins run after that, in order, so a variable a plugin adds comes after ours and may refer to them
  (``$(ENTRY_ADDRESS)`` expands), as in Kthena. The controller labels, Volcano annotations, ``schedulerName``
  and the three variables are re-asserted after the plugins; the variables keep their place (a plugin that
  replaced one gets ours back where its first one was), so a pod a plugin did not touch there is unchanged.

The pods of one role instance are returned workers first (1..W), entry pod (0) last (a stable order for
plans and ``kthena-py render``; the applier creates them concurrently).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelserving import PodTemplateSpec, Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.plugins import PluginContext, apply_plugins
from kthena_py.plan.modelserving.core.revision import RevisionData
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef
from kthena_py.plan.modelserving.render.modelcache import mount_model_cache

__all__ = ["RenderContext", "build_pod", "build_role_pods", "build_service"]


@dataclass(frozen=True)
class RenderContext:
    """Everything about the ModelServing and revision a pod is rendered from."""

    ref: MSRef
    revision: str
    data: RevisionData
    gang: bool
    """Whether Volcano gang scheduling applies (:func:`kthena_py.plan.modelserving.core.naming.gang_applies`)."""
    owner_references: tuple[Mapping[str, Any], ...] = ()
    """The ModelServing's own ownerReferences (for plugins)."""
    cache_nodes: tuple[str, ...] | None = None
    """The nodes a node-local ModelCache of this revision is Ready on (``None``: no node affinity to add)."""


def _template(role: Role, index: int) -> PodTemplateSpec:
    if index == naming.ENTRY_INDEX or role.worker_template is None:
        return role.entry_template
    return role.worker_template


def _controller_labels(
    ref: MSRef, revision: str, role_hash: str, group: int, role: str, ordinal: int, index: int
) -> dict[str, str]:
    labels = {
        naming.LABEL_NAME: ref.name,
        naming.LABEL_GROUP_NAME: naming.group_name(ref.name, group),
        naming.LABEL_ROLE: role,
        naming.LABEL_ROLE_ID: naming.role_id(role, ordinal),
        naming.LABEL_REVISION: revision,
        naming.LABEL_ROLE_TEMPLATE_HASH: role_hash,
    }
    if index == naming.ENTRY_INDEX:
        labels[naming.LABEL_ENTRY] = naming.ENTRY_LABEL_VALUE
    return labels


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if isinstance(items, list):
            found.extend(item for item in items if isinstance(item, dict))
    return found


def _named(item: Any, names: Mapping[str, str]) -> bool:
    return isinstance(item, dict) and item.get("name") in names


def _set_controller_env(container: dict[str, Any], env: Mapping[str, str], *, keep_place: bool) -> None:
    """Give ``container`` exactly one of each variable in ``env``, in order, with our values.

    Every variable of those names is removed; ours go at the end (``keep_place=False``) or where the first
    one of them was (``keep_place=True``; at the end when there was none), so what follows stays after them.
    """
    items = list(container.get("env") or [])
    first = next((i for i, item in enumerate(items) if _named(item, env)), len(items))
    at = first if keep_place else len(items)
    before = [item for item in items[:at] if not _named(item, env)]
    after = [item for item in items[at:] if not _named(item, env)]
    container["env"] = [*before, *({"name": k, "value": v} for k, v in env.items()), *after]


def _assert_controller_fields(
    pod: KubeObject,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    scheduler: str,
    env: Mapping[str, str],
    *,
    after_plugins: bool = False,
) -> None:
    metadata = pod.setdefault("metadata", {})
    kept = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in naming.CONTROLLER_LABELS}
    metadata["labels"] = {**kept, **labels}
    merged = {**(metadata.get("annotations") or {}), **annotations}
    if merged:
        metadata["annotations"] = merged
    else:
        metadata.pop("annotations", None)
    spec = pod.setdefault("spec", {})
    spec["schedulerName"] = scheduler
    for container in _containers(spec):
        _set_controller_env(container, env, keep_place=after_plugins)


def build_pod(ctx: RenderContext, role: Role, group: int, ordinal: int, index: int, role_hash: str) -> KubeObject:
    """Render one pod of a role instance.

    Args:
        ctx: The ModelServing and revision.
        role: The role (from ``ctx.data``).
        group: The ServingGroup ordinal.
        ordinal: The role instance ordinal.
        index: 0 for the entry pod, ``1..role.workerReplicas`` for workers.
        role_hash: The role's template hash in this revision.

    Returns:
        The pod to create.

    Raises:
        PluginError: If a plugin is unknown or misconfigured.
    """
    ref = ctx.ref
    template = _template(role, index)
    name = naming.pod_name(ref.name, group, role.name, ordinal, index)
    labels = _controller_labels(ref, ctx.revision, role_hash, group, role.name, ordinal, index)
    volcano: dict[str, str] = {}
    if ctx.gang:
        volcano[naming.ANNOTATION_PODGROUP] = naming.group_name(ref.name, group)
        volcano[naming.ANNOTATION_TASK_SPEC] = naming.role_id(role.name, ordinal)
    env = {
        naming.ENV_GROUP_SIZE: str(role.worker_replicas + 1),
        naming.ENV_ENTRY_ADDRESS: naming.entry_address(ref.name, ref.namespace, group, role.name, ordinal),
        naming.ENV_WORKER_INDEX: str(index),
    }
    meta = template.metadata
    pod: KubeObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": dict(meta.labels or {}) if meta else {},
            "annotations": dict(meta.annotations or {}) if meta else {},
            "ownerReferences": [naming.owner_reference(ref)],
        },
        "spec": copy.deepcopy(template.spec or {}),
    }
    _assert_controller_fields(pod, labels, volcano, ctx.data.scheduler_name, env)
    if ctx.data.model_cache is not None and ctx.data.model_cache.resolved:
        mount_model_cache(pod, ctx.data.model_cache, ctx.cache_nodes)
    if ctx.data.plugins:
        plugin_ctx = PluginContext(
            ms_name=ref.name,
            namespace=ref.namespace,
            group_name=naming.group_name(ref.name, group),
            group_ordinal=group,
            role=role.name,
            role_id=naming.role_id(role.name, ordinal),
            index=index,
            owner_references=ctx.owner_references,
        )
        apply_plugins(pod, ctx.data.plugins, plugin_ctx)
        _assert_controller_fields(pod, labels, volcano, ctx.data.scheduler_name, env, after_plugins=True)
    return pod


def build_role_pods(ctx: RenderContext, role: Role, group: int, ordinal: int, role_hash: str) -> list[KubeObject]:
    """Render every pod of a role instance: workers ``1..W`` first, the entry pod last."""
    indices = [*range(1, role.worker_replicas + 1), naming.ENTRY_INDEX]
    return [build_pod(ctx, role, group, ordinal, index, role_hash) for index in indices]


def build_service(ref: MSRef, group: int, role: str, ordinal: int) -> KubeObject:
    """Render the headless Service of a role instance (named like its entry pod, selecting only that pod).

    Args:
        ref: The ModelServing.
        group: The ServingGroup ordinal.
        role: The role name.
        ordinal: The role instance ordinal.

    Returns:
        The Service to create.
    """
    group_label = naming.group_name(ref.name, group)
    role_id = naming.role_id(role, ordinal)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": naming.service_name(ref.name, group, role, ordinal),
            "namespace": ref.namespace,
            "labels": {
                naming.LABEL_NAME: ref.name,
                naming.LABEL_GROUP_NAME: group_label,
                naming.LABEL_ROLE: role,
                naming.LABEL_ROLE_ID: role_id,
            },
            "ownerReferences": [naming.owner_reference(ref)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {
                naming.LABEL_GROUP_NAME: group_label,
                naming.LABEL_ROLE: role,
                naming.LABEL_ROLE_ID: role_id,
                naming.LABEL_ENTRY: naming.ENTRY_LABEL_VALUE,
            },
        },
    }
