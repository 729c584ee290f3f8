"""``kthena-py manager`` LoRA adapter flags: --adapter-load-timeout and --adapter-max-concurrent-loads, parsed and
carried through ``register_all`` to the adapter reconciler and its HTTP engine."""

from __future__ import annotations

import argparse

import pytest

from kthena_py.controllers import register_all
from kthena_py.controllers.adapters import CONTROLLER
from kthena_py.controllers.adapters.engine import HttpAdapterEngine
from kthena_py.controllers.adapters.reconciler import MAX_LOADS_PER_MODELSERVING, AdapterReconciler
from kthena_py.main import build_parser
from kthena_py.plan.adapters.plan import LOAD_TIMEOUT_SECONDS
from kthena_py.runtime.manager import Manager
from kthena_py.testing.fake import FakeKube


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", *args])


def test_defaults_are_the_reconcilers() -> None:
    args = parse()
    assert args.adapter_load_timeout == LOAD_TIMEOUT_SECONDS == 300.0
    assert args.adapter_max_concurrent_loads == MAX_LOADS_PER_MODELSERVING == 4


@pytest.mark.parametrize(("value", "seconds"), [("600", 600.0), ("10m", 600.0), ("90s", 90.0), ("2.5", 2.5)])
def test_the_load_timeout_takes_seconds_or_a_duration(value: str, seconds: float) -> None:
    assert parse("--adapter-load-timeout", value).adapter_load_timeout == seconds


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--adapter-load-timeout", "0"),
        ("--adapter-load-timeout", "-1s"),
        ("--adapter-load-timeout", "soon"),
        ("--adapter-max-concurrent-loads", "0"),
        ("--adapter-max-concurrent-loads", "2.5"),
        ("--adapter-max-concurrent-loads", "many"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(flag, value)
    assert flag in capsys.readouterr().err


def reconciler_of(manager: Manager) -> AdapterReconciler:
    [controller] = [c for c in manager.controllers if c.name == CONTROLLER]
    reconciler = controller.reconciler
    assert isinstance(reconciler, AdapterReconciler)
    return reconciler


async def test_the_values_reach_the_reconciler_and_its_engine() -> None:
    args = parse("--adapter-load-timeout", "10m", "--adapter-max-concurrent-loads", "9")
    manager = Manager(FakeKube())
    register_all(
        manager,
        controllers=["modelserving"],
        adapter_load_timeout=args.adapter_load_timeout,
        adapter_max_loads=args.adapter_max_concurrent_loads,
    )
    reconciler = reconciler_of(manager)
    assert reconciler.load_timeout == 600.0 and reconciler.max_loads == 9
    assert isinstance(reconciler.engine, HttpAdapterEngine)
    assert reconciler.engine.load_timeout == 600.0


async def test_unset_values_leave_the_defaults() -> None:
    manager = Manager(FakeKube())
    register_all(manager, controllers=["modelserving"])
    reconciler = reconciler_of(manager)
    assert reconciler.load_timeout == LOAD_TIMEOUT_SECONDS and reconciler.max_loads == MAX_LOADS_PER_MODELSERVING
