"""Cutting ``metadata.managedFields`` out of encoded objects: exact when it cuts, untouched otherwise."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import from_json

from kthena_py.kube.managedfields import without_managed_fields

ENTRY = {
    "manager": "kthena-py-servinggroups",
    "operation": "Update",
    "apiVersion": "v1",
    "time": "2026-12-05T12:42:45Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {}}},
}


def pod(managed: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod laid out the way the API server writes built-in kinds: managedFields last in metadata, spec next."""
    metadata: dict[str, Any] = {"name": "p-0", "namespace": "ns", "uid": "u1", "labels": labels or {"app": "x"}}
    if managed is not None:
        metadata["managedFields"] = managed
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def event(obj: dict[str, Any], *, sort_keys: bool = False) -> bytes:
    """One watch line; ``sort_keys`` is how custom resources are encoded."""
    return json.dumps({"type": "MODIFIED", "object": obj}, separators=(",", ":"), sort_keys=sort_keys).encode()


def without(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("managedFields", None)
    return out


@pytest.mark.parametrize("sort_keys", [False, True], ids=["built-in layout", "custom-resource layout"])
def test_cuts_the_objects_own_managed_fields(sort_keys: bool) -> None:
    obj = pod([ENTRY, {**ENTRY, "manager": "kwok", "subresource": "status"}])
    line = event(obj, sort_keys=sort_keys)
    cut = without_managed_fields(line)
    assert b"managedFields" not in cut
    assert from_json(cut) == {"type": "MODIFIED", "object": without(obj)}


@pytest.mark.parametrize(
    ("case", "line"),
    [
        ("no managedFields", event(pod(None))),
        ("no managedFields, custom-resource layout", event(pod(None), sort_keys=True)),
        ("a label named spec before them", event(pod([ENTRY], labels={"spec": "x"}))),
        (
            "only a template's, inside the spec",
            event({"kind": "X", "metadata": {"name": "a"}, "spec": {"template": {"metadata": {"managedFields": []}}}}),
        ),
        (
            "a ']' inside a string of the array",
            event(pod([{**ENTRY, "fieldsV1": {"f:metadata": {"f:labels": {"f:a]": {}}}}}])),
        ),
        ("another key after the array", b'{"metadata":{"managedFields":[{"manager":"m"}],"zone":"z"},"spec":{}}'),
        (
            "an object-valued field before the metadata",
            b'{"data":{"metadata":{"managedFields":[]},"spec":{}},"kind":"X","metadata":{"name":"a"}}',
        ),
        ("no metadata key before them", b'{"kind":"X","managedFields":[],"name":"a"}'),
        (
            "an answer with an object-valued field before the metadata",
            b'{"data":{"metadata":{"managedFields":[],"name":"b"}},"kind":"X","metadata":{"name":"a"}}',
        ),
    ],
)
def test_leaves_anything_else_untouched(case: str, line: bytes) -> None:
    assert without_managed_fields(line) is line, case


def test_a_bracket_string_followed_by_what_could_end_the_array_is_not_taken_for_its_end() -> None:
    tricky = {**ENTRY, "manager": 'a]},"spec":{'}
    for sort_keys in (False, True):
        line = event(pod([tricky]), sort_keys=sort_keys)
        cut = without_managed_fields(line)
        assert cut is line or from_json(cut) == {"type": "MODIFIED", "object": without(pod([tricky]))}


_TEXT = st.text(alphabet=st.sampled_from(list('ab]}[{,":\\ \u00e9spec name')), max_size=12)
_FIELDS: st.SearchStrategy[Any] = st.recursive(
    st.just({}), lambda inner: st.dictionaries(_TEXT, inner, max_size=3), max_leaves=8
)
_ENTRIES = st.lists(
    st.fixed_dictionaries(
        {"manager": _TEXT, "operation": st.sampled_from(["Update", "Apply"]), "fieldsV1": _FIELDS},
        optional={"subresource": _TEXT, "time": _TEXT},
    ),
    max_size=3,
)


@given(
    managed=st.none() | _ENTRIES,
    labels=st.dictionaries(_TEXT, _TEXT, max_size=3),
    sort_keys=st.booleans(),
)
def test_the_result_is_the_same_object_without_them_or_the_line_itself(
    managed: list[dict[str, Any]] | None, labels: dict[str, str], sort_keys: bool
) -> None:
    obj = pod(managed, labels)
    line = event(obj, sort_keys=sort_keys)
    cut = without_managed_fields(line)
    if cut is not line:
        assert from_json(cut) == {"type": "MODIFIED", "object": without(obj)}
    if (
        managed is not None
        and not any("spec" in key for key in labels)
        and all("]" not in json.dumps(entry) for entry in managed)
    ):
        assert cut is not line, "a plain array after no spec is cut"
