"""The opt-in timeline: off means nothing is written; on means one JSON line per record, readable after close."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kthena_py.runtime import timeline


@pytest.fixture(autouse=True)
def closed() -> Iterator[None]:
    timeline.close()
    yield
    timeline.close()


def test_off_by_default_records_nothing(tmp_path: Path) -> None:
    assert not timeline.enabled()
    timeline.record("start", controller="c", key="ns/a")  # must not raise or write anywhere
    assert list(tmp_path.iterdir()) == []


def test_records_are_json_lines_with_time_and_stage(tmp_path: Path) -> None:
    path = tmp_path / "timeline.jsonl"
    timeline.open_file(str(path))
    assert timeline.enabled()
    timeline.record("start", controller="modelserving", key="ns/a")
    timeline.record("status", manager="m", key="ns/a", true=["Available"])
    timeline.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["stage"] for r in lines] == ["start", "status"]
    assert lines[1]["true"] == ["Available"] and lines[0]["key"] == "ns/a"
    assert lines[0]["t"] <= lines[1]["t"]
    assert not timeline.enabled()


def test_a_record_that_cannot_be_written_turns_the_timeline_off(tmp_path: Path) -> None:
    timeline.open_file(str(tmp_path / "t.jsonl"))
    timeline.record("start", value=object())  # not JSON-serialisable
    assert not timeline.enabled()
