"""The demand annotation format shared by activators and the pool controller."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.modelpool.demand import (
    DEMAND_LIVE_SECONDS,
    DEMAND_REFRESH_SECONDS,
    demand_annotation,
    demand_of,
    format_demand_time,
    is_live,
    parse_demand_time,
)
from kthena_py.vocab.labels import MODELPOOL_DEMAND_PREFIX


def test_format_is_rfc3339_utc_with_milliseconds() -> None:
    # 2026-12-03T11:00:00Z is 1796295600 seconds after the epoch.
    assert format_demand_time(1796295600.1234) == "2026-12-03T11:00:00.123Z"
    assert format_demand_time(1796295600.0) == "2026-12-03T11:00:00.000Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-03T11:00:00.123Z", 1796295600.123),
        ("2026-12-03T11:00:00Z", 1796295600.0),
        ("2026-12-03T12:00:00+01:00", 1796295600.0),
        ("2026-12-03T11:00:00", 1796295600.0),
        (" 2026-12-03T11:00:00.5z ", 1796295600.5),
        ("", None),
        ("   ", None),
        ("yesterday", None),
        ("2026-13-03T11:00:00Z", None),
        (None, None),
        (1796295600, None),
    ],
)
def test_parse(text: object, expected: float | None) -> None:
    got = parse_demand_time(text)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-6)


@given(st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False))
def test_round_trip_within_a_millisecond(epoch: float) -> None:
    parsed = parse_demand_time(format_demand_time(epoch))
    assert parsed is not None
    assert 0 <= epoch - parsed < 0.001 + 1e-6


def _pool(annotations: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "annotations": annotations}}


def test_demand_of_reads_members_and_skips_junk() -> None:
    pool = _pool(
        {
            demand_annotation("a"): "2026-12-03T11:00:00.000Z",
            demand_annotation("b"): "not a time",
            MODELPOOL_DEMAND_PREFIX: "2026-12-03T11:00:00.000Z",
            "other.io/a": "2026-12-03T11:00:00.000Z",
            demand_annotation("c"): "2026-12-03T11:00:01.500Z",
        }
    )
    assert demand_of(pool) == {"a": 1796295600.0, "c": 1796295601.5}


@pytest.mark.parametrize("pool", [{}, {"metadata": None}, _pool(None), _pool([]), {"metadata": {}}])
def test_demand_of_without_annotations(pool: dict[str, Any]) -> None:
    assert demand_of(pool) == {}


def test_demand_key_uses_the_vocabulary_prefix() -> None:
    assert demand_annotation("llama") == MODELPOOL_DEMAND_PREFIX + "llama"


def test_liveness_boundary() -> None:
    assert is_live(100.0, 100.0 + DEMAND_LIVE_SECONDS)
    assert not is_live(100.0, 100.0 + DEMAND_LIVE_SECONDS + 0.001)
    assert not is_live(None, 100.0)
    # a held request refreshed every DEMAND_REFRESH_SECONDS never lets its demand expire
    assert DEMAND_REFRESH_SECONDS * 2 < DEMAND_LIVE_SECONDS
