"""Golden tests of the LLMKube translators: manifests written from the seeds' fields, every row used at least once.

The manifests under ``manifests/`` carry every field of LLMKube's Model, InferenceService and ModelPool (the
field tables' rows) at least once; the golden files under ``golden/`` hold the emitted objects and the report,
reviewed by hand (``KTHENA_PY_UPDATE_GOLDEN=1`` rewrites them). Beyond the goldens, the tests check what must
hold whatever the values: each present field reported exactly once, every row exercised, every emitted object
valid for kthena_py's admission rules and labelled with its origin.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.validation import autoscalingpolicy_conflicts, modelpool_conflicts, validate_document
from kthena_py.importers.context import ImportContext, ImportDocument, ImportOptions
from kthena_py.importers.llmkube import FIELD_TABLES, TRANSLATORS
from kthena_py.importers.metadata import METADATA_FIELDS
from kthena_py.importers.report import ReportLine
from kthena_py.vocab.labels import IMPORTED_FROM, IMPORTED_KIND, IMPORTED_NAME, IMPORTED_PEER

HERE = Path(__file__).parent
MANIFESTS = sorted((HERE / "manifests").glob("*.yaml"))
UPDATE_ENV = "KTHENA_PY_UPDATE_GOLDEN"
VALIDATED_KINDS = ("ModelServing", "AutoscalingPolicy", "ModelCache", "ModelPool")
"""kthena_py's kinds: validated by the admission rules (the Service is a core kind, checked by shape)."""


def load(path: Path, namespace: str | None = None) -> tuple[ImportDocument, ...]:
    bodies = [body for body in yaml.safe_load_all(path.read_text(encoding="utf-8")) if body]
    return tuple(ImportDocument(index, body, namespace) for index, body in enumerate(bodies))


def run(docs: tuple[ImportDocument, ...]) -> tuple[list[dict[str, Any]], list[ReportLine]]:
    context = ImportContext(ImportOptions(), docs)
    objects: list[dict[str, Any]] = []
    report: list[ReportLine] = []
    for doc in docs:
        emitted, lines = TRANSLATORS[(doc.api_version, doc.kind)](doc, context)
        objects.extend(emitted)
        report.extend(lines)
    return objects, report


def golden_text(objects: list[dict[str, Any]], report: list[ReportLine]) -> str:
    body = {"objects": objects, "report": [dataclasses.asdict(line) for line in report]}
    return yaml.safe_dump(body, sort_keys=True, width=110)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda path: path.stem)
def test_golden(manifest: Path) -> None:
    text = golden_text(*run(load(manifest)))
    path = HERE / "golden" / manifest.name
    if os.environ.get(UPDATE_ENV) == "1":
        path.write_text(text, encoding="utf-8")
    assert yaml.safe_load(text) == yaml.safe_load(path.read_text(encoding="utf-8")), f"{path.name}: review the diff"


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda path: path.stem)
def test_each_present_field_is_reported_once(manifest: Path) -> None:
    docs = load(manifest)
    _, report = run(docs)
    for doc in docs:
        paths = [line.path for line in report if line.document == doc.index]
        assert len(paths) == len(set(paths)), doc.source
        assert {"apiVersion", "kind", "metadata.name"} <= set(paths)
        assert all(line.source == doc.source for line in report if line.document == doc.index)


def test_every_row_of_every_table_is_exercised_by_the_manifests() -> None:
    """Each kind's own rows by a manifest of that kind; the shared ObjectMeta rows by a manifest of any kind."""
    seen: dict[str, set[str]] = {}
    for manifest in MANIFESTS:
        docs = load(manifest)
        _, report = run(docs)
        for line in report:
            kind = docs[line.document].kind
            seen.setdefault(kind, set()).add(line.path)
    shared = {rule.path for rule in METADATA_FIELDS}
    anywhere = set().union(*seen.values())
    assert sorted(shared - anywhere) == []
    for (_, kind), table in FIELD_TABLES.items():
        missing = [rule.path for rule in table if rule.path not in seen.get(kind, set()) and rule.path not in shared]
        assert not missing, f"{kind}: rows no manifest exercises: {missing}"


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda path: path.stem)
def test_every_emitted_object_is_valid_and_names_its_origin(manifest: Path) -> None:
    """Each object passes the admission rules, the pools and policies also the rules across objects."""
    docs = load(manifest)
    objects, _ = run(docs)
    sources = {(doc.kind, doc.name) for doc in docs}
    pools = [obj for obj in objects if obj["kind"] == "ModelPool"]
    policies = [obj for obj in objects if obj["kind"] == "AutoscalingPolicy"]
    for obj in objects:
        if obj["apiVersion"] == "v1":
            assert obj["kind"] == "Service"
            assert obj["spec"]["type"] in ("ClusterIP", "NodePort", "LoadBalancer")
        elif obj["kind"] in VALIDATED_KINDS:
            assert validate_document(obj) == [], f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "ModelPool":
            assert modelpool_conflicts(obj, pools, policies) == []
        if obj["kind"] == "AutoscalingPolicy":
            assert autoscalingpolicy_conflicts(obj, pools) == []
        labels, annotations = obj["metadata"]["labels"], obj["metadata"]["annotations"]
        assert labels[IMPORTED_PEER] == "llmkube"
        assert (labels[IMPORTED_KIND], labels[IMPORTED_NAME]) in sources
        assert annotations[IMPORTED_FROM].startswith("inference.llmkube.dev/v1alpha1 ")


def test_namespace_override_moves_every_object_but_keeps_the_origin() -> None:
    docs = load(HERE / "manifests" / "llamacpp.yaml", namespace="migrated")
    objects, report = run(docs)
    assert {obj["metadata"]["namespace"] for obj in objects} == {"migrated"}
    assert {line.source.split("/")[1] for line in report} == {"migrated"}
    assert all(" team-a/" in obj["metadata"]["annotations"][IMPORTED_FROM] for obj in objects)


REQUIRED = frozenset({"modelRef", "image", "members", "source", "files"})
"""Spec fields whose removal makes a manifest untranslatable (an ImportFailure, tested elsewhere)."""


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_removing_fields_removes_exactly_their_report_lines(data: st.DataObject) -> None:
    """Translate a manifest with a random set of spec fields removed: the report loses exactly their lines."""
    manifest = data.draw(st.sampled_from(MANIFESTS), label="manifest")
    docs = load(manifest)
    _, full = run(docs)
    kept_docs = []
    removed: dict[int, set[str]] = {}
    for doc in docs:
        spec = doc.body.get("spec") or {}
        optional = sorted(set(spec) - REQUIRED)
        gone = set(data.draw(st.sets(st.sampled_from(optional)), label=doc.source)) if optional else set()
        removed[doc.index] = gone
        body = {**doc.body, "spec": {key: value for key, value in spec.items() if key not in gone}}
        kept_docs.append(ImportDocument(doc.index, body))
    _, report = run(tuple(kept_docs))

    def top(path: str) -> str:
        return path.split(".")[1].split("[")[0] if path.startswith("spec.") else ""

    expected = {(line.document, line.path) for line in full if top(line.path) not in removed[line.document]}
    assert {(line.document, line.path) for line in report} == expected
