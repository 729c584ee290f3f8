"""Tests of the benchmark scripts' pure parts (the benchmarks themselves are never asserted).

:func:`load` imports a script of ``bench/`` by its path, under a name of its own, with ``bench/`` on ``sys.path`` only
while it loads (for the scripts' imports of each other): left there, bench's modules (workqueue.py, rollout.py...)
could shadow others.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load(script: str) -> ModuleType:
    """``bench/<script>.py`` as the module ``bench_<script>``."""
    spec = importlib.util.spec_from_file_location(f"bench_{script}", BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while they are made
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module
