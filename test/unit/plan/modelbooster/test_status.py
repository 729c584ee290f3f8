"""The ModelBooster status: Kthena's conditions, no flapping, a Failed that clears."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelbooster import booster_status
from kthena_py.plan.modelbooster.prefetch import OFF, PrefetchDecision

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_first_status_is_initialized_and_not_yet_active() -> None:
    status = booster_status(None, generation=1, observed_generation=1, available=False, failure=None, now=T0)
    assert status["observedGeneration"] == 1
    assert status["conditions"] == [
        {
            "type": "Initialized",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": T0,
            "reason": "ModelCreating",
            "message": "ModelBooster initialized",
        },
        {
            "type": "Active",
            "status": "False",
            "observedGeneration": 1,
            "lastTransitionTime": T0,
            "reason": "ModelProcessing",
            "message": "ModelBooster not ready yet",
        },
    ]


def test_active_once_available_and_transition_times_move_only_on_change() -> None:
    first = booster_status(None, generation=1, observed_generation=1, available=False, failure=None, now=T0)
    active = booster_status(first, generation=1, observed_generation=1, available=True, failure=None, now=T1)
    conds = _conditions(active)
    assert conds["Active"]["status"] == "True" and conds["Active"]["reason"] == "ModelAvailable"
    assert conds["Active"]["message"] == "ModelBooster is ready"
    assert conds["Active"]["lastTransitionTime"] == T1 and conds["Initialized"]["lastTransitionTime"] == T0
    again = booster_status(active, generation=1, observed_generation=1, available=True, failure=None, now=T2)
    assert again == active  # no flap, no write


def test_failed_is_set_and_clears() -> None:
    ok = booster_status(None, generation=1, observed_generation=1, available=True, failure=None, now=T0)
    failed = booster_status(ok, generation=2, observed_generation=None, available=True, failure="boom", now=T1)
    conds = _conditions(failed)
    assert conds["Failed"] == {
        "type": "Failed",
        "status": "True",
        "observedGeneration": 2,
        "lastTransitionTime": T1,
        "reason": "ModelAbnormal",
        "message": "boom",
    }
    assert conds["Active"]["status"] == "False" and failed["observedGeneration"] == 1
    cleared = booster_status(failed, generation=2, observed_generation=2, available=True, failure=None, now=T2)
    conds = _conditions(cleared)
    assert conds["Failed"]["status"] == "False" and conds["Failed"]["reason"] == "ModelReconciled"
    assert conds["Active"]["status"] == "True" and cleared["observedGeneration"] == 2


def test_other_condition_types_are_kept() -> None:
    previous = {
        "conditions": [{"type": "Custom", "status": "True", "lastTransitionTime": T0, "reason": "X", "message": ""}]
    }
    status = booster_status(previous, generation=1, observed_generation=1, available=False, failure=None, now=T1)
    assert [c["type"] for c in status["conditions"]] == ["Custom", "Initialized", "Active"]


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([None, "a", "b"])), min_size=1, max_size=8))
def test_times_move_exactly_when_a_status_changes(steps: list[tuple[bool, str | None]]) -> None:
    status: dict[str, Any] | None = None
    for i, (available, failure) in enumerate(steps):
        now = f"2026-01-01T00:00:{i:02d}Z"
        new = booster_status(status, generation=1, observed_generation=1, available=available, failure=failure, now=now)
        old = _conditions(status) if status else {}
        for type_, cond in _conditions(new).items():
            moved = cond["lastTransitionTime"] == now and i > 0
            changed = type_ not in old or old[type_]["status"] != cond["status"]
            assert moved == (changed and i > 0)
        status = new


@pytest.mark.parametrize(
    ("prefetch", "expected"),
    [
        (
            PrefetchDecision(True, cache={"metadata": {"name": "mb-b"}}),
            ("True", "ModelCacheRendered", "ModelServing mb-b is gated on ModelCache mb-b; no pod runs a downloader"),
        ),
        (
            PrefetchDecision(True, problem="cacheURI is empty"),
            ("False", "PrefetchUnsupported", "cacheURI is empty; the pods keep the per-pod downloader"),
        ),
        (OFF, None),
    ],
)
def test_the_prefetch_condition_follows_the_decision_and_goes_with_the_opt_in(
    prefetch: PrefetchDecision, expected: tuple[str, str, str] | None
) -> None:
    earlier = booster_status(
        None,
        generation=1,
        observed_generation=1,
        available=False,
        failure=None,
        now=T0,
        prefetch=(PrefetchDecision(True, problem="old"), "mb-b"),
    )
    assert _conditions(earlier)["Prefetch"]["status"] == "False"
    status = booster_status(
        earlier, generation=2, observed_generation=2, available=False, failure=None, now=T1, prefetch=(prefetch, "mb-b")
    )
    condition = _conditions(status).get("Prefetch")
    if expected is None:
        assert condition is None
    else:
        assert condition is not None
        assert (condition["status"], condition["reason"], condition["message"]) == expected
        assert condition["lastTransitionTime"] == (T0 if expected[0] == "False" else T1)
    # None keeps whatever was there (a booster that could not be expanded says nothing new about prefetch).
    kept = booster_status(earlier, generation=2, observed_generation=None, available=False, failure="bad", now=T2)
    assert _conditions(kept)["Prefetch"] == _conditions(earlier)["Prefetch"]
