"""The event loop a kthena-py process (``manager``, ``activator``) runs on: ``--event-loop auto|uvloop|asyncio``.

Guarantees:

* ``auto`` (every process's default) is uvloop when it is importable, else asyncio's own loop: a missing or
  unbuildable uvloop never stops a process, it only makes it slower. :func:`loop_factory` never raises for
  ``auto`` or ``asyncio``.
* ``uvloop`` asked for explicitly and not importable raises :class:`LoopUnavailable` (the CLI turns it into a
  clear error), so a benchmark or an operator pinning a loop never silently gets the other one.
* :func:`run` sets ``kthena_event_loop_info{loop}`` to 1 for the loop that runs and logs it (``event loop`` with
  ``loop=uvloop`` or ``loop=asyncio``) once, at start, unless told the process names it in a line of its own
  (the manager's ``starting manager`` carries ``event_loop``, read with :func:`running_loop_name`).
* Behaviour does not depend on the loop: every test tier runs the processes on the default one, and the
  activator's and the manager's code use only what asyncio's loop API promises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal, TypeVar

import structlog
from prometheus_client import Gauge

from .metrics import REGISTRY

__all__ = ["LOOP_CHOICES", "LoopChoice", "LoopUnavailable", "loop_factory", "run", "running_loop_name"]

LoopChoice = Literal["auto", "uvloop", "asyncio"]
LOOP_CHOICES: Final = ("auto", "uvloop", "asyncio")

T = TypeVar("T")
log = structlog.get_logger("kthena_py.eventloop")

EVENT_LOOP: Final = Gauge(
    "kthena_event_loop_info",
    "1 for the event loop this process runs on (uvloop or asyncio).",
    ("loop",),
    registry=REGISTRY,
)


class LoopUnavailable(RuntimeError):
    """``--event-loop=uvloop`` was asked for and uvloop cannot be imported."""


def loop_factory(choice: LoopChoice = "auto") -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """``(name, factory)`` of the loop ``choice`` names (``auto``: uvloop if importable, else asyncio's)."""
    if choice == "asyncio":
        return "asyncio", asyncio.new_event_loop
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise LoopUnavailable("--event-loop=uvloop: uvloop cannot be imported on this interpreter") from exc
        return "asyncio", asyncio.new_event_loop
    return "uvloop", uvloop.new_event_loop


def running_loop_name() -> str:
    """``uvloop`` or ``asyncio``: the loop the caller runs on (called from a coroutine)."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, T], choice: LoopChoice = "auto", *, log_choice: bool = True) -> T:
    """Run ``main`` to completion on the loop ``choice`` names (see :func:`loop_factory`).

    ``log_choice=False`` leaves naming the loop in the log to ``main``.
    """
    try:
        name, factory = loop_factory(choice)
    except LoopUnavailable:
        main.close()  # never awaited: no "coroutine was never awaited" warning
        raise
    if log_choice:
        log.info("event loop", loop=name)
    EVENT_LOOP.labels(name).set(1)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
