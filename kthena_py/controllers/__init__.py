"""Kthena's controllers, one package per concern; :func:`register_all` wires them into a manager.

Importing this package loads none of the controllers: :func:`register_all` imports each controller package
only when that controller is enabled (``--controllers``, :mod:`.selection`), so a manager running only the
ModelServing controller never loads the autoscaler or the ModelBooster code (nor what they import).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from .selection import AUTOSCALER, CONTROLLERS, MODELBOOSTER, MODELCACHE, MODELPOOL, MODELSERVING

if TYPE_CHECKING:
    from kthena_py.runtime.manager import Manager

    from .modelbooster.settings import Settings as ModelBoosterSettings
    from .modelcache.settings import Settings as ModelCacheSettings


def register_all(
    manager: Manager,
    *,
    controllers: Collection[str] = CONTROLLERS,
    workers: int = 4,
    autoscaler_sync_period: float | None = None,
    modelbooster_settings: ModelBoosterSettings | None = None,
    eviction_budget: bool = False,
    modelcache_settings: ModelCacheSettings | None = None,
    adapter_load_timeout: float | None = None,
    adapter_max_loads: int | None = None,
) -> list[str]:
    """Register the enabled controllers with ``manager``; return the names of what was registered.

    Args:
        manager: The manager to add the controllers to.
        controllers: The controllers to run (names of :data:`~.selection.CONTROLLERS`; default: all).
        workers: Concurrent reconciles per controller.
        autoscaler_sync_period: Seconds between autoscaling passes (None: the autoscaler's default, 15).
        modelbooster_settings: Images and config namespace of the ModelBooster controller (None: defaults).
        eviction_budget: Also run the eviction budget reconciler (``--enable-eviction-webhook``; it needs the
            ConfigMap permissions of ``manifests/eviction``). It belongs to the ModelServing controller and
            runs only with it.
        modelcache_settings: Downloader image, scheduler and cleanup bound of the ModelCache controller
            (None: defaults).
        adapter_load_timeout: Seconds one LoRA adapter load may take (None: the adapter reconciler's default, 300).
        adapter_max_loads: LoRA adapter loads in flight per ModelServing (None: the default, 4).

    Raises:
        ValueError: ``controllers`` names an unknown controller.
    """
    unknown = sorted(set(controllers) - set(CONTROLLERS))
    if unknown:
        raise ValueError(f"unknown controllers: {', '.join(unknown)} (known: {', '.join(CONTROLLERS)})")
    if MODELSERVING in controllers:
        from . import modelserving

        modelserving.register(manager, workers=workers, eviction_budget=eviction_budget)
        from . import adapters  # LoRA adapters on the ModelServings' pods (ours)

        bounds: dict[str, Any] = {}
        if adapter_load_timeout is not None:
            bounds["load_timeout"] = adapter_load_timeout
        if adapter_max_loads is not None:
            bounds["max_loads"] = adapter_max_loads
        adapters.register(manager, workers=workers, **bounds)
    if AUTOSCALER in controllers:
        from . import autoscaling

        autoscaling.register(manager, workers=workers, sync_period=autoscaler_sync_period)
    if MODELBOOSTER in controllers:
        from . import modelbooster

        modelbooster.register(manager, workers=workers, settings=modelbooster_settings)
    if MODELCACHE in controllers:
        from . import modelcache

        modelcache.register(manager, workers=workers, settings=modelcache_settings)
    if MODELPOOL in controllers:
        from . import modelpool

        modelpool.register(manager, workers=workers)
    if eviction_budget and MODELSERVING in controllers:
        from . import eviction

        eviction.register(manager, workers=workers)
    return [c.name for c in manager.controllers]
