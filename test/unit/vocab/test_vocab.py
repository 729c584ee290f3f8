"""kthena_py.vocab: owners, pod readiness and RFC 3339 times behave as their callers relied on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.vocab import owners, pods, times
from kthena_py.vocab.conditions import CONDITION_TYPES


def _pod(phase: Any = "Running", ready: Any = "True", **metadata: Any) -> dict[str, Any]:
    return {"metadata": metadata, "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}


def test_condition_types_are_distinct() -> None:
    assert len(CONDITION_TYPES) == len(set(CONDITION_TYPES))


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod(), True),
        (_pod(ready="False"), False),
        (_pod(phase="Pending"), False),
        ({"status": {"phase": "Running", "conditions": ["junk", {"type": "Ready", "status": "True"}]}}, True),
        ({"status": {"phase": "Running"}}, False),
        ({}, False),
        ({"status": "junk"}, False),
    ],
)
def test_running_and_ready(pod: dict[str, Any], expected: bool) -> None:
    assert pods.running_and_ready(pod) is expected


def test_terminating_and_ready_condition() -> None:
    assert pods.is_terminating(_pod(deletionTimestamp="2024-01-01T00:00:00Z"))
    assert not pods.is_terminating(_pod())
    assert not pods.is_terminating({"metadata": None})
    assert pods.ready_condition(_pod(ready="False")) == {"type": "Ready", "status": "False"}
    assert pods.ready_condition({}) is None
    assert pods.TERMINAL_PHASES == ("Failed", "Succeeded")


def test_owners() -> None:
    obj = {
        "metadata": {
            "ownerReferences": [
                "junk",
                {"uid": "a"},
                {"uid": "b", "controller": True, "kind": "ModelServing"},
            ]
        }
    }
    assert owners.owner_uids(obj) == ["a", "b"]
    assert owners.controller_ref(obj) == {"uid": "b", "controller": True, "kind": "ModelServing"}
    assert owners.controlled_by(obj, "b")
    assert not owners.controlled_by(obj, "a")
    assert not owners.controlled_by({}, "b")
    assert owners.controller_ref({"metadata": {}}) is None


def test_controller_reference() -> None:
    assert owners.controller_reference("v1", "K", "n", "u") == {
        "apiVersion": "v1",
        "kind": "K",
        "name": "n",
        "uid": "u",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert "blockOwnerDeletion" not in owners.controller_reference("v1", "K", "n", "u", block_owner_deletion=False)


def test_format_time() -> None:
    moment = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC).timestamp()
    assert times.format_time(moment) == "2024-01-02T03:04:05Z"
    assert times.format_time(moment, "milliseconds") == "2024-01-02T03:04:05.678Z"
    assert times.format_time(moment, "microseconds") == "2024-01-02T03:04:05.678901Z"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=4e9, allow_nan=False), min_size=1, max_size=20))
def test_format_time_renders_every_second_as_a_fresh_rendering_would(moments: list[float]) -> None:
    """Second precision keeps the last second rendered: a run of calls, in and across seconds, is never stale."""
    for moment in [*moments, *moments[::-1]]:
        whole = int(moment)
        expected = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert times.format_time(moment) == expected
        assert times.format_time(whole + 0.5) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05Z", 1704164645.0),
        ("2024-01-02T03:04:05.5Z", 1704164645.5),
        ("2024-01-02T03:04:05.123456789Z", 1704164645.123456),
        ("2024-01-02T04:04:05+01:00", 1704164645.0),
        ("2024-01-02T03:04:05z", 1704164645.0),
        ("2024-01-02T03:04:05", None),
        ("not a time", None),
        ("", None),
        (None, None),
        (5, None),
    ],
)
def test_parse_time(text: Any, expected: float | None) -> None:
    parsed = times.parse_time(text)
    assert parsed == (pytest.approx(expected) if expected is not None else None)


def test_label_of_reads_one_label_without_copying_them() -> None:
    from kthena_py.kube.objects import label_of, labels_of

    pod = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    assert label_of(pod, "a") == "1" and label_of(pod, "c") is None
    assert label_of({"metadata": {}}, "a") is None and label_of({}, "a") is None
    assert label_of({"metadata": {"labels": None}}, "a") is None
    assert all(label_of(pod, k) == v for k, v in labels_of(pod).items())
