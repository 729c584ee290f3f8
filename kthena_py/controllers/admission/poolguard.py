"""The webhook's checks across objects for ModelPools: one pool per ModelServing, no autoscaling of a member.

:func:`pool_guard_errors` reads the namespace's ModelPools (and, for a pool, its AutoscalingPolicies) through a
:data:`Lister` at admission time and applies the pure rules of :mod:`kthena_py.api.validation.poolmembers`.

Guarantees:

* Reads are live lists from the API server (every replica serves the webhook, most without informers), one or two
  per reviewed ModelPool or AutoscalingPolicy write; other kinds cost nothing.
* A ModelPool CRD that is not installed means no pools: AutoscalingPolicies are then admitted as before.
* On UPDATE only the references the update adds are checked, so a conflict that predates the update (two objects
  admitted at the same moment, or written while the webhook was away) never blocks an unrelated edit; the pool
  controller reports such conflicts in its ``MembersValid`` condition.
* Any other list failure raises :class:`NeighboursUnavailable`; the handler then refuses the write (fail closed,
  as ``failurePolicy: Fail`` would), with a message saying which list failed.
* Observability: every checked write is counted in ``kthena_admission_pool_guard_total{kind,result}``
  (:mod:`~kthena_py.controllers.admission.metrics`); a refusal is logged at info with the object and the
  references refused, an unavailable list at warning.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from kthena_py.api.common import AUTOSCALING_POLICY_KIND
from kthena_py.api.modelpool import MODEL_POOL_KIND
from kthena_py.api.validation import FieldError, autoscalingpolicy_conflicts, modelpool_conflicts
from kthena_py.api.validation.poolmembers import policy_targets, pool_members
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELPOOLS
from kthena_py.kube import ApiError, KubeApi, NotFound, ResourceType

from .metrics import POOL_GUARD

log = structlog.get_logger("kthena_py.admission.poolguard")

__all__ = ["GUARDED_KINDS", "Lister", "NeighboursUnavailable", "client_lister", "pool_guard_errors"]

Lister = Callable[[ResourceType, str], Awaitable[list[dict[str, Any]]]]
"""Lists the objects of one resource type in one namespace (raises :class:`kthena_py.kube.ApiError`)."""

GUARDED_KINDS = frozenset({MODEL_POOL_KIND, AUTOSCALING_POLICY_KIND})
"""The kinds whose writes :func:`pool_guard_errors` checks."""


class NeighboursUnavailable(Exception):
    """The objects a cross-object rule needs could not be listed."""


def client_lister(client: KubeApi) -> Lister:
    """A :data:`Lister` over ``client`` (every page; a resource the server does not serve lists as empty)."""

    async def list_namespace(rt: ResourceType, namespace: str) -> list[dict[str, Any]]:
        try:
            return list((await client.list_all(rt, namespace)).items)
        except NotFound:
            return []

    return list_namespace


async def _neighbours(lister: Lister, rt: ResourceType, namespace: str) -> list[dict[str, Any]]:
    try:
        return await lister(rt, namespace)
    except ApiError as exc:
        raise NeighboursUnavailable(f"cannot list the {rt.plural} of namespace {namespace!r}: {exc}") from exc


async def pool_guard_errors(
    kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str, lister: Lister
) -> list[FieldError]:
    """The cross-object errors of a write of ``obj`` (a ModelPool or an AutoscalingPolicy; else none).

    Args:
        kind: The reviewed object's kind.
        obj: The object as written.
        old: The stored object on UPDATE, else ``None``.
        namespace: The object's namespace.
        lister: Where the namespace's other objects come from.

    Raises:
        NeighboursUnavailable: A list the rule needs failed.
    """
    try:
        errors = await _check(kind, obj, old, namespace, lister)
    except NeighboursUnavailable as exc:
        POOL_GUARD.labels(kind, "unavailable").inc()
        log.warning("cannot check a write against the namespace's pools; refused", kind=kind, error=str(exc))
        raise
    if errors is None:
        return []
    name = _dict(obj.get("metadata")).get("name")
    if errors:
        POOL_GUARD.labels(kind, "refused").inc()
        log.info(
            "write refused: pool membership", kind=kind, namespace=namespace, name=name, fields=[e.path for e in errors]
        )
    else:
        POOL_GUARD.labels(kind, "admitted").inc()
    return errors


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


async def _check(
    kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str, lister: Lister
) -> list[FieldError] | None:
    """The errors, or ``None`` when nothing needed checking (no list made)."""
    if kind == MODEL_POOL_KIND:
        known = {name for _, name in pool_members(old)} if old is not None else set()
        if not {name for _, name in pool_members(obj)} - known:
            return None
        pools = await _neighbours(lister, MODELPOOLS, namespace)
        policies = await _neighbours(lister, AUTOSCALINGPOLICIES, namespace)
        return modelpool_conflicts(obj, pools, policies, ignore=known)
    if kind == AUTOSCALING_POLICY_KIND:
        known = {name for _, name in policy_targets(old)} if old is not None else set()
        if not {name for _, name in policy_targets(obj)} - known:
            return None
        pools = await _neighbours(lister, MODELPOOLS, namespace)
        return autoscalingpolicy_conflicts(obj, pools, ignore=known)
    return None
