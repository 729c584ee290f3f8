"""The activator's event loop: uvloop when importable, asyncio's otherwise, and which one is logged."""

from __future__ import annotations

import asyncio
import sys

import pytest
import structlog
import uvloop

from kthena_py.activator import eventloop


async def loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_uvloop_runs_when_importable() -> None:
    with structlog.testing.capture_logs() as logs:
        ran_on = eventloop.run(loop_type())
    assert issubclass(ran_on, uvloop.Loop)
    assert [e["loop"] for e in logs if e["event"] == "event loop"] == ["uvloop"]


def test_asyncio_loop_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert eventloop.loop_factory()[0] == "asyncio"
    with structlog.testing.capture_logs() as logs:
        ran_on = eventloop.run(loop_type())
    assert not issubclass(ran_on, uvloop.Loop)
    assert issubclass(ran_on, asyncio.BaseEventLoop)
    assert [e["loop"] for e in logs if e["event"] == "event loop"] == ["asyncio"]
