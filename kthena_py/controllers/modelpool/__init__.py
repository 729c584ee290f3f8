"""The ModelPool controller: swaps members of a pool in and out of its GPU slots on demand.

Watches (informers shared with the other controllers):

* ModelPools (spec and metadata: the activators' demand annotations); the CRD is optional (a manager on a cluster
  without it runs);
* ModelServings, mapped to the pools of their namespace that list them (a replica change by someone else is put
  back; a member appearing or going);
* the members' pods (cached only when labelled ``modelserving.volcano.sh/name``), mapped the same way: a victim's
  last pod going, a target's pod becoming Ready, wake the pool.

Each pass reads the pool and its members live (:mod:`.observe`), decides with the pure planner
(:mod:`kthena_py.plan.modelpool.swap`), records the intent in the pool's status, then scales
(:mod:`.apply`). Idle checks scrape the residents' engines (:mod:`.idlecheck`).

Writes use the field manager ``kthena-py-modelpool``; Events are recorded as ``modelpool-controller``.
"""

from __future__ import annotations

from collections.abc import Iterable

from kthena_py.kube.objects import KubeObject, label_of, name_of, namespace_of
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelpool.view import parse_spec
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Controller, pod_state_changed, spec_or_metadata_changed
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.reconcile import Request
from kthena_py.vocab.labels import SERVING_NAME

from ..components import MODELPOOL
from ..resources import MODELPOOLS, MODELSERVINGS, narrow_cache
from .apply import FIELD_MANAGER
from .idlecheck import HttpIdleProber, IdleProber
from .reconciler import PoolReconciler

__all__ = ["FIELD_MANAGER", "pools_listing", "register"]


def pools_listing(cache: SharedCache, namespace: str, member: str | None) -> list[Request]:
    """The pools of ``namespace`` whose ``spec.members`` name ``member``."""
    if not member:
        return []
    return [
        Request(namespace, name_of(pool))
        for pool in cache.list(MODELPOOLS, namespace)
        if member in parse_spec(pool).members
    ]


def serving_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """ModelServing events a pool acts on: added, removed, its replicas changed."""
    if old is None:
        return True
    return (old.get("spec") or {}).get("replicas") != (new.get("spec") or {}).get("replicas") or (
        (old.get("metadata") or {}).get("deletionTimestamp") != (new.get("metadata") or {}).get("deletionTimestamp")
    )


def register(manager: Manager, *, workers: int, prober: IdleProber | None = None) -> Controller:
    """Add the ModelPool controller to ``manager``.

    Args:
        manager: The manager.
        workers: Concurrent reconciles (each pool is reconciled by one worker at a time).
        prober: The idle check (default: HTTP scrapes of the residents' Ready entry pods, closed with the manager).
    """
    cache = manager.cache
    cache.informer(MODELPOOLS, optional=True)
    narrow_cache(cache)
    cache.informer(PODS)
    if prober is None:
        prober = HttpIdleProber()
        manager.add_closer(prober.close)

    def pools_of_serving(ms: KubeObject) -> Iterable[Request]:
        return pools_listing(cache, namespace_of(ms), name_of(ms))

    def pools_of_pod(pod: KubeObject) -> Iterable[Request]:
        return pools_listing(cache, namespace_of(pod), label_of(pod, SERVING_NAME))

    reconciler = PoolReconciler(manager.client, manager.recorder_for(MODELPOOL), prober)
    controller = (
        Controller("modelpool", reconciler, cache, workers=workers)
        .for_(MODELPOOLS, spec_or_metadata_changed)
        .watches(MODELSERVINGS, pools_of_serving, serving_changed)
        .watches(PODS, pools_of_pod, pod_state_changed)
    )
    manager.add_controller(controller)
    return controller
