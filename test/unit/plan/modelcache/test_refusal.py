"""refused_status: only Progressing changes, to False/FailedCreate, and a repeated refusal plans the same status."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.modelcache.refusal import refused_status
from kthena_py.vocab.times import format_time

EARLIER = "2026-12-01T00:00:00Z"
NOW = 1_800_000_000.0
MESSAGE = "cannot create Job llama-abc: exceeded quota: jobs"


def _condition(kind: str, status: str, reason: str, since: str = EARLIER) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "observedGeneration": 3,
        "lastTransitionTime": since,
        "reason": reason,
        "message": f"{kind} says {reason}",
    }


def _planned(progressing: str) -> dict[str, Any]:
    return {
        "phase": "Pending",
        "path": "/models/llama",
        "observedGeneration": 3,
        "conditions": [
            _condition("Ready", "False", "Pending"),
            _condition("Progressing", progressing, "Pending", format_time(NOW)),
            _condition("Degraded", "False", "NoFailure"),
        ],
    }


@pytest.mark.parametrize(
    ("stored", "since"),
    [
        pytest.param({}, format_time(NOW), id="first status: the transition is now"),
        pytest.param(
            {"conditions": [_condition("Progressing", "True", "Pending")]},
            format_time(NOW),
            id="was progressing: the transition is now",
        ),
        pytest.param(
            {"conditions": [_condition("Progressing", "False", "Pending")]},
            EARLIER,
            id="was not progressing (waiting for a ModelServing): the time is kept",
        ),
        pytest.param(
            {"conditions": [_condition("Progressing", "False", "FailedCreate")]},
            EARLIER,
            id="refused before: the time is kept",
        ),
    ],
)
def test_progressing_becomes_false_with_the_refusal(stored: dict[str, Any], since: str) -> None:
    planned = _planned("True")
    status = refused_status(planned, stored, MESSAGE, NOW)
    ready, progressing, degraded = status["conditions"]
    assert progressing == {
        "type": "Progressing",
        "status": "False",
        "observedGeneration": 3,
        "lastTransitionTime": since,
        "reason": "FailedCreate",
        "message": MESSAGE,
    }
    assert (ready, degraded) == (planned["conditions"][0], planned["conditions"][2])
    assert planned == _planned("True")  # the input is not changed


def test_a_planned_status_without_progressing_gains_one() -> None:
    planned = {"phase": "Pending", "observedGeneration": 2, "conditions": [_condition("Ready", "False", "Pending")]}
    status = refused_status(planned, {}, MESSAGE, NOW)
    assert [c["type"] for c in status["conditions"]] == ["Ready", "Progressing"]
    added = status["conditions"][1]
    assert (added["status"], added["reason"], added["observedGeneration"]) == ("False", "FailedCreate", 2)


STATUSES = st.sampled_from(["True", "False"])
REASONS = st.sampled_from(["Pending", "Downloading", "Cached", "FailedCreate", "NoFailure"])


@st.composite
def _statuses(draw: st.DrawFn) -> dict[str, Any]:
    kinds = draw(st.permutations(["Ready", "Progressing", "Degraded"]))
    return {
        "phase": draw(st.sampled_from(["Pending", "Failed", "Ready"])),
        "conditions": [_condition(k, draw(STATUSES), draw(REASONS)) for k in kinds],
    }


@given(planned=_statuses(), stored=_statuses(), message=st.text(max_size=40), later=st.floats(0, 1e6))
def test_only_progressing_changes_and_a_repeat_is_the_same_status(
    planned: dict[str, Any], stored: dict[str, Any], message: str, later: float
) -> None:
    status = refused_status(planned, stored, message, NOW)
    others = [c for c in status["conditions"] if c["type"] != "Progressing"]
    assert others == [c for c in planned["conditions"] if c["type"] != "Progressing"]
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        k: v for k, v in planned.items() if k != "conditions"
    }
    (progressing,) = [c for c in status["conditions"] if c["type"] == "Progressing"]
    assert (progressing["status"], progressing["reason"], progressing["message"]) == ("False", "FailedCreate", message)
    # the engine's retry meets the same refusal: with this status stored, the same status is planned (no write)
    assert refused_status(planned, status, message, NOW + later) == status
