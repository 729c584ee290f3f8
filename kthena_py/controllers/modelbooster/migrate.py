"""Hand a ModelBooster's live children over to the user, so the booster can be deleted without downtime.

Steps (each idempotent, so running it again is safe):

1. Mark the booster :data:`~kthena_py.plan.modelbooster.naming.ANNOTATION_MIGRATED`: the controller stops
   reconciling it (and re-adopts nothing).
2. Remove the booster's owner reference from every ModelServing, ModelServer, ModelRoute and ModelCache (the
   prefetch opt-in's) that has one, with a ``resourceVersion`` precondition (retried on conflict). Nothing else
   of them changes: no spec, no label, so no pod is deleted or restarted.

Deleting the booster afterwards leaves the workload running: the garbage collector finds no dependents.
"""

from __future__ import annotations

from typing import Any

from kthena_py.kube import Conflict, KubeApi, NotFound, ResourceType
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.plan.modelbooster.naming import ANNOTATION_MIGRATED

from ..resources import MODELBOOSTERS
from .observe import CHILD_TYPES

__all__ = ["FIELD_MANAGER", "MigrationError", "migrate"]

FIELD_MANAGER = "kthena-py-migrate"
_ATTEMPTS = 5


class MigrationError(Exception):
    """The migration cannot run (the booster does not exist); nothing was changed."""


def _refers_to(obj: KubeObject, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in meta(obj).get("ownerReferences") or [])


async def _release(client: KubeApi, rt: ResourceType, obj: KubeObject, uid: str) -> bool:
    """Remove ``uid`` from ``obj``'s owner references; return whether this call changed it."""
    name, namespace = str(meta(obj).get("name")), str(meta(obj).get("namespace"))
    for _ in range(_ATTEMPTS):
        if not _refers_to(obj, uid):
            return False
        remaining = [ref for ref in meta(obj).get("ownerReferences") or [] if ref.get("uid") != uid]
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": meta(obj).get("resourceVersion"), "ownerReferences": remaining or None}
        }
        try:
            await client.patch(rt, name, patch, namespace, field_manager=FIELD_MANAGER)
            return True
        except Conflict:
            obj = await client.get(rt, name, namespace)
    raise Conflict(409, "Conflict", f"{rt.kind} {name} keeps changing; run the migration again")


async def migrate(client: KubeApi, name: str, namespace: str) -> list[str]:
    """Migrate the booster ``namespace/name`` off ModelBooster; return one line per thing done.

    Raises:
        MigrationError: The booster does not exist.
        ApiError: A write failed (what was done before stands; running it again continues).
    """
    try:
        booster = await client.get(MODELBOOSTERS, name, namespace)
    except NotFound as exc:
        raise MigrationError(f"modelbooster {namespace}/{name} not found") from exc
    uid = str(meta(booster).get("uid"))
    lines: list[str] = []
    if ANNOTATION_MIGRATED in (meta(booster).get("annotations") or {}):
        lines.append(f"modelbooster/{name}: already marked {ANNOTATION_MIGRATED}; the controller leaves it alone")
    else:
        patch = {"metadata": {"uid": uid, "annotations": {ANNOTATION_MIGRATED: "true"}}}
        await client.patch(MODELBOOSTERS, name, patch, namespace, field_manager=FIELD_MANAGER)
        lines.append(f"modelbooster/{name}: marked {ANNOTATION_MIGRATED}=true; the controller no longer manages it")
    released = 0
    for kind, rt in CHILD_TYPES.items():
        try:
            objects = (await client.list(rt, namespace)).items
        except NotFound:
            lines.append(f"{rt.plural}.{rt.group}: not served in this cluster, skipped")
            continue
        for obj in sorted((o for o in objects if _refers_to(o, uid)), key=lambda o: str(meta(o).get("name"))):
            child = str(meta(obj).get("name"))
            if await _release(client, rt, obj, uid):
                released += 1
                lines.append(f"{kind.lower()}/{child}: removed the owner reference to ModelBooster {name}")
    if released == 0:
        lines.append("no child is owned by the booster any more; nothing else to do")
    lines.append(
        f"the children keep running as they are; `kubectl delete modelbooster {name} -n {namespace}` "
        "now deletes only the booster"
    )
    return lines
