"""The ModelBooster controller: one booster -> a ModelServing, a ModelServer and a ModelRoute, and a status.

With the prefetch opt-in (:data:`~kthena_py.vocab.labels.BOOSTER_PREFETCH`) also a ModelCache, on which the
ModelServing is gated (:mod:`kthena_py.plan.modelbooster.prefetch`).

Watches (one informer per type, shared with the other controllers):

* ModelBoosters (spec, label, annotation and deletion changes); the CRD is optional;
* the ModelServings, ModelServers and ModelRoutes a booster controls (created, changed, deleted; for the
  ModelServing also its ``Available`` condition). ModelServers and ModelRoutes are cached only when labelled
  ``workload.serving.volcano.sh/managed-by=workload.serving.volcano.sh``, as in Kthena, and their CRDs are
  optional;
* the ModelCaches a booster controls (created, changed, deleted: a deleted cache lets a booster whose opt-in
  was removed return its ModelServing to the per-pod downloader);
* the two networking CRDs, so installing them later brings the missing children without a restart.

The reconciler (:class:`~.reconciler.BoosterReconciler`) writes with its own field manager
``kthena-py-modelbooster``. ``kthena-py modelbooster migrate`` (:mod:`~.migrate`) hands a booster's children over
to the user.
"""

from __future__ import annotations

from collections.abc import Iterable

from kthena_py.kube.objects import KubeObject, meta, name_of, namespace_of
from kthena_py.kube.resources import CRDS
from kthena_py.plan.modelbooster.naming import LABEL_MODEL_UID, MANAGED_BY_SELECTOR
from kthena_py.runtime.controller import Controller, spec_changed, spec_or_metadata_changed
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.reconcile import Request
from kthena_py.vocab.conditions import AVAILABLE

from ..components import MODELBOOSTER
from ..resources import MODELBOOSTERS, MODELCACHES, MODELROUTES, MODELSERVERS, MODELSERVINGS
from .observe import MODEL_CACHE_CRD, NETWORKING_CRDS, crd_selector
from .reconciler import BoosterReconciler
from .settings import ImageSource, Settings

__all__ = ["Settings", "register"]


def _available(obj: KubeObject) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == AVAILABLE:
            return str(condition.get("status"))
    return None


def modelserving_changed(old: KubeObject | None, new: KubeObject) -> bool:
    """ModelServing events a booster acts on: spec, labels, annotations, owners, deletion, ``Available``."""
    if old is None or spec_or_metadata_changed(old, new):
        return True
    return meta(old).get("ownerReferences") != meta(new).get("ownerReferences") or _available(old) != _available(new)


def register(manager: Manager, *, workers: int, settings: Settings | None = None) -> Controller:
    """Add the ModelBooster controller to ``manager``."""
    cache = manager.cache
    for rt in (MODELSERVERS, MODELROUTES):
        cache.select(rt, MANAGED_BY_SELECTOR)
        cache.informer(rt, optional=True)
        cache.index_label(rt, LABEL_MODEL_UID)
    cache.informer(MODELBOOSTERS, optional=True)
    cache.informer(MODELCACHES, optional=True)
    cache.index_label(MODELSERVINGS, LABEL_MODEL_UID)
    cache.index_label(MODELCACHES, LABEL_MODEL_UID)

    def every_booster(_: KubeObject) -> Iterable[Request]:
        return [Request(namespace_of(b), name_of(b)) for b in cache.list(MODELBOOSTERS)]

    images = ImageSource(manager.client, settings or Settings())
    controller = (
        Controller(
            "modelbooster",
            BoosterReconciler(manager.client, cache, manager.recorder_for(MODELBOOSTER), images),
            cache,
            workers=workers,
        )
        .for_(MODELBOOSTERS, spec_or_metadata_changed)
        .owns(MODELSERVINGS, MODELBOOSTERS, modelserving_changed)
        .owns(MODELSERVERS, MODELBOOSTERS, spec_changed)
        .owns(MODELROUTES, MODELBOOSTERS, spec_changed)
        .owns(MODELCACHES, MODELBOOSTERS, spec_or_metadata_changed)
    )
    for crd in (*NETWORKING_CRDS.values(), MODEL_CACHE_CRD):
        controller.watches(CRDS, every_booster, field_selector=crd_selector(crd))
    manager.add_controller(controller)
    return controller
