"""The LoRA adapter reconciler (controller ``modelserving-adapters``, runs with ``--controllers=modelserving``).

It keeps the adapter set of a ModelServing's ``serving.kthena-py.io/lora-adapters`` annotation loaded on its
Ready entry pods (:mod:`.reconciler`), through Kthena's runtime sidecar or the engine (:mod:`.engine`); it is woken
only for ModelServings that have (or had) adapters and their pods (:mod:`.predicates`).
"""

from __future__ import annotations

from kthena_py.kube.resources import PODS
from kthena_py.plan.adapters.plan import LOAD_TIMEOUT_SECONDS
from kthena_py.runtime.controller import Controller
from kthena_py.runtime.manager import Manager

from ..components import MODELSERVING
from ..resources import MODELSERVINGS
from .engine import HttpAdapterEngine
from .predicates import modelserving_matters, pod_matters
from .reconciler import MAX_LOADS_PER_MODELSERVING, AdapterReconciler

__all__ = ["CONTROLLER", "register"]

CONTROLLER = "modelserving-adapters"


def register(
    manager: Manager,
    *,
    workers: int,
    max_loads: int = MAX_LOADS_PER_MODELSERVING,
    load_timeout: float = LOAD_TIMEOUT_SECONDS,
) -> Controller:
    """Add the adapter reconciler to ``manager`` (the ModelServing controller's informers cache the pods).

    ``max_loads`` bounds the loads in flight per ModelServing (``--adapter-max-concurrent-loads``); ``load_timeout``
    is how long one load may take, both as the HTTP call's bound and as the wait for a load under way
    (``--adapter-load-timeout``).
    """
    engine = HttpAdapterEngine(load_timeout=load_timeout)
    manager.add_closer(engine.close)
    controller = (
        Controller(
            CONTROLLER,
            AdapterReconciler(
                manager.client,
                manager.cache,
                manager.recorder_for(MODELSERVING),
                engine,
                max_loads=max_loads,
                load_timeout=load_timeout,
            ),
            manager.cache,
            workers=workers,
        )
        .for_(MODELSERVINGS, modelserving_matters)
        .owns(PODS, MODELSERVINGS, pod_matters(manager.cache))
    )
    manager.add_controller(controller)
    return controller
