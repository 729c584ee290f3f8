"""The eviction budget: ``rolloutStrategy.evictionStrategy`` enforced on every pod eviction.

Split as Kubernetes splits PodDisruptionBudgets:

* :class:`~.webhook.EvictionWebhook` (every replica, :func:`add_webhook`): the validating admission endpoint
  ``/validate-eviction`` for ``pods/eviction`` CREATE, which grants an eviction only against the budget and
  records the disrupted unit in the tracker ConfigMap with an optimistic-concurrency check;
* :class:`~.reconciler.EvictionBudgetReconciler` (the leader, :func:`register`): shows each budget as the
  ``DisruptionAllowed`` condition and garbage-collects the trackers.

Both need ConfigMap access (``manifests/eviction``); :func:`register` is called only with
``--enable-eviction-webhook``. The endpoint is always served: disabled, it admits everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from kthena_py.kube.objects import KubeObject, controller_ref, labels_of, namespace_of
from kthena_py.kube.resources import CONFIGMAPS, PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Controller, Predicate, pod_state_changed, spec_or_metadata_changed
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.reconcile import Request
from kthena_py.runtime.webhook import WebhookServer

from ..resources import MODELCACHES, MODELSERVINGS, narrow_cache
from ..servingview import model_cache_changed, modelservings_of_cache, watch_model_caches
from .reconciler import FIELD_MANAGER, EvictionBudgetReconciler, condition_of
from .webhook import DEFAULT_TTL, EVICTION_PATH, EvictionWebhook

__all__ = [
    "CONTROLLER_NAME",
    "DEFAULT_TTL",
    "EVICTION_PATH",
    "FIELD_MANAGER",
    "EvictionBudgetReconciler",
    "EvictionWebhook",
    "add_webhook",
    "register",
]

CONTROLLER_NAME = "eviction-budget"


def add_webhook(server: WebhookServer, manager: Manager, *, enabled: bool, ttl: float = DEFAULT_TTL) -> EvictionWebhook:
    """Serve the eviction endpoint at :data:`EVICTION_PATH` of ``server`` (before the server starts)."""
    if enabled:
        watch_model_caches(manager.cache)  # the serving gate is part of what a grant plans from (its revisions)
    handler = EvictionWebhook(manager.client, manager.cache, manager.recorder, enabled=enabled, ttl=ttl)
    server.add_handler(EVICTION_PATH, handler)
    return handler


def _has_strategy(obj: KubeObject | None) -> bool:
    spec = (obj or {}).get("spec") or {}
    return bool((spec.get("rolloutStrategy") or {}).get("evictionStrategy"))


def _modelserving_changed(old: KubeObject | None, new: KubeObject) -> bool:
    return spec_or_metadata_changed(old, new) or (old is not None and condition_of(old) != condition_of(new))


def _pods_of_protected(cache: SharedCache) -> Predicate:
    def predicate(old: KubeObject | None, new: KubeObject) -> bool:
        if not pod_state_changed(old, new):
            return False
        owner = controller_ref(new)
        if owner is None or owner.get("kind") != MODELSERVINGS.kind:
            return False
        return _has_strategy(cache.get(MODELSERVINGS, str(owner.get("name")), namespace_of(new)))

    return predicate


def register(manager: Manager, *, workers: int) -> Controller:
    """Add the eviction budget reconciler to ``manager`` (it needs ConfigMap access: see ``manifests/eviction``)."""
    cache = manager.cache
    narrow_cache(cache)
    cache.select(CONFIGMAPS, naming.LABEL_NAME)  # trackers only
    watch_model_caches(cache)  # the serving gate is part of what the budget plans from (its revisions)
    reconciler = EvictionBudgetReconciler(manager.client, cache)

    def trackers(obj: KubeObject) -> Iterable[Request]:
        name = labels_of(obj).get(naming.LABEL_NAME)
        return [Request(namespace_of(obj), str(name))] if name else []

    controller = (
        Controller(CONTROLLER_NAME, reconciler, cache, workers=workers)
        .for_(MODELSERVINGS, _modelserving_changed)
        .owns(PODS, MODELSERVINGS, _pods_of_protected(cache))
        .watches(CONFIGMAPS, trackers)
        .watches(MODELCACHES, modelservings_of_cache(cache), model_cache_changed)
    )
    manager.add_controller(controller)
    return controller
