"""parse_modelserving reuses a parsed spec across resourceVersions only while the spec is unchanged."""

from __future__ import annotations

import copy
from typing import Any

import pydantic
import pytest

from kthena_py.controllers import servingview
from kthena_py.controllers.servingview import _parse_modelserving, parse_modelserving


def _obj(uid: str, rv: str, **spec_changes: Any) -> dict[str, Any]:
    role = {
        "name": "r",
        "replicas": 1,
        "workerReplicas": 0,
        "entryTemplate": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
    }
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "a", "namespace": "n", "uid": uid, "resourceVersion": rv, "generation": 1},
        "spec": {"replicas": 1, "template": {"roles": [role]}, **spec_changes},
    }


def _same_as_full_parse(obj: dict[str, Any]) -> Any:
    parsed = parse_modelserving(obj)
    full = _parse_modelserving(obj)
    assert parsed == full
    assert parsed.model_fields_set == full.model_fields_set
    assert parsed.model_dump(exclude_unset=True) == full.model_dump(exclude_unset=True)
    return parsed


STATUSES: list[Any] = [
    None,
    {"replicas": 1, "availableReplicas": 1},
    {"replicas": "not a number"},  # unreadable: dropped, as a full parse drops it
    {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2026-12-03T00:00:00Z"}]},
]


@pytest.mark.parametrize("status", STATUSES)
def test_a_status_change_keeps_the_spec_object(status: Any) -> None:
    first = parse_modelserving(_obj("uid-status", "1"))
    later = _obj("uid-status", f"2-{STATUSES.index(status)}")
    later["metadata"]["labels"] = {"team": "x"}
    if status is not None:
        later["status"] = status
    parsed = _same_as_full_parse(later)
    assert parsed.spec is first.spec
    assert parsed.metadata == later["metadata"]


def test_a_spec_change_is_parsed_again() -> None:
    first = parse_modelserving(_obj("uid-spec", "1"))
    parsed = _same_as_full_parse(_obj("uid-spec", "2", replicas=3))
    assert parsed.spec is not first.spec
    assert parsed.spec.replicas == 3
    # and the new spec is the one reused from then on
    assert parse_modelserving(_obj("uid-spec", "3", replicas=3)).spec is parsed.spec


def test_another_uid_never_shares_a_spec() -> None:
    first = parse_modelserving(_obj("uid-a", "1"))
    assert parse_modelserving(_obj("uid-b", "1")).spec is not first.spec


def test_an_invalid_spec_after_a_valid_one_still_raises() -> None:
    parse_modelserving(_obj("uid-bad", "1"))
    broken = _obj("uid-bad", "2")
    del broken["spec"]["template"]["roles"][0]["workerReplicas"]
    with pytest.raises(pydantic.ValidationError):
        parse_modelserving(broken)


def test_the_spec_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servingview, "_PARSED_MAX", 3)
    monkeypatch.setattr(servingview, "_SPECS", copy.copy(servingview._SPECS))
    servingview._SPECS.clear()
    for i in range(10):
        parse_modelserving(_obj(f"uid-bound-{i}", "1"))
    assert len(servingview._SPECS) == 3
