"""The package's build: pure Python, or with the manager's hot paths compiled by mypyc (docs/compiled.md).

Everything about the package is in pyproject.toml; this file only adds the compiled modules, and only when
``KTHENA_PY_COMPILE=1`` (the build backend, ``hack/buildsys/kthena_build.py``, then installs mypy into the build
environment). A compiled module is a C extension built from the same source, beside which the ``.py`` file stays
in the wheel; mypyc checks the annotations at run time where Python would not, so a compiled build runs the same
code with stricter types.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent / "hack" / "buildsys"))
from kthena_build import clear_stale_extensions, compiled_sources, compiling


def extensions() -> list[object]:
    """The extension modules mypyc builds when compiling, else none."""
    if not compiling():
        return []
    from mypyc.build import mypycify

    root = Path(__file__).resolve().parent
    clear_stale_extensions(root)
    sources = compiled_sources(root)
    return list(mypycify(sources, opt_level="3", debug_level="0", group_name="kthena_py"))


setup(ext_modules=extensions())
