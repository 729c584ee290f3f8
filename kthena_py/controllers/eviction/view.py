"""The observed state an eviction decision works on: a ModelServing's pods and revisions, cached or live.

Guarantees: :func:`observe_cached` reads only the informer cache (good for showing a budget, never for granting
or releasing a disruption); :func:`observe_live` reads the API server (three label-selected lists, sent at
once), so the objects it returns are at least as new as anything read before it was called. Both return only
objects controlled by the ModelServing's UID.

Both carry the serving gate of a ModelServing that names a ModelCache, decided from the informer cache exactly as
the ModelServing controllers decide it (:func:`~kthena_py.controllers.servingview.model_cache_gate`): its mount
enters the update revision, so a view without it would take every pod of a gated ModelServing for an outdated one
and could keep other units than the controllers' scaling plan keeps.
"""

from __future__ import annotations

import asyncio
import contextlib

from kthena_py.api.modelserving import ModelServing
from kthena_py.kube import KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.modelcache import CacheGate, cache_name
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.types import MSRef, Observed, PodGroupSupport
from kthena_py.runtime.cache import CacheReader
from kthena_py.vocab.owners import controller_uid

from ..resources import MODELCACHES
from ..servingview import gate_with, observe

__all__ = ["observe_cached", "observe_live", "planning_state"]


def planning_state(ms: ModelServing, ref: MSRef, observed: Observed) -> PlanningState:
    """The planning state of the budget (gang support is irrelevant to readiness).

    ``observed.disrupted`` stays empty here: the budget applies the tracker itself (the records it reads and writes
    back), and a recorded unit must still show whether its pods recovered so that its record can be released.
    """
    return build_state(ms, ref, observed, PodGroupSupport())


def observe_cached(cache: CacheReader, ref: MSRef) -> Observed:
    """The ModelServing's pods and revisions as the cache holds them."""
    return observe(cache, ref)


def _controlled(items: list[KubeObject], uid: str) -> tuple[KubeObject, ...]:
    return tuple(obj for obj in items if controller_uid(obj) == uid)


async def _gate(client: KubeApi, cache: CacheReader, ms_obj: KubeObject) -> CacheGate | None:
    """The serving gate as the controllers see it; a ModelCache the cache does not hold is read from the API server.

    The cache first, so that the gate (which enters the revision hash) is the one the controllers planned with; a
    cache without it (another sharded replica's namespace, or not yet delivered) must not turn a named cache into an
    unresolved mount, so it is read live then (not found: as the cache would say).
    """
    name = cache_name(meta(ms_obj).get("annotations"))
    if name is None:
        return None
    namespace = str(meta(ms_obj).get("namespace") or "")
    found = cache.get(MODELCACHES, name, namespace)
    if found is None:
        with contextlib.suppress(NotFound):
            found = await client.get(MODELCACHES, name, namespace)
    return gate_with(ms_obj, found)


async def observe_live(client: KubeApi, cache: CacheReader, ms_obj: KubeObject, ref: MSRef) -> Observed:
    """The ModelServing's pods, Services and revisions as the API server holds them now, with its serving gate.

    Services count: a role instance with workers is ready only with its headless Service (as for the
    controllers), so a view without them would see every such unit as not ready.

    Args:
        client: Reads the pods, Services and revisions.
        cache: Where the gate's ModelCache is read (as the controllers read it; live when the cache lacks it).
        ms_obj: The ModelServing object (its annotation names the cache).
        ref: Its identity.

    Raises:
        pydantic.ValidationError: The ModelServing names a ModelCache but its spec is invalid.
    """
    gate = await _gate(client, cache, ms_obj)
    selector = f"{naming.LABEL_NAME}={ref.name}"
    pods, services, revisions = await asyncio.gather(
        client.list_all(PODS, ref.namespace, label_selector=selector),
        client.list_all(SERVICES, ref.namespace, label_selector=selector),
        client.list_all(CONTROLLER_REVISIONS, ref.namespace, label_selector=selector),
    )
    return Observed(
        model_cache=gate,
        pods=_controlled(pods.items, ref.uid),
        services=_controlled(services.items, ref.uid),
        revisions=_controlled(revisions.items, ref.uid),
    )
