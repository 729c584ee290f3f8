from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from kthena_py.api import IntOrString, IntOrStringError, is_valid_percent, scaled_value
from kthena_py.api.intstr import go_atoi, resolve_scaled

PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        ("10%", 7, True, 1),
        ("10%", 7, False, 0),
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        ("1%", 10, True, 1),
        ("100%", 5, False, 5),
        ("0%", 5, True, 0),
        ("25%", 0, True, 0),
        ("150%", 4, False, 6),
        ("-10%", 7, False, -1),
        ("-10%", 7, True, 0),
        ("+20%", 10, False, 2),
        (3, 100, False, 3),
        (-1, 100, True, -1),
        # exact arithmetic where float64 would lose precision
        ("33%", 10**17, True, 33 * 10**15),
    ],
)
def test_scaled_value(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert IntOrString(value).scaled_value(total, round_up) == expected
    assert scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10", "invalid value for IntOrString: invalid type: string is not a percentage"),
        ("abc", "invalid value for IntOrString: invalid type: string is not a percentage"),
        ("a%", 'invalid value for IntOrString: invalid value "a%": strconv.Atoi: parsing "a": invalid syntax'),
        ("%", 'invalid value for IntOrString: invalid value "%": strconv.Atoi: parsing "": invalid syntax'),
        ("1.5%", 'invalid value for IntOrString: invalid value "1.5%": strconv.Atoi: parsing "1.5": invalid syntax'),
        (" 5%", 'invalid value for IntOrString: invalid value " 5%": strconv.Atoi: parsing " 5": invalid syntax'),
    ],
)
def test_scaled_value_errors(value: str, message: str) -> None:
    with pytest.raises(IntOrStringError) as info:
        IntOrString(value).scaled_value(10, round_up=True)
    assert str(info.value) == message


def test_scaled_value_none() -> None:
    with pytest.raises(IntOrStringError, match="nil value for IntOrString"):
        scaled_value(None, 10, round_up=True)


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ("0%", []),
        ("100%", []),
        ("250%", []),
        ("5", [PERCENT_MESSAGE]),
        ("-5%", [PERCENT_MESSAGE]),
        ("5 %", [PERCENT_MESSAGE]),
    ],
)
def test_is_valid_percent(value: str, errors: list[str]) -> None:
    assert is_valid_percent(value) == errors


def test_go_atoi() -> None:
    assert go_atoi("-12") == -12
    assert go_atoi("+12") == 12
    with pytest.raises(IntOrStringError, match="value out of range"):
        go_atoi("9223372036854775808")
    with pytest.raises(IntOrStringError, match="invalid syntax"):
        go_atoi("1_000")


def test_int_or_string_semantics() -> None:
    assert IntOrString(1) != IntOrString("1")
    assert IntOrString("10%") == IntOrString("10%")
    assert IntOrString("10%").is_percent and not IntOrString(10).is_percent
    assert IntOrString(10).is_int
    assert IntOrString("7").int_value() == 7
    assert IntOrString("x").int_value() == 0
    assert str(IntOrString(3)) == "3"
    with pytest.raises(TypeError):
        IntOrString(True)


class _Holder(BaseModel):
    v: IntOrString


@pytest.mark.parametrize("raw", [0, 5, "25%", "abc"])
def test_pydantic_roundtrip(raw: int | str) -> None:
    holder = _Holder.model_validate({"v": raw})
    assert holder.model_dump(mode="json") == {"v": raw}
    assert holder.v.value == raw


@pytest.mark.parametrize("raw", [1.0, False, None, {}])
def test_pydantic_rejects(raw: object) -> None:
    with pytest.raises(ValidationError):
        _Holder.model_validate({"v": raw})


def test_resolve_scaled_states_each_callers_fallbacks() -> None:
    assert resolve_scaled(None, 10, round_up=True, if_none=3) == 3
    assert resolve_scaled(IntOrString("25%"), 10, round_up=True, if_none=0) == 3
    assert resolve_scaled(IntOrString("25%"), 10, round_up=False, if_none=0) == 2
    assert resolve_scaled(IntOrString(-2), 10, round_up=True, if_none=0) == -2
    assert resolve_scaled(IntOrString(-2), 10, round_up=True, if_none=0, non_negative=True) == 0
    assert resolve_scaled(IntOrString("x"), 10, round_up=True, if_none=0, if_invalid=7) == 7
    with pytest.raises(IntOrStringError):
        resolve_scaled(IntOrString("x"), 10, round_up=True, if_none=0)
