"""Kthena's controllers, one package per concern; :func:`register_all` wires them into a manager."""

from __future__ import annotations

from kthena_py.runtime.manager import Manager

from . import autoscaling, eviction, modelbooster, modelserving


def register_all(
    manager: Manager,
    *,
    workers: int = 4,
    autoscaler_sync_period: float | None = None,
    modelbooster_settings: modelbooster.Settings | None = None,
    eviction_budget: bool = False,
) -> list[str]:
    """Register every controller with ``manager``; return their names.

    Args:
        manager: The manager to add the controllers to.
        workers: Concurrent reconciles per controller.
        autoscaler_sync_period: Seconds between autoscaling passes (None: the autoscaler's default, 15).
        modelbooster_settings: Images and config namespace of the ModelBooster controller (None: defaults).
        eviction_budget: Also run the eviction budget reconciler (``--enable-eviction-webhook``; it needs the
            ConfigMap permissions of ``manifests/eviction``).
    """
    modelserving.register(manager, workers=workers, eviction_budget=eviction_budget)
    autoscaling.register(manager, workers=workers, sync_period=autoscaler_sync_period)
    modelbooster.register(manager, workers=workers, settings=modelbooster_settings)
    if eviction_budget:
        eviction.register(manager, workers=workers)
    return [c.name for c in manager.controllers]
