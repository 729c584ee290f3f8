"""Which status changes only report progress (kthena_py.plan.modelserving.groups.status.progress_only)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.modelserving.groups.status import PROGRESS_FIELDS, progress_only


def condition(type_: str, status: str, message: str = "m", **extra: Any) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": extra.pop("reason", "R"),
        "message": message,
        "lastTransitionTime": extra.pop("since", "2026-01-01T00:00:00Z"),
        "observedGeneration": extra.pop("generation", 1),
    }


STATUS: dict[str, Any] = {
    "observedGeneration": 1,
    "replicas": 3,
    "currentReplicas": 0,
    "updatedReplicas": 3,
    "availableReplicas": 1,
    "currentRevision": "r1",
    "updateRevision": "r1",
    "labelSelector": "a=b",
    "conditions": [condition("Available", "False", "1/3"), condition("Progressing", "True", "[1 2]")],
}


def changed(**fields: Any) -> dict[str, Any]:
    share = copy.deepcopy(STATUS)
    share.update(fields)
    return share


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        (changed(), True),
        (changed(availableReplicas=2), True),
        (changed(updatedReplicas=2, currentReplicas=1), True),
        (
            changed(
                availableReplicas=2,
                conditions=[
                    condition("Available", "False", "2/3"),
                    condition("Progressing", "True", "[2]", reason="X"),
                ],
            ),
            True,
        ),
        (changed(replicas=2), False),
        (changed(observedGeneration=2), False),
        (changed(updateRevision="r2"), False),
        (changed(currentRevision="r0"), False),
        (changed(labelSelector="c=d"), False),
        (changed(collisionCount=1), False),
        (changed(conditions=[condition("Available", "True"), condition("Progressing", "True", "[1 2]")]), False),
        (changed(conditions=[condition("Available", "False", "1/3", generation=2), STATUS["conditions"][1]]), False),
        (changed(conditions=[*STATUS["conditions"], condition("Scheduled", "True")]), False),
    ],
    ids=[
        "same",
        "available",
        "updated",
        "messages and reasons",
        "replicas",
        "generation",
        "update revision",
        "current revision",
        "selector",
        "collision",
        "condition status",
        "condition generation",
        "new condition",
    ],
)
def test_progress_only(share: dict[str, Any], expected: bool) -> None:
    assert progress_only(STATUS, share) is expected


def test_a_first_status_is_not_progress() -> None:
    assert not progress_only({}, STATUS)


counters = st.fixed_dictionaries({field: st.integers(0, 5) for field in sorted(PROGRESS_FIELDS)})
moved = st.sampled_from(["replicas", "observedGeneration", "currentRevision", "updateRevision", "labelSelector"])


@given(counters, st.text(max_size=5), st.text(max_size=5))
def test_counters_and_messages_alone_are_progress(counts: dict[str, int], available: str, progressing: str) -> None:
    share = changed(**counts)
    share["conditions"][0]["message"] = available
    share["conditions"][1]["message"] = progressing
    assert progress_only(STATUS, share)


@given(counters, moved, st.booleans())
def test_anything_else_that_moves_is_not_progress(counts: dict[str, int], field: str, flip: bool) -> None:
    share = changed(**counts)
    if flip:
        share["conditions"][1]["status"] = "False"
    else:
        share[field] = f"{share[field]}-moved"
    assert not progress_only(STATUS, share)
