"""``kthena-py activator`` flags."""

from __future__ import annotations

import pytest

from kthena_py.main import build_parser, main


def test_flags_and_defaults() -> None:
    args = build_parser().parse_args(["activator", "--namespace", "a", "--namespace", "b"])
    assert (args.listen, args.metrics_bind_address, args.health_probe_bind_address) == (
        "0.0.0.0:8080",
        ":8081",
        ":8082",
    )
    assert args.namespace == ["a", "b"]
    assert (args.hold_budget, args.max_body_bytes, args.max_held) == ("120s", 16 * 1024 * 1024, 1000)


@pytest.mark.parametrize(
    "flags",
    [["--hold-budget", "soon"], ["--hold-budget", "0s"], ["--listen", "nowhere"], ["--max-held", "0"]],
)
def test_bad_values_end_with_one_line(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["activator", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kthena-py: error:") and err.count("\n") == 1
