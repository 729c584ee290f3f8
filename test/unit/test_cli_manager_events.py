"""``kthena-py manager --event-burst`` and ``--event-combine-after``: the Event correlator's two settings."""

from __future__ import annotations

import argparse

import pytest

from kthena_py.kube.resources import EVENTS
from kthena_py.main import build_parser
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.fake import FakeKube


def parse(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", *args])


def test_the_defaults_are_client_go_s() -> None:
    args = parse()
    assert (args.event_burst, args.event_combine_after) == (25, 10)
    assert (ManagerOptions().event_burst, ManagerOptions().event_combine_after) == (25, 10)


def test_zero_is_taken_and_turns_a_stage_off() -> None:
    args = parse("--event-burst", "0", "--event-combine-after", "0")
    assert (args.event_burst, args.event_combine_after) == (0, 0)


@pytest.mark.parametrize("flag", ["--event-burst", "--event-combine-after"])
@pytest.mark.parametrize("value", ["-1", "many", "2.5"])
def test_bad_values_are_refused_with_the_flag(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(flag, value)
    assert flag in capsys.readouterr().err


def subject() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns", "uid": "u"}}


async def test_the_manager_s_recorders_use_its_settings() -> None:
    kube = FakeKube()
    options = ManagerOptions(
        event_burst=3, event_combine_after=2, metrics_bind_address="0", health_probe_bind_address="0"
    )
    recorder = Manager(kube, options).recorder_for("settings-test")
    for reason in ("A", "B", "C", "D"):
        recorder.event(subject(), "Normal", reason, "m")
    recorder.event(subject(), "Warning", "W", "first", join=False)
    recorder.event(subject(), "Warning", "W", "second", join=False)  # the second distinct message: combined
    await recorder.flush()
    stored = [(e["reason"], e["message"]) for kind, e in kube.changes(EVENTS) if kind == "ADDED"]
    assert stored == [
        ("A", "m"),
        ("B", "m"),
        ("C", "m"),
        ("W", "first"),
        ("W", "(combined from similar events): second"),
    ]
