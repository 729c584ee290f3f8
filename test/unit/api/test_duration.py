from __future__ import annotations

import pytest

from kthena_py.api import Duration, DurationError, parse_duration

SECOND = 10**9


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("0", 0),
        ("-0", 0),
        ("15s", 15 * SECOND),
        ("1m30s", 90 * SECOND),
        ("1.5h", 5400 * SECOND),
        ("-2ms", -2_000_000),
        ("+1us", 1_000),
        ("1µs", 1_000),
        ("1μs", 1_000),
        ("1ns", 1),
        (".5s", SECOND // 2),
        ("1.s", SECOND),
        ("1.5ns1.5ns", 2),
        ("0s", 0),
        ("2562047h47m16.854775807s", 2**63 - 1),
    ],
)
def test_parse_duration(text: str, nanos: int) -> None:
    assert parse_duration(text) == nanos


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("15", 'time: missing unit in duration "15"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        (".s", 'time: invalid duration ".s"'),
        ("s", 'time: invalid duration "s"'),
        ("1 s", 'time: unknown unit " s" in duration "1 s"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
    ],
)
def test_parse_duration_rejects(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == message


def test_duration_value_semantics() -> None:
    assert Duration("60s") == Duration("1m")
    assert Duration("90s").minutes == 1.5
    assert Duration("1500ms").seconds == 1.5
    assert str(Duration("1m30s")) == "1m30s"
