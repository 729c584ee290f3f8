"""Reading peer manifests: List expansion, the field walk against a table, typed readers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.importers.context import (
    ImportContext,
    ImportDocument,
    ImportOptions,
    label_value,
    origin_metadata,
    rule_line,
)
from kthena_py.importers.documents import expand, integer, report_fields, string, string_list, string_map
from kthena_py.importers.report import FieldRule, ImportFailure
from kthena_py.vocab.labels import IMPORTED_FROM, IMPORTED_KIND, IMPORTED_NAME, IMPORTED_PEER

TABLE = (
    FieldRule("kind", "mapped", "k"),
    FieldRule("metadata.name", "mapped", "n"),
    FieldRule("spec.a", "mapped", "A"),
    FieldRule("spec.items[].x", "approximated", "X", "how"),
    FieldRule("spec.items[].y", "dropped", "", "why"),
    FieldRule("spec.map", "mapped", "M"),
    FieldRule("status", "dropped", "", "observed"),
)


def _doc(body: dict[str, Any]) -> ImportDocument:
    return ImportDocument(0, {"kind": "K", "metadata": {"name": "n"}, **body})


def test_expand_flattens_lists_and_skips_empty_documents() -> None:
    item = {"apiVersion": "v", "kind": "K", "metadata": {"name": "a"}}
    docs = expand([None, {"apiVersion": "v1", "kind": "List", "items": [item, item]}, item], namespace="x")
    assert [doc.index for doc in docs] == [0, 1, 2]
    assert all(doc.namespace == "x" for doc in docs)
    assert docs[0].source == "K/x/a"


@pytest.mark.parametrize(
    ("bodies", "words"),
    [(["text"], "not an object"), ([{"kind": "ModelList", "items": [1]}], "not an object")],
)
def test_expand_refuses_what_is_not_an_object(bodies: list[object], words: str) -> None:
    with pytest.raises(ImportFailure, match=words):
        expand(bodies)


def test_namespace_defaults_and_source_names_the_document() -> None:
    doc = ImportDocument(3, {"apiVersion": "g/v", "kind": "K", "metadata": {"name": "n"}})
    assert doc.namespace == "default"
    assert doc.source == "K/default/n"
    assert rule_line(doc, TABLE[3]).document == 3
    assert rule_line(doc, TABLE[3], note="other").note == "other"


def test_origin_metadata_names_the_peer_object_in_its_own_namespace() -> None:
    doc = ImportDocument(0, {"apiVersion": "g/v", "kind": "K", "metadata": {"name": "n", "namespace": "a"}}, "b")
    origin = origin_metadata(doc, "llmkube")
    assert origin["labels"] == {IMPORTED_PEER: "llmkube", IMPORTED_KIND: "K", IMPORTED_NAME: "n"}
    assert origin["annotations"] == {IMPORTED_FROM: "g/v K a/n"}
    assert doc.namespace == "b"


def test_context_finds_another_document() -> None:
    a = ImportDocument(0, {"kind": "Model", "metadata": {"name": "m"}})
    b = ImportDocument(1, {"kind": "InferenceService", "metadata": {"name": "m"}})
    context = ImportContext(ImportOptions(), (a, b))
    assert context.find("Model", "m") is a
    assert context.find("Model", "other") is None


def test_report_fields_lists_each_present_field_once_in_table_order() -> None:
    doc = _doc({"status": {"x": 1}, "spec": {"map": {"k": "v"}, "items": [{"x": 1}, {"x": 2, "y": 3}], "a": 1}})
    paths = [line.path for line in report_fields(doc, TABLE)]
    assert paths == ["kind", "metadata.name", "spec.a", "spec.items[].x", "spec.items[].y", "spec.map", "status"]


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"b": 1}, "spec.b", "unknown field"),
        ({"items": [{"z": 1}]}, "spec.items[].z", "unknown field"),
        ({"items": {"x": 1}}, "spec.items", "expected a list"),
        ({"items": [3]}, "spec.items[]", "expected an object"),
    ],
)
def test_report_fields_fails_on_unknown_or_misshapen_fields(spec: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ImportFailure) as failure:
        report_fields(_doc({"spec": spec}), TABLE)
    assert failure.value.path == path
    assert words in failure.value.message


def test_report_fields_fails_on_a_scalar_where_an_object_is_expected() -> None:
    with pytest.raises(ImportFailure, match="spec: expected an object, got a string"):
        report_fields(_doc({"spec": "x"}), TABLE)


@given(
    st.lists(st.fixed_dictionaries({}, optional={"x": st.integers(), "y": st.text(max_size=3)}), min_size=1, max_size=8)
)
def test_list_fields_are_reported_once_however_many_items(items: list[dict[str, Any]]) -> None:
    lines = report_fields(_doc({"spec": {"items": items}}), TABLE)
    paths = [line.path for line in lines]
    assert len(paths) == len(set(paths))
    for key in ("x", "y"):
        assert (f"spec.items[].{key}" in paths) == any(key in item for item in items)


@pytest.mark.parametrize(
    ("reader", "value", "expected"),
    [
        (integer, 2, 2),
        (integer, 2.0, 2),
        (integer, None, None),
        (string, "s", "s"),
        (string_list, ["a"], ["a"]),
        (string_map, {"a": "b"}, {"a": "b"}),
    ],
)
def test_readers_return_well_typed_values(reader: Any, value: object, expected: object) -> None:
    assert reader(_doc({"spec": {"v": value}}), "spec.v") == expected


@pytest.mark.parametrize(
    ("reader", "value", "path"),
    [
        (integer, True, "spec.v"),
        (integer, 1.5, "spec.v"),
        (integer, "1", "spec.v"),
        (string, 1, "spec.v"),
        (string_list, ["a", 1], "spec.v[]"),
        (string_map, {"a": True}, "spec.v.a"),
    ],
)
def test_readers_name_the_field_of_a_wrong_type(reader: Any, value: object, path: str) -> None:
    with pytest.raises(ImportFailure) as failure:
        reader(_doc({"spec": {"v": value}}), "spec.v")
    assert failure.value.path == path
    assert "expected" in failure.value.message


@given(st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?", fullmatch=True))
def test_the_name_label_is_a_valid_label_value_and_distinct_per_name(name: str) -> None:
    value = label_value(name)
    assert len(value) <= 63
    assert re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", value)
    assert (value == name) == (len(name) <= 63)
    if len(name) > 63:
        assert label_value(name + "x") != value
