"""The pool controller's writes: the pool's status (its recorded intent) and its members' replicas.

Guarantees:

* The status is replaced whole by a JSON merge patch of the ``status`` subresource: top-level fields no longer
  present, and fields of ``swap`` / ``lastSwap`` no longer present, are set to ``null``, so nothing of an earlier
  swap lingers in the recorded intent. No write when the status is already the one given.
* A member's replicas are written through its ``scale`` subresource under the field manager
  :data:`~kthena_py.vocab.labels.MODELPOOL_FIELD_MANAGER`, the only writer of pool members' replicas.
* Release times are merge-patched into the pool's annotations (one key per member swapped out), same field
  manager.
* Failures are raised as the :class:`~kthena_py.kube.ApiError` they are (the controller retries with backoff);
  the reconciler writes replicas only after the status write succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.kube import KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.plan.modelpool.demand import format_demand_time, released_annotation
from kthena_py.vocab.labels import MODELPOOL_FIELD_MANAGER

from ..resources import MODELPOOLS, MODELSERVINGS

__all__ = ["FIELD_MANAGER", "record_released", "scale_member", "status_patch", "write_status"]

FIELD_MANAGER = MODELPOOL_FIELD_MANAGER
_NESTED = ("swap", "lastSwap")


def status_patch(current: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``current`` into exactly ``status`` (see the module docstring)."""
    patch: dict[str, Any] = {k: None for k in current if k not in status}
    patch.update(status)
    for key in _NESTED:
        old, new = current.get(key), status.get(key)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            patch[key] = {**{k: None for k in old if k not in new}, **new}
    return patch


async def write_status(client: KubeApi, pool: KubeObject, status: Mapping[str, Any]) -> bool:
    """Record ``status`` on ``pool``; ``False`` when nothing was due or the pool is gone."""
    current = pool.get("status") or {}
    if current == status:
        return False
    md = meta(pool)
    try:
        await client.patch(
            MODELPOOLS,
            str(md.get("name")),
            {"metadata": {"uid": md.get("uid")}, "status": status_patch(current, status)},
            md.get("namespace"),
            subresource="status",
            field_manager=FIELD_MANAGER,
        )
    except NotFound:
        return False
    return True


async def scale_member(client: KubeApi, namespace: str, name: str, replicas: int) -> None:
    """Set a member's ``spec.replicas`` through its scale subresource."""
    await client.patch(
        MODELSERVINGS,
        name,
        {"spec": {"replicas": replicas}},
        namespace,
        subresource="scale",
        field_manager=FIELD_MANAGER,
    )


async def record_released(client: KubeApi, pool: KubeObject, released: Mapping[str, float]) -> None:
    """Record when members were swapped out (annotations on the pool)."""
    md = meta(pool)
    annotations = {released_annotation(name): format_demand_time(when) for name, when in released.items()}
    await client.patch(
        MODELPOOLS,
        str(md.get("name")),
        {"metadata": {"annotations": annotations}},
        md.get("namespace"),
        field_manager=FIELD_MANAGER,
    )
