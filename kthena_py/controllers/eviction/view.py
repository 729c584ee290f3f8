"""The observed state an eviction decision works on: a ModelServing's pods and revisions, cached or live.

Guarantees: :func:`observe_cached` reads only the informer cache (good for showing a budget, never for granting
or releasing a disruption); :func:`observe_live` reads the API server (three label-selected lists, sent at
once), so what it returns is at least as new as anything read before it was called. Both return only objects
controlled by the ModelServing's UID.
"""

from __future__ import annotations

import asyncio

from kthena_py.api.modelserving import ModelServing
from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.core.types import MSRef, Observed, PodGroupSupport
from kthena_py.runtime.cache import CacheReader
from kthena_py.vocab.owners import controller_uid

from ..servingview import observe

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


async def observe_live(client: KubeApi, ref: MSRef) -> Observed:
    """The ModelServing's pods, Services and revisions as the API server holds them now.

    Services count: a role instance with workers is ready only with its headless Service (as for the
    controllers), so a view without them would see every such unit as not ready.
    """
    selector = f"{naming.LABEL_NAME}={ref.name}"
    pods, services, revisions = await asyncio.gather(
        client.list_all(PODS, ref.namespace, label_selector=selector),
        client.list_all(SERVICES, ref.namespace, label_selector=selector),
        client.list_all(CONTROLLER_REVISIONS, ref.namespace, label_selector=selector),
    )
    return Observed(
        pods=_controlled(pods.items, ref.uid),
        services=_controlled(services.items, ref.uid),
        revisions=_controlled(revisions.items, ref.uid),
    )
