"""The autoscaling controllers: AutoscalingPolicy -> ModelServing replicas.

Two controllers, independent of each other and of the ModelServing controllers (they share only the manager's
cache and the HTTP connection pool):

* ``autoscaling`` (:class:`~.homogeneous.TargetReconciler`): homogeneous targets (``scale`` subresource) and
  disaggregated targets (role replicas, ratio constraint);
* ``autoscaling-heterogeneous`` (:class:`~.heterogeneous.HeterogeneousReconciler`): heterogeneous targets
  (the total, then the cost optimizer).

Each reconciles up to ``max(workers, 16)`` policies at once (a pass mostly waits on the network, and one
policy's slow pods must not delay the others). A policy is reconciled periodically (every ``sync_period``
seconds: the ``sync_period`` argument, else ``$KTHENA_PY_AUTOSCALER_SYNC_PERIOD``, else 15), and when its
``metadata.generation`` changes, when it is deleted, or when a ModelServing it targets appears or disappears.
Writes of their own (status, the history annotation, ModelServing replicas) do not trigger extra passes. The
AutoscalingPolicy CRD is optional: without it both controllers stay idle. See ``docs/autoscaling.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from kthena_py.kube.objects import KubeObject, name_of, namespace_of
from kthena_py.kube.resources import PODS
from kthena_py.runtime.controller import Controller, generation_changed
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.reconcile import Request

from ..components import AUTOSCALER
from ..resources import AUTOSCALINGPOLICIES, MODELSERVINGS, narrow_cache
from .base import ENV_SYNC_PERIOD, Deps, Settings
from .collector import NAME_LABEL, PodScraper
from .convert import TargetKey, target_refs
from .heterogeneous import HeterogeneousReconciler
from .homogeneous import TargetReconciler

__all__ = ["ENV_SYNC_PERIOD", "MIN_WORKERS", "Settings", "register"]

MIN_WORKERS = 16
"""Policies reconciled concurrently per controller, at least: a pass mostly waits on the network."""


def _added_or_deleted(old: KubeObject | None, new: KubeObject) -> bool:
    return old is None


def _policies_targeting(deps: Deps, kinds: frozenset[str]) -> Callable[[KubeObject], Iterable[Request]]:
    def mapper(ms: KubeObject) -> Iterable[Request]:
        key = TargetKey(namespace_of(ms), name_of(ms))
        out = []
        for policy in deps.cache.list(AUTOSCALINGPOLICIES):
            kind, targets = target_refs(policy)
            if kind in kinds and key in targets:
                out.append(Request(namespace_of(policy), name_of(policy)))
        return out

    return mapper


def register(
    manager: Manager, *, workers: int = 4, sync_period: float | None = None, settings: Settings | None = None
) -> list[Controller]:
    """Add the two autoscaling controllers to ``manager``.

    Args:
        manager: The manager (its cache and client are used; Events are recorded as ``autoscaler-controller``).
        workers: Policies reconciled concurrently, per controller (at least :data:`MIN_WORKERS`).
        sync_period: Seconds between passes (default: ``$KTHENA_PY_AUTOSCALER_SYNC_PERIOD``, else 15).
        settings: Full settings (overrides ``sync_period``).

    Returns:
        The controllers, as added.
    """
    settings = settings or Settings.from_env(sync_period)
    cache = manager.cache
    narrow_cache(cache)
    cache.informer(AUTOSCALINGPOLICIES, optional=True)
    cache.informer(MODELSERVINGS)
    cache.informer(PODS)
    cache.index_label(PODS, NAME_LABEL)
    scraper = PodScraper(timeout=settings.scrape_timeout, concurrency=settings.scrape_concurrency)
    deps = Deps(manager.client, cache, manager.recorder_for(AUTOSCALER), scraper, settings)
    deps.same_namespace_targets = lambda: manager.caches_own_namespaces_only
    controllers = []
    for reconciler in (TargetReconciler(deps), HeterogeneousReconciler(deps)):
        controller = (
            Controller(reconciler.controller, reconciler, cache, workers=max(workers, MIN_WORKERS))
            .for_(AUTOSCALINGPOLICIES, generation_changed)
            .watches(MODELSERVINGS, _policies_targeting(deps, reconciler.target_types), _added_or_deleted)
        )
        manager.add_controller(controller)
        controllers.append(controller)

    async def close_scraper() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await scraper.close()

    manager.add_runnable(close_scraper, needs_leader=True)
    return controllers
