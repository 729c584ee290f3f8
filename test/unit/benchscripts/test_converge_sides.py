"""bench/converge.py: how a side run by another interpreter is made (the benchmark itself is never asserted)."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from . import load

converge = load("converge")


def test_a_side_on_another_interpreter_changes_the_interpreter_and_nothing_else() -> None:
    tree = Path("/nonexistent/tree")
    own = converge.kthena_py_side_from("kthena-py[x]", tree, 8)
    other = converge.kthena_py_side_from("kthena-py[y]", tree, 8, python="/opt/other/python")
    assert own.command[0] == sys.executable
    assert other.command[0] == "/opt/other/python"
    # the same manager arguments but for the metrics port each side is given
    strip = [a for a in own.command[1:] if not a.startswith("127.0.0.1:")]
    assert strip == [a for a in other.command[1:] if not a.startswith("127.0.0.1:")]
    assert other.cwd == tree and other.name == "kthena-py[y]" and other.metrics_port is not None


def test_an_interpreter_is_named_by_its_version_and_build_date() -> None:
    label = converge.python_label(sys.executable)
    assert label.startswith(f"{platform.python_version()} of ")
    assert label.split(" of ")[1].split()[0] == platform.python_build()[1].split()[0]
