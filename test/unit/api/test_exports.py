"""The public surface: ``__all__`` lists exactly the public names, and the package stays pure."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import kthena_py.api
import kthena_py.api.validation
from kthena_py.api import DIFFERENCES


def _public_names(module: types.ModuleType) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    )


@pytest.mark.parametrize("module", [kthena_py.api, kthena_py.api.validation], ids=lambda module: module.__name__)
def test_all_lists_the_public_names(module: types.ModuleType) -> None:
    assert sorted(module.__all__) == _public_names(module)


def test_api_imports_no_io_or_other_layers() -> None:
    code = (
        "import sys, kthena_py.api, kthena_py.api.validation, kthena_py.api.podspec\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes_asyncio', 'aiohttp')"
        " or (m.startswith('kthena_py.') and not m.startswith(('kthena_py.api', 'kthena_py.vocab'))))\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_differences_are_documented() -> None:
    keys = [difference.key for difference in DIFFERENCES]
    assert len(keys) == len(set(keys))
    assert all(difference.kthena and difference.kthena_py and difference.reason for difference in DIFFERENCES)
