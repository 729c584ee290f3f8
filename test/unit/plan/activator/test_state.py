"""The activator's state annotation: what it should say, when it is written, and the apply body."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.kube.memory import ssa
from kthena_py.plan.activator.state import SCALED_TO_ZERO, apply_body, current_state, desired_state, needs_write
from kthena_py.vocab.labels import ACTIVATOR_SCALE_FROM_ZERO, ACTIVATOR_STATE

_UNSET = object()


def ms(
    replicas: Any = 0, *, opt_in: str | None = "true", state: str | None = None, deleting: bool = False
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if opt_in is not None:
        annotations[ACTIVATOR_SCALE_FROM_ZERO] = opt_in
    if state is not None:
        annotations[ACTIVATOR_STATE] = state
    metadata: dict[str, Any] = {"name": "llm", "namespace": "ns", "resourceVersion": "7", "annotations": annotations}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {} if replicas is _UNSET else {"replicas": replicas}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": metadata,
        "spec": spec,
    }


def policy(target: str, minimum: int, namespace: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"homogeneousTarget": {"target": {"targetRef": {"name": target}}, "minReplicas": minimum}},
    }


@pytest.mark.parametrize(
    ("obj", "policies", "expected"),
    [
        (ms(0), [], SCALED_TO_ZERO),
        (ms(0, opt_in="TRUE"), [], SCALED_TO_ZERO),
        (ms(1), [], None),
        (ms(3), [], None),
        (ms(_UNSET), [], None),  # missing replicas is the API default 1
        (ms(False), [], None),  # a boolean is not a replica count
        (ms("0"), [], None),
        (ms(0, opt_in=None), [], None),
        (ms(0, opt_in="false"), [], None),
        (ms(0, opt_in=None), [policy("llm", 0)], SCALED_TO_ZERO),
        (ms(0, opt_in=None), [policy("llm", 1)], None),
        (ms(0, opt_in=None), [policy("other", 0)], None),
        (ms(0, opt_in=None), [policy("llm", 0, namespace="elsewhere")], None),
        (ms(2, opt_in=None), [policy("llm", 0)], None),
    ],
)
def test_desired_state(obj: dict[str, Any], policies: list[dict[str, Any]], expected: str | None) -> None:
    assert desired_state(obj, policies) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (ms(0), True),  # at zero, annotation missing: set it
        (ms(0, state=SCALED_TO_ZERO), False),  # converged
        (ms(1, state=SCALED_TO_ZERO), True),  # woken: drop it
        (ms(1), False),  # converged
        (ms(0, opt_in=None, state=SCALED_TO_ZERO), True),  # opted out: drop it
        (ms(0, state="something else"), True),  # a different value is corrected
        (ms(0, deleting=True), False),  # never written while being deleted
        (ms(1, state=SCALED_TO_ZERO, deleting=True), False),
    ],
)
def test_needs_write(obj: dict[str, Any], expected: bool) -> None:
    assert needs_write(obj, []) is expected


def test_apply_body_claims_only_the_annotation_and_the_precondition() -> None:
    assert apply_body(ms(0), SCALED_TO_ZERO) == {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {
            "name": "llm",
            "namespace": "ns",
            "resourceVersion": "7",
            "annotations": {ACTIVATOR_STATE: SCALED_TO_ZERO},
        },
    }
    dropped = apply_body(ms(1, state=SCALED_TO_ZERO), None)
    assert "annotations" not in dropped["metadata"] and "spec" not in dropped
    assert dropped["metadata"]["resourceVersion"] == "7"


@given(
    st.one_of(st.integers(-2, 5), st.none(), st.booleans(), st.text(max_size=2)),
    st.sampled_from([None, "true", "false", "True"]),
    st.sampled_from([None, SCALED_TO_ZERO, "x"]),
)
def test_after_applying_the_decision_no_write_is_needed(replicas: Any, opt_in: str | None, state: str | None) -> None:
    """Applying what the decision asks (as this field manager, who set the old value) converges in one write."""
    obj = ms(replicas, opt_in=opt_in, state=state)
    manager = "kthena-py-activator"
    owners = {manager: set(ssa.apply_fields(apply_body(obj, state)))} if state is not None else {}
    before = {k: v for k, v in obj.items()}
    desired = desired_state(obj, [])
    after, _ = ssa.apply(obj, apply_body(obj, desired), manager, owners, force=True)
    assert obj == before  # inputs are never mutated
    assert current_state(after) == desired
    assert not needs_write(after, [])
