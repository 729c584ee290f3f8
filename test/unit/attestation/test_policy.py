"""The effective mode: a cache can only tighten the manager's mode; a reference asks for at least warn."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.attestation import MODES, Mode, effective_mode, parse_mode


@pytest.mark.parametrize(
    ("manager", "policy", "referenced", "expected"),
    [
        ("off", None, False, "off"),
        ("off", None, True, "warn"),
        ("off", "Warn", True, "warn"),
        ("off", "Enforce", True, "enforce"),
        ("warn", None, False, "warn"),
        ("warn", "Warn", True, "warn"),
        ("warn", "Enforce", True, "enforce"),
        ("enforce", None, False, "enforce"),
        ("enforce", "Warn", True, "enforce"),
        ("enforce", None, True, "enforce"),
    ],
)
def test_the_table(manager: Mode, policy: str | None, referenced: bool, expected: Mode) -> None:
    assert effective_mode(manager, policy, referenced) == expected


@given(st.sampled_from(MODES), st.sampled_from([None, "Warn", "Enforce"]), st.booleans())
def test_never_weaker_than_either_input(manager: Mode, policy: str | None, referenced: bool) -> None:
    mode = effective_mode(manager, policy, referenced)
    assert MODES.index(mode) >= MODES.index(manager)
    if policy is not None:
        assert MODES.index(mode) >= MODES.index(parse_mode(policy))
    if referenced:
        assert mode != "off"


def test_parse_mode() -> None:
    assert parse_mode(" Enforce ") == "enforce"
    with pytest.raises(ValueError, match="off, warn, enforce"):
        parse_mode("strict")
