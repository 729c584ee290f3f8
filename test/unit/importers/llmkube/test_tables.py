"""The field tables cover every field of LLMKube's API exactly once, and say something useful about each.

``seed_fields/*.txt`` list every field path of the three LLMKube kinds as their API references give them
(containers and leaves, ``[]`` for list items; deep Kubernetes types are listed down to the level where the table
copies them whole). A path is covered by the row with that path, or by a whole row above it; a container is
covered through the rows below it (``metadata`` through the ObjectMeta rows every peer shares).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kthena_py.importers.llmkube import FIELD_TABLES
from kthena_py.importers.metadata import METADATA_FIELDS
from kthena_py.importers.report import OUTCOMES, FieldRule

HERE = Path(__file__).parent
SEEDS = {"Model": "model.txt", "InferenceService": "inferenceservice.txt", "ModelPool": "modelpool.txt"}
TABLES = {kind: table for (_, kind), table in FIELD_TABLES.items()}


def seed_paths(kind: str) -> list[str]:
    return (HERE / "seed_fields" / SEEDS[kind]).read_text(encoding="utf-8").split()


SHARED = {rule.path for rule in METADATA_FIELDS}
"""The rows every peer kind shares (``apiVersion``, ``kind``, the ObjectMeta fields ``kubectl get`` prints)."""


def whole_paths(table: tuple[FieldRule, ...]) -> set[str]:
    """Rows no other row lies below: they cover their field's whole value."""
    paths = [rule.path for rule in table]
    return {path for path in paths if not any(_under(other, path) for other in paths)}


def _under(path: str, ancestor: str) -> bool:
    return path.startswith(ancestor + ".") or path.startswith(ancestor + "[]")


def covering_rows(path: str, table: tuple[FieldRule, ...]) -> list[str]:
    whole = whole_paths(table)
    return [rule.path for rule in table if rule.path == path or (rule.path in whole and _under(path, rule.path))]


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_every_seed_field_is_covered_exactly_once(kind: str) -> None:
    table = TABLES[kind]
    for path in seed_paths(kind):
        rows = covering_rows(path, table)
        is_container = any(_under(rule.path, path) for rule in table)
        assert len(rows) == 1 or (not rows and is_container), f"{kind} {path}: covered by {rows}"


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_every_row_is_a_field_of_the_kind(kind: str) -> None:
    known = set(seed_paths(kind)) | SHARED
    paths = [rule.path for rule in TABLES[kind]]
    assert len(paths) == len(set(paths))
    assert [path for path in paths if path not in known] == []


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_rows_say_where_and_why(kind: str) -> None:
    for rule in TABLES[kind]:
        assert rule.outcome in OUTCOMES
        if rule.outcome == "dropped":
            assert rule.target == "" and rule.note, rule.path
        else:
            assert rule.target, rule.path
        if rule.outcome == "approximated":
            assert rule.note, rule.path


def test_the_three_kinds_are_served_by_one_version() -> None:
    assert sorted(FIELD_TABLES) == sorted(
        ("inference.llmkube.dev/v1alpha1", kind) for kind in ("InferenceService", "Model", "ModelPool")
    )
