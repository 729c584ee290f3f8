"""The ModelCache controller: stage model weights once with a Job, verify them, report, clean up.

Watches (informers shared with the other controllers):

* ModelCaches (spec, labels, annotations, deletion); the CRD is optional (a manager on a cluster without it runs);
* the Jobs it owns, cached only when labelled :data:`~kthena_py.vocab.labels.MODEL_CACHE_NAME` (the job
  controller's status changes wake the owning cache); the pods of those Jobs are read live (see :mod:`.observe`);
* PersistentVolumeClaims (a missing claim that appears, a claim that binds or is lost), mapped to the caches of
  their namespace that use them;
* Nodes (readiness, labels, cordon), mapped to every node-local cache;
* ModelServings, mapped to the cache their annotation :data:`~kthena_py.vocab.labels.MODEL_CACHE` names
  (``prefetch: false`` starts, deletion waits), and their rollout's progress (the retirement of a superseded
  copy waits for it; pods are not watched: a waiting copy is looked at again every few seconds).

Sources are revalidated by :mod:`.revalidate` (metadata requests, bounded across caches; the cache's Secret is
read with a GET when a probe runs); the planner decides when (:mod:`kthena_py.plan.modelcache.refresh`).

Writes use the field manager ``kthena-py-modelcache``; Events are recorded as ``modelcache-controller``.
PodGroups are created with their Jobs and deleted with them, never watched.
"""

from __future__ import annotations

from collections.abc import Iterable

from kthena_py.kube.objects import KubeObject, annotations_of, labels_of, meta, name_of, namespace_of
from kthena_py.kube.resources import JOBS, NODES, PERSISTENT_VOLUME_CLAIMS, PODS
from kthena_py.plan.modelcache import uses_claim
from kthena_py.runtime.controller import Controller, spec_or_metadata_changed
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.reconcile import Request
from kthena_py.vocab.conditions import READY, UPDATE_IN_PROGRESS
from kthena_py.vocab.labels import MODEL_CACHE, MODEL_CACHE_NAME

from ..components import MODELCACHE
from ..resources import MODELCACHES, MODELSERVINGS, narrow_cache
from .apply import FIELD_MANAGER
from .observe import parse_cache
from .progress import HttpProgress, ProgressSource
from .reconciler import CacheReconciler
from .revalidate import Prober
from .settings import Settings

__all__ = ["FIELD_MANAGER", "Settings", "register"]


def job_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Job events a cache acts on: creation, deletion, status (active, done, conditions), labels."""
    if old is None:
        return True
    return old.get("status") != new.get("status") or meta(old).get("deletionTimestamp") != meta(new).get(
        "deletionTimestamp"
    )


def _node_key(node: KubeObject) -> tuple[object, ...]:
    ready = next(
        (c.get("status") for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == READY), None
    )
    return (ready, labels_of(node), (node.get("spec") or {}).get("unschedulable"))


def node_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """Node events a node-local cache acts on: added, removed, readiness, labels, cordon (not heartbeats)."""
    return old is None or _node_key(old) != _node_key(new)


def modelserving_names_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """ModelServing events that matter to a cache: added, removed, or its cache annotation changed."""
    return old is None or annotations_of(old).get(MODEL_CACHE) != annotations_of(new).get(MODEL_CACHE)


def _rollout_key(ms: KubeObject) -> tuple[object, ...]:
    status = ms.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    update: dict[str, object] = next((c for c in conditions if c.get("type") == UPDATE_IN_PROGRESS), {})
    fields = ("observedGeneration", "currentRevision", "updateRevision", "updatedReplicas", "availableReplicas")
    return (
        meta(ms).get("generation"),
        meta(ms).get("deletionTimestamp"),
        *(status.get(f) for f in fields),
        tuple(update.get(k) for k in ("status", "reason", "observedGeneration")),
    )


def modelserving_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """The annotation changed, or a gated ModelServing's rollout moved (what the retirement of copies waits for)."""
    if modelserving_names_changed(old, new):
        return True
    assert old is not None
    return bool(annotations_of(new).get(MODEL_CACHE)) and _rollout_key(old) != _rollout_key(new)


def register(
    manager: Manager,
    *,
    workers: int,
    settings: Settings | None = None,
    progress: ProgressSource | None = None,
) -> Controller:
    """Add the ModelCache controller to ``manager``.

    Args:
        manager: The manager.
        workers: Concurrent reconciles.
        settings: The controller's settings (default: :class:`Settings`).
        progress: Where download progress is read (default: HTTP scrapes of the download pods, whose client
            session the manager closes when it stops; a source given here is the caller's to close).
    """
    chosen = settings or Settings()
    cache = manager.cache
    cache.select(JOBS, MODEL_CACHE_NAME)
    cache.informer(MODELCACHES, optional=True)
    cache.informer(JOBS)
    cache.informer(PERSISTENT_VOLUME_CLAIMS)
    cache.informer(NODES)
    narrow_cache(cache)  # retire: the gated ModelServings' pods (what the other controllers cache too)
    cache.informer(PODS)

    def caches_using_claim(claim: KubeObject) -> Iterable[Request]:
        namespace = namespace_of(claim)
        found = []
        for obj in cache.list(MODELCACHES, namespace):
            try:
                if uses_claim(parse_cache(obj)) == name_of(claim):
                    found.append(Request(namespace, name_of(obj)))
            except ValueError:
                continue
        return found

    def node_local_caches(_: KubeObject) -> Iterable[Request]:
        return [
            Request(namespace_of(obj), name_of(obj))
            for obj in cache.list(MODELCACHES)
            if ((obj.get("spec") or {}).get("storage") or {}).get("nodeLocal") is not None
        ]

    def named_cache(ms: KubeObject) -> Iterable[Request]:
        name = annotations_of(ms).get(MODEL_CACHE)
        return [Request(namespace_of(ms), name)] if name else []

    if progress is None:
        scraper = HttpProgress(timeout=chosen.scrape_timeout)
        manager.add_closer(scraper.close)
        progress = scraper
    prober = Prober(manager.client, concurrency=chosen.revalidation_concurrency, timeout=chosen.revalidation_timeout)
    manager.add_closer(prober.close)
    reconciler = CacheReconciler(
        manager.client, cache, manager.recorder_for(MODELCACHE), chosen.plan_settings(), progress, prober=prober
    )
    controller = (
        Controller("modelcache", reconciler, cache, workers=workers)
        .for_(MODELCACHES, spec_or_metadata_changed)
        .owns(JOBS, MODELCACHES, job_changed)
        .watches(PERSISTENT_VOLUME_CLAIMS, caches_using_claim)
        .watches(NODES, node_local_caches, node_changed)
        .watches(MODELSERVINGS, named_cache, modelserving_changed)
    )
    manager.add_controller(controller)
    return controller
