"""docs/migrating.md holds the field tables exactly as the translators' FIELD_TABLES render them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from kthena_py.importers.kubeai import FIELD_TABLES

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "gen-import-docs.py"
DOCS = ROOT / "docs" / "migrating.md"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_import_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_are_current(generator: ModuleType) -> None:
    assert generator.main(["--check", "--docs", str(DOCS)]) == 0, "run hack/gen-import-docs.py"


def test_every_kubeai_rule_is_a_row_of_the_docs() -> None:
    text = DOCS.read_text()
    for rules in FIELD_TABLES.values():
        for rule in rules:
            assert f"| `{rule.path}` | {rule.outcome} |" in text, rule.path


def test_a_stale_table_is_caught_and_rewritten(generator: ModuleType, tmp_path: Path) -> None:
    stale = tmp_path / "migrating.md"
    stale.write_text(DOCS.read_text().replace("| `spec.owner` | dropped |", "| `spec.owner` | mapped |"))
    assert generator.main(["--check", "--docs", str(stale)]) == 1
    assert generator.main(["--docs", str(stale)]) == 0
    assert stale.read_text() == DOCS.read_text()


def test_missing_markers_are_an_error(generator: ModuleType, tmp_path: Path) -> None:
    broken = tmp_path / "migrating.md"
    broken.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="markers of kubeai are missing"):
        generator.main(["--check", "--docs", str(broken)])
