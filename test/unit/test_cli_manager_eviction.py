"""``kthena-py manager`` eviction flags: --enable-eviction-webhook and --eviction-tracker-ttl."""

from __future__ import annotations

import argparse

import pytest

from kthena_py.cli.common import CommandError
from kthena_py.cli.manager import run
from kthena_py.main import build_parser


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", *args])


def test_defaults_are_kthenas() -> None:
    args = parse()
    assert args.enable_eviction_webhook is False
    assert args.eviction_tracker_ttl == 60.0


@pytest.mark.parametrize(
    ("value", "seconds"), [("60s", 60.0), ("2m", 120.0), ("1m30s", 90.0), ("500ms", 0.5), ("15", 15.0)]
)
def test_ttl_takes_go_durations_or_seconds(value: str, seconds: float) -> None:
    assert parse("--eviction-tracker-ttl", value).eviction_tracker_ttl == seconds


@pytest.mark.parametrize("value", ["0", "0s", "-5s", "soon", "1d"])
def test_ttl_must_be_a_positive_duration(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--eviction-tracker-ttl", value)
    assert "--eviction-tracker-ttl" in capsys.readouterr().err


def test_the_eviction_webhook_needs_the_webhook_server() -> None:
    with pytest.raises(CommandError, match="needs the webhook server"):
        run(parse("--enable-eviction-webhook", "--webhook-port", "0"))
