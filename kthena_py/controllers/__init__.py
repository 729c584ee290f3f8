"""Kthena's controllers, one package per concern; :func:`register_all` wires them into a manager."""

from __future__ import annotations

from kthena_py.runtime.manager import Manager

from . import autoscaling, modelbooster, modelserving


def register_all(
    manager: Manager,
    *,
    workers: int = 4,
    autoscaler_sync_period: float | None = None,
    modelbooster_settings: modelbooster.Settings | None = None,
) -> list[str]:
    """Register every controller with ``manager``; return their names.

    Args:
        manager: The manager to add the controllers to.
        workers: Concurrent reconciles per controller.
        autoscaler_sync_period: Seconds between autoscaling passes (None: the autoscaler's default, 15).
        modelbooster_settings: Images and config namespace of the ModelBooster controller (None: defaults).
    """
    modelserving.register(manager, workers=workers)
    autoscaling.register(manager, workers=workers, sync_period=autoscaler_sync_period)
    modelbooster.register(manager, workers=workers, settings=modelbooster_settings)
    return [c.name for c in manager.controllers]
