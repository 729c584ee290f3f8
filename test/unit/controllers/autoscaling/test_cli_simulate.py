"""``kthena-py autoscaler simulate``: trace parsing, the timeline, the plot."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kthena_py.cli.common import CommandError
from kthena_py.cli.simulate import read_trace
from kthena_py.main import main

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "autoscaling"


def test_read_trace() -> None:
    points = read_trace("# comment\ntime,a,b\n0,1,\n10,2,3\n", ["a", "b"])
    assert [(p.time, dict(p.values)) for p in points] == [(0.0, {"a": 1.0}), (10.0, {"a": 2.0, "b": 3.0})]
    for text, message in (
        ("", "empty"),
        ("when,a\n0,1\n", "first column"),
        ("time,c\n0,1\n", "not metrics of the policy"),
        ("time,a\n0,x\n", "line 2"),
        ("time,a\n5,1\n0,1\n", "before"),
        ("time,a\n", "no rows"),
    ):
        with pytest.raises(CommandError, match=message):
            read_trace(text, ["a", "b"])


def test_homogeneous_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "autoscaler",
            "simulate",
            "-f",
            str(EXAMPLES / "homogeneous.yaml"),
            "--trace",
            str(EXAMPLES / "load.csv"),
            "--end",
            "1200",
            "--format",
            "json",
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["time"] == 0 and rows[-1]["time"] == 1200
    peak = max(r["desired"] for r in rows)
    assert peak >= 9
    assert any(r["mode"] == "Panic" for r in rows)
    assert rows[-1]["desired"] < peak  # scaled back down after the load dropped


def test_heterogeneous_prints_the_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("time,num_requests_waiting\n0,10\n30,80\n")
    code = main(
        ["autoscaler", "simulate", "-f", str(EXAMPLES / "heterogeneous.yaml"), "--trace", str(trace), "--end", "300"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "default/llama-h100" in out.splitlines()[1] and "default/llama-a100" in out.splitlines()[1]


def test_disaggregated_needs_a_role(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("time,kv_cache_usage\n0,0.5\n60,3\n")
    policy = str(EXAMPLES / "disaggregated.yaml")
    assert main(["autoscaler", "simulate", "-f", policy, "--trace", str(trace)]) == 1
    assert "needs --role" in capsys.readouterr().err
    assert main(["autoscaler", "simulate", "-f", policy, "--trace", str(trace), "--role", "decode", "-v"]) == 0
    assert "desired" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the plot extra) not installed")
def test_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.png"
    args = ["autoscaler", "simulate", "-f", str(EXAMPLES / "homogeneous.yaml"), "--trace", str(EXAMPLES / "load.csv")]
    assert main([*args, "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    captured = capsys.readouterr()
    assert f"plot written to {out.resolve()}" in captured.err  # the table on stdout stays clean
    assert "plot written" not in captured.out
