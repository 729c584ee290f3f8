"""Kthena's controllers, one package per concern; :func:`register_all` wires them into a manager."""

from __future__ import annotations

from kthena_py.runtime.manager import Manager

from . import autoscaling, modelserving


def register_all(manager: Manager, *, workers: int = 4) -> list[str]:
    """Register every controller with ``manager``; return their names."""
    modelserving.register(manager, workers=workers)
    autoscaling.register(manager, workers=workers)
    return [c.name for c in manager.controllers]
