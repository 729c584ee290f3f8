"""The event loop ``kthena-py activator`` runs on: uvloop when it is importable, else asyncio's own.

Guarantees:

* :func:`loop_factory` never raises: without uvloop (not installed, or a platform it does not build on) it
  answers asyncio's default loop, so the activator behaves the same on either loop, only slower on asyncio's.
* :func:`run` logs which loop runs (``event loop`` with ``loop=uvloop`` or ``loop=asyncio``) once, at start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import structlog

__all__ = ["loop_factory", "run"]

T = TypeVar("T")
log = structlog.get_logger("kthena_py.activator")


def loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """``(name, factory)`` of the fastest importable event loop."""
    try:
        import uvloop
    except ImportError:
        return "asyncio", asyncio.new_event_loop
    return "uvloop", uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on the loop :func:`loop_factory` picks."""
    name, factory = loop_factory()
    log.info("event loop", loop=name)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
