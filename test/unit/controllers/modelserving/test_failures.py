"""The failure condition's content, what the planner reads back from it, and the per-child backoff."""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.modelserving.failures import (
    MAX_MESSAGE,
    REPLICA_FAILURE,
    ChildFailure,
    FailureCondition,
    FailureTracker,
    Verb,
    refused_pods,
)
from kthena_py.kube import Forbidden, Invalid
from kthena_py.runtime.clock import FakeClock
from kthena_py.testing.fake import FakeKube

MS: dict[str, Any] = {"metadata": {"name": "ms", "namespace": "ns", "uid": "u", "generation": 3}}


def failure(name: str, kind: str = "Pod", verb: Verb = "create") -> ChildFailure:
    err = Invalid(422, "Invalid", f'{kind} "{name}" is invalid: spec.containers[0].image: Required value')
    return ChildFailure.of(verb, kind, name, err)


def test_condition_names_each_child_and_cause_and_reads_back() -> None:
    quota = ChildFailure.of("create", "Pod", "ms-0-a-0-1", Forbidden(403, "Forbidden", "exceeded quota: q"))
    fails = [failure("ms-0-a-0-0", "Service"), quota, failure("ms-0-a-1-0"), failure("ms-0-a-1-0")]
    cond = FailureCondition(FakeKube(), REPLICA_FAILURE, "m").desired(MS, fails, 0.0)
    assert cond is not None
    assert (cond["type"], cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "ReplicaFailure",
        "True",
        "FailedCreate",
        3,
    )
    assert cond["message"].startswith("create Pod ms-0-a-0-1: 403 Forbidden: exceeded quota: q; create Pod ms-0-a-1-0")
    assert "create Service ms-0-a-0-0: 422 Invalid" in cond["message"]
    assert cond["message"].count("ms-0-a-1-0") == 2  # once as the child, once in the server's message
    assert refused_pods({"status": {"conditions": [cond]}}) == {"ms-0-a-0-1", "ms-0-a-1-0"}
    assert refused_pods({"status": {"conditions": [{**cond, "status": "False"}]}}) == frozenset()


def test_long_messages_are_summarised() -> None:
    fails = [failure(f"ms-0-a-{i}-0") for i in range(500)]
    cond = FailureCondition(FakeKube(), REPLICA_FAILURE, "m").desired(MS, fails, 0.0)
    assert cond is not None and len(cond["message"]) <= MAX_MESSAGE + 32
    assert cond["message"].endswith("more")


def test_no_failure_no_condition() -> None:
    assert FailureCondition(FakeKube(), REPLICA_FAILURE, "m").desired(MS, [], 0.0) is None


def test_tracker_backoff_is_per_child_and_per_body() -> None:
    clock = FakeClock()
    tracker = FailureTracker(clock)
    a, b = failure("a"), failure("b")
    assert [tracker.refused("u", a, "d1") for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert tracker.backing_off("u", "create", "Pod", "a", "d1") == a
    assert tracker.backing_off("u", "create", "Pod", "b", "d1") is None  # another child
    assert tracker.backing_off("v", "create", "Pod", "a", "d1") is None  # another owner
    assert tracker.refused("u", b, "") == 1
    assert tracker.retry_after("u") == 1
    assert tracker.refused_names("u", "Pod") == {"a", "b"}
    clock.advance(60)
    assert tracker.backing_off("u", "create", "Pod", "a", "d1") is None  # due
    assert tracker.backing_off("u", "create", "Pod", "a", "d2") is None  # a new body starts over
    assert tracker.refusals("u", "create", "Pod", "a") == 0
    tracker.succeeded("u", "create", "Pod", "b")
    assert tracker.refused_names("u", "Pod") == frozenset()
