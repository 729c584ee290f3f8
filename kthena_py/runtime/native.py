"""Which of kthena_py's modules run compiled: the mypyc extensions of a compiled build (docs/compiled.md).

Guarantees:

* :func:`compiled_modules` names every loaded ``kthena_py`` module whose code is a C extension, sorted; a
  pure-Python install has none. It only reads ``sys.modules``: it imports nothing and loads nothing.
* :func:`report` sets ``kthena_compiled_modules`` (how many) and returns the count, which the manager also logs at
  start (``compiled_modules``), so an operator can tell which build runs from either.
"""

from __future__ import annotations

import importlib.machinery
import sys
from typing import Final

from prometheus_client import Gauge

from .metrics import REGISTRY

__all__ = ["COMPILED_MODULES", "compiled_modules", "report"]

COMPILED_MODULES: Final = Gauge(
    "kthena_compiled_modules",
    "kthena_py modules this process runs as compiled extensions (0: a pure-Python build).",
    registry=REGISTRY,
)

_EXTENSION_SUFFIXES: Final = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def compiled_modules() -> list[str]:
    """The loaded ``kthena_py`` modules whose code is a C extension, sorted by name."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if (name == "kthena_py" or name.startswith("kthena_py."))
        and str(getattr(module, "__file__", "") or "").endswith(_EXTENSION_SUFFIXES)
    )


def report() -> int:
    """Set ``kthena_compiled_modules`` to the number of compiled modules loaded now, and return it."""
    count = len(compiled_modules())
    COMPILED_MODULES.set(count)
    return count
