"""Replay the manifest corpus: every base is valid, every invalid entry fails with the expected error."""

from __future__ import annotations

import pytest

from kthena_py.api.validation import FieldError, validate_document

from .corpus import Case, base_names, load_base, load_invalid_cases

CASES = load_invalid_cases()


def _render(errors: list[FieldError]) -> str:
    return "\n".join(f"  - {error}" for error in errors) or "  (no errors)"


@pytest.mark.parametrize("name", base_names())
def test_base_manifests_are_valid(name: str) -> None:
    errors = validate_document(load_base(name))
    assert errors == [], _render(errors)


@pytest.mark.parametrize("name", base_names())
def test_base_manifests_are_valid_updates_of_themselves(name: str) -> None:
    document = load_base(name)
    errors = validate_document(document, old=document)
    assert errors == [], _render(errors)


def test_corpus_is_large_and_names_are_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) >= 60
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_invalid_manifest_is_rejected(case: Case) -> None:
    new, old = case.documents()
    errors = validate_document(new, old=old)
    matching = [error for error in errors if error.path == case.expect_path]
    assert matching, f"no error at {case.expect_path}; got:\n{_render(errors)}"
    assert any(case.expect_message in str(error) for error in matching), _render(errors)
