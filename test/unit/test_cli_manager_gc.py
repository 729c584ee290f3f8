"""``kthena-py manager --gc-threshold``: the cyclic collector's thresholds, and what the manager does with them."""

from __future__ import annotations

import argparse
import gc

import pytest

from kthena_py.cli.manager import DEFAULT_GC_THRESHOLDS
from kthena_py.main import build_parser
from kthena_py.runtime import memory


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", *args])


def test_the_default_is_the_documented_one() -> None:
    assert parse().gc_threshold == DEFAULT_GC_THRESHOLDS


def test_three_thresholds_are_taken() -> None:
    assert parse("--gc-threshold", "50000, 20,20").gc_threshold == (50000, 20, 20)


@pytest.mark.parametrize("value", ["700,10", "a,b,c", "0,10,10", "700,0,10", "700,10,-1", "1,2,3,4"])
def test_bad_thresholds_are_refused_with_the_reason(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--gc-threshold", value)
    assert "--gc-threshold" in capsys.readouterr().err


def test_tuning_sets_the_thresholds_and_freezes_what_start_up_left() -> None:
    before = gc.get_threshold()
    try:
        frozen = memory.tune_collector((12345, 11, 12))
        assert gc.get_threshold() == (12345, 11, 12)
        assert frozen == gc.get_freeze_count() > 1000
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
