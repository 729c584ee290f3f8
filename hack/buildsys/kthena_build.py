"""The package's PEP 517 build backend: setuptools', plus what compiling needs when it is asked for.

``KTHENA_PY_COMPILE=1`` makes ``setup.py`` compile the manager's hot paths with mypyc (docs/compiled.md). Compiling
type-checks the compiled modules and everything they import (package ``__init__`` modules included, which reach
the client and its libraries), so the build environment then needs mypy, PyYAML's stubs and the package's own
runtime dependencies. Without the variable this backend is setuptools' own: a plain build installs nothing more.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (every hook not redefined below is setuptools' own)

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def compile_requires() -> list[str]:
    """Build requirements of a compiled build, beyond setuptools' own: mypy, stubs and the runtime dependencies."""
    with PYPROJECT.open("rb") as f:
        runtime = list(tomllib.load(f)["project"]["dependencies"])
    return ["mypy>=1.10", "types-PyYAML", *runtime]


COMPILED = (
    "kthena_py/plan/modelserving",
    "kthena_py/vocab",
    "kthena_py/kube/objects.py",
    "kthena_py/runtime/slim.py",
    "kthena_py/runtime/store.py",
    "kthena_py/controllers/servingview.py",
    "kthena_py/controllers/modelserving/observe.py",
    "kthena_py/controllers/modelserving/predicates.py",
)
"""What a compiled build compiles: the ModelServing planners (pure functions over plain dicts and dataclasses, where a
reconcile spends most of the CPU that is kthena_py's own code); the readers every watch handler and reconcile calls
(labels, owners, conditions, times, pod states, the slim cached form, the store's indexes); and the ModelServing
reconcilers' synchronous halves (the parsed-spec view, what a reconcile observes, the watch predicates). Package
``__init__`` modules stay Python, and so does the asynchronous runtime (informers, cache, work queues, the controller
engine; docs/compiled.md says why).
"""

_discovering = False
"""True while setuptools runs ``setup.py`` only to learn its requirements (mypy is not installed yet then)."""


def _asked() -> bool:
    return os.environ.get("KTHENA_PY_COMPILE", "").strip().lower() in ("1", "true", "yes")


def compiling() -> bool:
    """Whether this build compiles: ``KTHENA_PY_COMPILE`` is ``1``, ``true`` or ``yes``, and requirements are known."""
    return _asked() and not _discovering


def compiled_sources(root: Path) -> list[str]:
    """The ``.py`` files :data:`COMPILED` names under ``root`` (the source tree), relative to it, sorted."""
    found: list[str] = []
    for entry in COMPILED:
        path = root / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        found += [f.relative_to(root).as_posix() for f in files if f.name != "__init__.py"]
    return sorted(found)


def clear_stale_extensions(root: Path) -> list[Path]:
    """Remove the extension build directories (``build/lib.*``) under ``root``, and return those it removed.

    Setuptools copies everything in its platform build directory into the wheel, so an extension built for an
    earlier, longer :data:`COMPILED` would ship (and load) in place of the module's source. A compiled build
    starts from none; pure builds never write there.
    """
    removed = sorted(p for p in (root / "build").glob("lib.*") if p.is_dir())
    for path in removed:
        shutil.rmtree(path)
    return removed


def _requires(discover: Callable[[dict[str, str] | None], list[str]], settings: dict[str, str] | None) -> list[str]:
    """``discover``'s requirements (run with compiling off), and :func:`compile_requires` when compiling is asked."""
    global _discovering
    _discovering = True
    try:
        base = discover(settings)
    finally:
        _discovering = False
    return [*base, *(compile_requires() if _asked() else [])]


def get_requires_for_build_wheel(config_settings: dict[str, str] | None = None) -> list[str]:
    """Setuptools' requirements, and :func:`compile_requires` when compiling."""
    return _requires(_setuptools.get_requires_for_build_wheel, config_settings)


def get_requires_for_build_editable(config_settings: dict[str, str] | None = None) -> list[str]:
    """Setuptools' requirements, and :func:`compile_requires` when compiling."""
    return _requires(_setuptools.get_requires_for_build_editable, config_settings)
