"""The processes' event loop: ``auto`` is uvloop when importable and asyncio's otherwise, an explicit choice is
honoured or refused, and the loop that runs is logged and exported."""

from __future__ import annotations

import asyncio
import sys

import pytest
import structlog
import uvloop

from kthena_py.main import build_parser
from kthena_py.runtime import eventloop
from kthena_py.runtime.metrics import REGISTRY


async def loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_auto_runs_uvloop_when_importable() -> None:
    with structlog.testing.capture_logs() as logs:
        ran_on = eventloop.run(loop_type())
    assert issubclass(ran_on, uvloop.Loop)
    assert [e["loop"] for e in logs if e["event"] == "event loop"] == ["uvloop"]
    assert REGISTRY.get_sample_value("kthena_event_loop_info", {"loop": "uvloop"}) == 1


def test_asyncio_when_asked_for() -> None:
    with structlog.testing.capture_logs() as logs:
        ran_on = eventloop.run(loop_type(), "asyncio")
    assert not issubclass(ran_on, uvloop.Loop)
    assert issubclass(ran_on, asyncio.BaseEventLoop)
    assert [e["loop"] for e in logs if e["event"] == "event loop"] == ["asyncio"]
    assert REGISTRY.get_sample_value("kthena_event_loop_info", {"loop": "asyncio"}) == 1


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert eventloop.loop_factory()[0] == "asyncio"
    with structlog.testing.capture_logs() as logs:
        ran_on = eventloop.run(loop_type())
    assert not issubclass(ran_on, uvloop.Loop)
    assert [e["loop"] for e in logs if e["event"] == "event loop"] == ["asyncio"]


def test_uvloop_asked_for_but_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)
    main = loop_type()
    with pytest.raises(eventloop.LoopUnavailable, match="--event-loop=uvloop"):
        eventloop.run(main, "uvloop")
    assert main.cr_frame is None  # closed, not left un-awaited


@pytest.mark.parametrize("command", ["manager", "activator"])
def test_both_processes_take_the_flag(command: str) -> None:
    parser = build_parser()
    assert parser.parse_args([command]).event_loop == "auto"
    assert parser.parse_args([command, "--event-loop", "asyncio"]).event_loop == "asyncio"
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--event-loop", "trio"])


async def loop_name() -> str:
    return eventloop.running_loop_name()


@pytest.mark.parametrize(("choice", "name"), [("auto", "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_running_loop_name_names_the_loop_that_runs(choice: eventloop.LoopChoice, name: str) -> None:
    assert eventloop.run(loop_name(), choice) == name


def test_the_choice_left_to_the_process_is_not_logged_but_exported() -> None:
    with structlog.testing.capture_logs() as logs:
        assert eventloop.run(loop_name(), "asyncio", log_choice=False) == "asyncio"
    assert [e for e in logs if e["event"] == "event loop"] == []
    assert REGISTRY.get_sample_value("kthena_event_loop_info", {"loop": "asyncio"}) == 1
