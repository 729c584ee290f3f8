"""``--controllers``: Kthena's string-list semantics (:func:`parse_controllers`), the CLI's handling of it, and
:func:`register_all` importing only the enabled controller packages."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kthena_py.cli.common import CommandError
from kthena_py.cli.manager import run
from kthena_py.controllers.selection import CONTROLLERS, parse_controllers
from kthena_py.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
ALL = ("modelserving", "modelbooster", "autoscaler", "modelcache", "modelpool")


def test_the_known_names_are_kthenas_and_ours() -> None:
    assert CONTROLLERS == ALL


@pytest.mark.parametrize(
    ("entries", "enabled", "none_enabled"),
    [
        (["*"], ALL, False),  # Kthena's default
        ([], ALL, False),  # an empty list enables all
        ([""], ALL, False),  # `--controllers=`
        (["  "], ALL, False),
        (["modelserving"], ("modelserving",), False),
        (["+modelserving"], ("modelserving",), False),
        ([" modelserving "], ("modelserving",), False),  # entries are trimmed
        (["modelserving", "autoscaler"], ("modelserving", "autoscaler"), False),
        (["autoscaler", "modelserving"], ("modelserving", "autoscaler"), False),  # canonical order
        (["*", "-autoscaler"], ("modelserving", "modelbooster", "modelcache", "modelpool"), False),
        (["-autoscaler", "*"], ("modelserving", "modelbooster", "modelcache", "modelpool"), False),
        (["*", "-autoscaler", "-modelbooster"], ("modelserving", "modelcache", "modelpool"), False),
        (["*", "-modelcache"], ("modelserving", "modelbooster", "autoscaler", "modelpool"), False),
        (["*", "-modelpool"], ("modelserving", "modelbooster", "autoscaler", "modelcache"), False),
        (["*", "+autoscaler"], ALL, False),
        (["modelbooster", "-autoscaler"], ("modelbooster",), False),  # no '*': only what is named
        (["+autoscaler", "-autoscaler"], ("autoscaler",), False),  # both ways: enabled
        (["-autoscaler", "+autoscaler"], ("autoscaler",), False),  # in either order
        (["*", "-modelserving", "modelserving"], ALL, False),
        # A list that enables nothing enables everything, with a warning (Kthena's fallback):
        (["-autoscaler"], ALL, True),
        (["*", "-modelserving", "-modelbooster", "-autoscaler", "-modelcache", "-modelpool"], ALL, True),
        (["", "-modelserving"], ALL, True),
    ],
)
def test_parse_controllers(entries: list[str], enabled: tuple[str, ...], none_enabled: bool) -> None:
    selection = parse_controllers(entries)
    assert selection.enabled == enabled
    assert selection.none_enabled is none_enabled
    assert selection.disabled == tuple(n for n in ALL if n not in enabled)


@pytest.mark.parametrize("entry", ["foo", "+foo", "-foo", "modelservings", "ModelServing", "-*", "+*", "**"])
def test_an_unknown_name_is_an_error_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match="unknown controller") as err:
        parse_controllers(["*", entry])
    assert repr(entry.strip()) in str(err.value)
    assert "\n" not in str(err.value)


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", *args])


@pytest.mark.parametrize(
    ("argv", "entries"),
    [
        ((), None),  # run() reads None as Kthena's default ["*"]
        (("--controllers=modelserving",), ["modelserving"]),
        (("--controllers", "*,-autoscaler"), ["*", "-autoscaler"]),
        (("--controllers=modelserving", "--controllers=+autoscaler"), ["modelserving", "+autoscaler"]),
        (("--controllers=",), [""]),
    ],
)
def test_the_flag_is_a_comma_separated_repeatable_list(argv: tuple[str, ...], entries: list[str] | None) -> None:
    assert parse(*argv).controllers == entries


def test_the_manager_rejects_an_unknown_controller_before_starting() -> None:
    with pytest.raises(CommandError, match=r"unknown controller 'modelservin'.*known: modelserving"):
        run(parse("--controllers=modelservin", "--kubeconfig", "/nonexistent"))


def test_a_list_enabling_nothing_warns_and_runs_everything(tmp_path: Path) -> None:
    argv = ["manager", "--controllers=-autoscaler", "--log-format=json", "--kubeconfig", str(tmp_path / "missing")]
    result = subprocess.run(
        [sys.executable, "-m", "kthena_py", *argv, "--metrics-bind-address=0", "--health-probe-bind-address=0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0  # the kubeconfig is missing: stops there, after reading the flag
    (warning,) = [
        json.loads(line) for line in result.stdout.splitlines() + result.stderr.splitlines() if "No controllers" in line
    ]
    assert warning["event"] == "No controllers are enabled"
    assert warning["level"] == "warning"
    assert warning["enabling"] == list(ALL)


_REGISTER = """
import asyncio, json, sys
from kthena_py.controllers import register_all
from kthena_py.runtime.manager import Manager
from kthena_py.testing.fake import FakeKube

async def main():
    manager = Manager(FakeKube())
    names = register_all(manager, controllers=json.loads(sys.argv[1]), eviction_budget=sys.argv[2] == "1")
    loaded = sorted(m for m in sys.modules if m.startswith("kthena_py.controllers.") or m in ("numpy", "scipy"))
    print(json.dumps({"names": names, "loaded": loaded}))

asyncio.run(main())
"""


def register(controllers: list[str], *, eviction_budget: bool = False) -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", _REGISTER, json.dumps(controllers), "1" if eviction_budget else "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def _packages(loaded: list[str]) -> set[str]:
    return {m.split(".")[2] for m in loaded if m.count(".") >= 2}


def test_modelserving_alone_never_imports_the_other_controllers() -> None:
    got = register(["modelserving"], eviction_budget=True)
    assert got["names"] == [
        "modelserving",
        "modelserving-rollout",
        "modelserving-gang",
        "modelserving-scheduling",
        "modelserving-modelcache",
        "modelserving-adapters",
        "eviction-budget",
    ]
    shared = {"servingview", "components", "resources", "selection"}
    assert _packages(got["loaded"]) == {"modelserving", "adapters", "eviction"} | shared
    assert "numpy" not in got["loaded"]


def test_each_controller_registers_only_its_own_reconcilers() -> None:
    autoscaler = register(["autoscaler"], eviction_budget=True)  # the eviction budget belongs to modelserving
    assert autoscaler["names"] == ["autoscaling", "autoscaling-heterogeneous"]
    assert not _packages(autoscaler["loaded"]) & {"modelserving", "modelbooster", "eviction", "servingview"}
    booster = register(["modelbooster"])
    assert booster["names"] == ["modelbooster"]
    assert not _packages(booster["loaded"]) & {"modelserving", "autoscaling", "eviction", "servingview"}


def test_all_controllers_by_default() -> None:
    got = register(list(ALL))
    assert got["names"] == [
        "modelserving",
        "modelserving-rollout",
        "modelserving-gang",
        "modelserving-scheduling",
        "modelserving-modelcache",
        "modelserving-adapters",
        "autoscaling",
        "autoscaling-heterogeneous",
        "modelbooster",
        "modelcache",
        "modelpool",
    ]


async def test_register_all_rejects_an_unknown_name() -> None:
    from kthena_py.controllers import register_all
    from kthena_py.runtime.manager import Manager
    from kthena_py.testing.fake import FakeKube

    with pytest.raises(ValueError, match="unknown controllers: foo"):
        register_all(Manager(FakeKube()), controllers=["modelserving", "foo"])
