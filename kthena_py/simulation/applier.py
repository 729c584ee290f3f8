"""Plans applied to an in-memory cluster as the controller's applier applies them to the API server.

Guarantees:

* :func:`apply_plan` writes a :class:`~kthena_py.plan.modelserving.core.types.Plan` to a
  :class:`~kthena_py.kube.memory.MemoryStore` with its API semantics: deletions first, each with the observed UID
  as a precondition (a replacement is never deleted; optionally graceful, so pods only start terminating), then
  updates as merge patches guarded by the UID, then creations (a taken name is AlreadyExists and skipped).
  A write the API server refuses (NotFound, Conflict, AlreadyExists) is skipped, as the controller leaves it to the
  next reconcile.
* :func:`apply_status` writes a planner's status share as the controller does: server-side apply of the
  ``status`` subresource by the planner's own field manager, forced, so each manager's keys are replaced and its
  conditions merged by ``type`` with the others'.
* :func:`observed` is the snapshot the planners read: the objects of one namespace of each kind a plan touches.
"""

from __future__ import annotations

from kthena_py.api.common import GROUP, MODEL_SERVING_KIND, MODEL_SERVING_PLURAL, VERSION
from kthena_py.kube.errors import AlreadyExists, Conflict, NotFound
from kthena_py.kube.memory import MemoryStore
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES, ResourceType
from kthena_py.plan.modelserving.core.types import Observed, Plan

__all__ = ["KINDS", "MODELSERVINGS", "apply_plan", "apply_status", "observed"]

MODELSERVINGS = ResourceType(GROUP, VERSION, MODEL_SERVING_KIND, MODEL_SERVING_PLURAL)

KINDS = {"Pod": PODS, "Service": SERVICES, "PodGroup": PODGROUPS, "ControllerRevision": CONTROLLER_REVISIONS}
"""The resource type of each kind a plan creates, updates or deletes."""

GRACE_SECONDS = 30
"""The grace period of a graceful pod deletion (the pod default)."""


def observed(store: MemoryStore, namespace: str) -> Observed:
    """The planners' snapshot of ``namespace`` (copies: planners never see later writes)."""
    return Observed(
        pods=tuple(store.objects(PODS, namespace)),
        services=tuple(store.objects(SERVICES, namespace)),
        podgroups=tuple(store.objects(PODGROUPS, namespace)),
        revisions=tuple(store.objects(CONTROLLER_REVISIONS, namespace)),
    )


def apply_plan(
    store: MemoryStore, plan: Plan, namespace: str, *, field_manager: str, graceful: bool = False
) -> list[KubeObject]:
    """Apply ``plan``'s objects (see the module docstring); returns the objects created."""
    for delete in plan.deletes:
        grace = GRACE_SECONDS if graceful and delete.kind == "Pod" else None
        try:
            store.delete(KINDS[delete.kind], delete.name, namespace, uid=delete.uid, grace_period_seconds=grace)
        except (NotFound, Conflict):
            continue  # gone, or a replacement: never delete what was not observed
    for update in plan.updates:
        body = {**update.patch, "metadata": {**(update.patch.get("metadata") or {}), "uid": update.uid}}
        try:
            store.patch(KINDS[update.kind], update.name, body, namespace, field_manager=field_manager)
        except (NotFound, Conflict):
            continue
    created = []
    for obj in plan.creates:
        try:
            created.append(store.create(KINDS[obj["kind"]], obj, namespace, field_manager=field_manager))
        except AlreadyExists:
            continue
    return created


def apply_status(store: MemoryStore, name: str, namespace: str, share: KubeObject, *, field_manager: str) -> bool:
    """Apply one planner's status share to the ModelServing ``name``; returns whether the status changed."""
    before = store.peek(MODELSERVINGS, name, namespace)
    after = store.apply(
        MODELSERVINGS,
        {"metadata": {"name": name, "namespace": namespace}, "status": share},
        field_manager=field_manager,
        subresource="status",
        force=True,
    )
    return before is None or before.get("status") != after.get("status")
