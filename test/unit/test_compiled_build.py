"""The compiled build (docs/compiled.md): what it compiles, and that the modules it names are compiled in it.

The same tests run in every unit environment: in a pure-Python install (``tox -e unit``) each compiled module must be
its ``.py`` file; in the compiled one (``tox -e compiled``, which sets ``KTHENA_PY_EXPECT_COMPILED=1``) each must be a
C extension. Either way the assertion is about the install the suite runs against.
"""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
import types
from pathlib import Path

import pytest

from kthena_py.runtime import native

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack" / "buildsys"))
import kthena_build  # noqa: E402

EXPECT_COMPILED = os.environ.get("KTHENA_PY_EXPECT_COMPILED") == "1"


def module_name(source: str) -> str:
    return source.removesuffix(".py").replace("/", ".")


def test_the_compiled_set_names_the_planners_and_readers_and_no_package_init() -> None:
    sources = kthena_build.compiled_sources(REPO)
    assert "kthena_py/plan/modelserving/groups/servinggroups.py" in sources
    assert "kthena_py/plan/modelserving/rollout/rollout.py" in sources
    assert "kthena_py/kube/objects.py" in sources
    assert "kthena_py/vocab/pods.py" in sources
    assert "kthena_py/runtime/store.py" in sources
    assert "kthena_py/controllers/servingview.py" in sources
    # The asynchronous engine stays Python (docs/compiled.md).
    assert not [s for s in sources if s.startswith(("kthena_py/runtime/informer", "kthena_py/runtime/controller"))]
    assert not [s for s in sources if s.endswith("__init__.py")]
    assert sources == sorted(set(sources))
    assert all((REPO / s).is_file() for s in sources)


@pytest.mark.parametrize("source", kthena_build.compiled_sources(REPO))
def test_each_module_of_the_set_is_compiled_exactly_in_the_compiled_build(source: str) -> None:
    module = importlib.import_module(module_name(source))
    loaded = str(module.__file__)
    assert loaded.endswith(".py") != EXPECT_COMPILED, loaded
    assert (module.__name__ in native.compiled_modules()) == EXPECT_COMPILED


def test_a_compiled_build_asks_for_mypy_and_every_runtime_dependency() -> None:
    with (REPO / "pyproject.toml").open("rb") as f:
        runtime = tomllib.load(f)["project"]["dependencies"]
    requires = kthena_build.compile_requires()
    assert requires[0].startswith("mypy") and "types-PyYAML" in requires
    assert set(runtime) <= set(requires)


def test_the_report_counts_loaded_extension_modules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    extension = types.ModuleType("kthena_py._fake_native")
    extension.__file__ = "/x/kthena_py/_fake_native.cpython-311-x86_64-linux-gnu.so"
    interpreted = types.ModuleType("kthena_py._fake_source")
    interpreted.__file__ = "/x/kthena_py/_fake_source.py"
    elsewhere = types.ModuleType("other_native")
    elsewhere.__file__ = "/x/other_native.cpython-311-x86_64-linux-gnu.so"
    for module in (extension, interpreted, elsewhere):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    before = len([m for m in native.compiled_modules() if m != extension.__name__])
    names = native.compiled_modules()
    assert extension.__name__ in names
    assert interpreted.__name__ not in names and elsewhere.__name__ not in names
    assert native.report() == before + 1
    assert native.REGISTRY.get_sample_value("kthena_compiled_modules") == before + 1


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("true", True), ("YES", True), ("0", False), ("", False), ("no", False)]
)
def test_the_build_compiles_when_asked_except_while_requirements_are_discovered(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv("KTHENA_PY_COMPILE", value)
    assert kthena_build.compiling() == expected
    seen: list[bool] = []

    def discover(settings: dict[str, str] | None) -> list[str]:
        seen.append(kthena_build.compiling())
        return ["wheel"]

    requires = kthena_build._requires(discover, None)
    assert seen == [False]
    assert requires == ["wheel", *(kthena_build.compile_requires() if expected else [])]
    assert kthena_build.compiling() == expected


def test_a_compiled_build_starts_without_the_extensions_of_an_earlier_one(tmp_path: Path) -> None:
    stale = tmp_path / "build" / "lib.linux-x86_64-cpython-311" / "kthena_py" / "runtime"
    stale.mkdir(parents=True)
    (stale / "cache.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    generated = tmp_path / "build" / "__native_kthena_py.c"  # mypyc's own sources: regenerated, left alone
    generated.write_text("/* */")
    pure = tmp_path / "build" / "lib" / "kthena_py"
    pure.mkdir(parents=True)

    removed = kthena_build.clear_stale_extensions(tmp_path)

    assert removed == [tmp_path / "build" / "lib.linux-x86_64-cpython-311"]
    assert not removed[0].exists()
    assert generated.is_file() and pure.is_dir()
    assert kthena_build.clear_stale_extensions(tmp_path) == []
    assert kthena_build.clear_stale_extensions(tmp_path / "no-tree") == []
