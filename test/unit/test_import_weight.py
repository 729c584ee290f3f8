"""The manager's code imports scipy, numpy and matplotlib only where they are used, never at module level.

scipy (the MILP cross-check of the heterogeneous optimizer), numpy (ratio repair and that cross-check) and
matplotlib (``--plot``) cost ~15-30 MiB of resident memory each once imported; a manager that never needs them
must not carry them. Each case imports every module of a package in a fresh interpreter and lists what got
loaded, so a new top-level ``import scipy`` (or numpy) anywhere in it fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAZY = ("scipy", "numpy", "matplotlib")

_PROBE = """
import importlib, json, pkgutil, sys
import kthena_py

for package in sys.argv[1:]:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def top_level_imports(*packages: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *packages], cwd=ROOT, capture_output=True, text=True, check=True, timeout=180
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "packages",
    [
        ("kthena_py.controllers", "kthena_py.runtime", "kthena_py.kube"),
        ("kthena_py.plan",),
        ("kthena_py.api", "kthena_py.cli"),
    ],
)
def test_no_module_imports_scipy_numpy_or_matplotlib_at_load(packages: tuple[str, ...]) -> None:
    loaded = top_level_imports(*packages)
    assert "kthena_py" in loaded and "pydantic" in loaded  # the probe did import the packages
    assert not loaded & set(LAZY), f"imported when loading {packages}: {sorted(loaded & set(LAZY))}"


def test_the_probe_sees_a_top_level_import() -> None:
    # The probe itself: a package whose modules import numpy at load is reported.
    assert "numpy" in top_level_imports("numpy.linalg")
