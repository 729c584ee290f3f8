"""ModelPool: the model's defaults and round trip, and the webhook's rules with their field paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.common import to_dict
from kthena_py.api.modelpool import (
    DEFAULT_IDLE_METRICS,
    DEFAULT_IDLE_PATH,
    ModelPool,
    idle_metrics,
    idle_path,
    member_names,
)
from kthena_py.api.structural import apply_defaults, kind_schema_of
from kthena_py.api.validation import validate_document


def _pool(*members: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {"name": "gpu0", "namespace": "team"},
        "spec": {"members": [{"modelServingRef": {"name": name}} for name in members], **spec},
    }


def _errors(doc: dict[str, Any]) -> list[str]:
    return [str(error) for error in validate_document(doc)]


def test_a_full_pool_round_trips_and_gets_the_crd_defaults() -> None:
    doc = _pool(
        "llama",
        "qwen",
        default="llama",
        gpu=1,
        nodeSelector={"gpu-pool": "a"},
        idleCheck={"port": 9000, "metrics": ["engine:busy"]},
    )
    doc["status"] = {
        "phase": "Swapping",
        "residentMember": "llama",
        "residentMembers": ["llama"],
        "pendingMember": "qwen",
        "evictingMember": "llama",
        "swap": {"from": "llama", "to": "qwen", "step": "Releasing", "started": "2026-12-03T11:00:00Z"},
        "lastSwap": {"from": "qwen", "to": "llama", "durationSeconds": 12.5},
        "members": [{"name": "llama", "phase": "Ready", "resident": True, "replicas": 1}],
    }
    pool = ModelPool.model_validate(copy.deepcopy(doc))
    assert to_dict(pool, with_defaults=False) == doc
    spec = to_dict(pool)["spec"]
    assert (spec["swapPolicy"], spec["swapBudget"], spec["slots"]) == ("sticky", "300s", 1)
    assert spec["idleCheck"] == {"port": 9000, "path": "/metrics", "metrics": ["engine:busy"]}
    assert member_names(pool) == ["llama", "qwen"]
    assert idle_metrics(pool.spec) == ("engine:busy",)
    assert validate_document(doc) == []


def test_the_idle_check_defaults_apply_without_an_idle_check() -> None:
    spec = ModelPool.model_validate(_pool("a")).spec
    assert (idle_metrics(spec), idle_path(spec)) == (DEFAULT_IDLE_METRICS, DEFAULT_IDLE_PATH)


@pytest.mark.parametrize(
    ("spec", "members", "expected"),
    [
        pytest.param({}, (), ["spec.members: Invalid value: 0: spec.members in body should have at least 1 items"]),
        pytest.param({}, ("a", "b", "a"), ['spec.members[2].modelServingRef.name: Duplicate value: "a"'], id="dup"),
        pytest.param(
            {"default": "c"}, ("a", "b"), ['spec.default: Invalid value: "c": must name a member of the pool']
        ),
        pytest.param(
            {"swapBudget": "0s"}, ("a",), ['spec.swapBudget: Invalid value: "0s": must be a positive duration']
        ),
        pytest.param(
            {"swapBudget": "-5m"}, ("a",), ['spec.swapBudget: Invalid value: "-5m": must be a positive duration']
        ),
        pytest.param(
            {"swapBudget": "5 minutes"},
            ("a",),
            ['spec.swapBudget: Invalid value: "5 minutes": time: unknown unit " minutes" in duration "5 minutes"'],
        ),
        pytest.param(
            {"slots": 0},
            ("a",),
            ["spec.slots: Invalid value: 0: spec.slots in body should be greater than or equal to 1"],
        ),
        pytest.param(
            {"swapPolicy": "lru"}, ("a",), ['spec.swapPolicy: Unsupported value: "lru": supported values: "sticky"']
        ),
        pytest.param(
            {"gpu": -1}, ("a",), ["spec.gpu: Invalid value: -1: spec.gpu in body should be greater than or equal to 0"]
        ),
        pytest.param({}, ("Not_A_Name",), None, id="member-name-pattern"),
        pytest.param({"idleCheck": {"path": "metrics"}}, ("a",), None, id="idle-path-pattern"),
        pytest.param({"idleCheck": {"metrics": []}}, ("a",), None, id="idle-metrics-empty"),
        pytest.param({}, tuple(f"m{i}" for i in range(65)), None, id="too-many-members"),
        pytest.param({"replicas": 1}, ("a",), ['spec.replicas: Forbidden: unknown field "spec.replicas"']),
    ],
)
def test_invalid_pools_are_refused_at_the_field_that_is_wrong(
    spec: dict[str, Any], members: tuple[str, ...], expected: list[str] | None
) -> None:
    errors = _errors(_pool(*members, **spec))
    if expected is None:
        assert len(errors) == 1, errors
    else:
        assert errors == expected


def test_the_rules_across_fields_are_reported_together() -> None:
    errors = _errors(_pool("a", "a", "b", "b", default="z", swapBudget="0s"))
    assert [error.split(":")[0] for error in errors] == [
        "spec.members[1].modelServingRef.name",
        "spec.members[3].modelServingRef.name",
        "spec.default",
        "spec.swapBudget",
    ]


_NAMES = st.sampled_from(["a", "b", "c", "d"])


@given(members=st.lists(_NAMES, min_size=1, max_size=6), default=st.none() | _NAMES)
def test_exactly_the_repeated_listings_and_a_foreign_default_are_refused(
    members: list[str], default: str | None
) -> None:
    doc = _pool(*members) if default is None else _pool(*members, default=default)
    paths = [error.path for error in validate_document(doc)]
    repeated = [f"spec.members[{i}].modelServingRef.name" for i, name in enumerate(members) if name in members[:i]]
    foreign = ["spec.default"] if default is not None and default not in members else []
    assert paths == repeated + foreign


_TIMES = st.sampled_from(["2026-12-03T11:00:00Z", "2026-12-03T11:00:01.500Z", "2026-12-03T11:02:00+01:00"])
_SPEC_FIELDS = {
    "default": _NAMES,
    "gpu": st.integers(0, 8),
    "nodeSelector": st.dictionaries(st.sampled_from(["gpu-pool", "zone"]), _NAMES, max_size=2),
    "swapPolicy": st.just("sticky"),
    "swapBudget": st.sampled_from(["300s", "2m", "1.5h", "90s"]),
    "slots": st.integers(1, 4),
    "idleCheck": st.fixed_dictionaries(
        {},
        optional={
            "port": st.integers(1, 65535),
            "path": st.sampled_from(["/metrics", "/stats"]),
            "metrics": st.lists(st.sampled_from(["vllm:num_requests_running", "sglang:queue"]), min_size=1),
        },
    ),
}
_SWAP = st.fixed_dictionaries(
    {"to": _NAMES, "step": st.sampled_from(["Draining", "Releasing", "Loading"])},
    optional={"from": _NAMES, "started": _TIMES, "drained": _TIMES, "released": _TIMES},
)
_LAST_SWAP = st.fixed_dictionaries(
    {"to": _NAMES},
    optional={"from": _NAMES, "ready": _TIMES, "durationSeconds": st.floats(0, 1e4, allow_nan=False)},
)
_MEMBER_STATUS = st.fixed_dictionaries(
    {"name": _NAMES},
    optional={
        "phase": st.sampled_from(["Ready", "Scaling", "Stopped", "Failed", "Missing"]),
        "resident": st.booleans(),
        "replicas": st.integers(0, 2),
        "lastRequestTime": _TIMES,
    },
)
_STATUS = st.fixed_dictionaries(
    {},
    optional={
        "observedGeneration": st.integers(0, 9),
        "phase": st.sampled_from(["Pending", "Ready", "Swapping", "Degraded"]),
        "residentMember": _NAMES,
        "residentMembers": st.lists(_NAMES, max_size=3),
        "pendingMember": _NAMES,
        "evictingMember": _NAMES,
        "swap": _SWAP,
        "lastSwap": _LAST_SWAP,
        "members": st.lists(_MEMBER_STATUS, max_size=3),
    },
)


@given(
    members=st.lists(_NAMES, min_size=1, max_size=4, unique=True),
    spec=st.fixed_dictionaries({}, optional=_SPEC_FIELDS),
    status=st.none() | _STATUS,
)
def test_any_schema_valid_pool_round_trips_and_the_crd_defaults_are_the_models(
    members: list[str], spec: dict[str, Any], status: dict[str, Any] | None
) -> None:
    doc = _pool(*members, **spec)
    if status is not None:
        doc["status"] = status
    pool = ModelPool.model_validate(copy.deepcopy(doc))
    assert to_dict(pool, with_defaults=False) == doc
    schema = kind_schema_of("ModelPool")
    assert schema is not None
    assert apply_defaults(schema, doc) == to_dict(pool)
