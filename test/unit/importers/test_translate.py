"""translate(): parsing, dispatch, failures that name the document and field, --strict, --namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from kthena_py.importers.context import ImportOptions
from kthena_py.importers.report import ImportFailure
from kthena_py.importers.translate import StrictViolation, parse, translate

MODEL = """
apiVersion: kubeai.org/v1
kind: Model
metadata: {name: %s, namespace: a}
spec: {url: "hf://o/m", engine: VLLM, features: [TextGeneration], minReplicas: 1%s}
"""


def _models(*specs: tuple[str, str]) -> str:
    return "---".join(MODEL % spec for spec in specs)


def test_documents_translate_in_order() -> None:
    translation = translate("kubeai", _models(("a", ""), ("b", "")), ImportOptions())
    assert [(obj["kind"], obj["metadata"]["name"]) for obj in translation.objects] == [  # type: ignore[index]
        ("ModelServing", "a"),
        ("AutoscalingPolicy", "a"),
        ("ModelServing", "b"),
        ("AutoscalingPolicy", "b"),
    ]
    assert {line.document for line in translation.report} == {0, 1}


def test_invalid_yaml_names_the_document() -> None:
    text = _models(("a", "")) + "---\nkind: [unclosed\n"
    with pytest.raises(ImportFailure) as failure:
        translate("kubeai", text, ImportOptions())
    assert failure.value.document == 1
    assert "invalid YAML (line" in failure.value.message


@pytest.mark.parametrize(
    ("text", "path", "words"),
    [
        ("apiVersion: kubeai.org/v2\nkind: Model\nmetadata: {name: m}\n", "apiVersion", "no translator for"),
        ("apiVersion: kubeai.org/v1\nkind: Gadget\nmetadata: {name: m}\n", "kind", "no translator for"),
        ("kind: Model\nmetadata: {name: m}\n", "apiVersion", "required"),
        ("apiVersion: kubeai.org/v1\nmetadata: {name: m}\n", "kind", "required"),
    ],
)
def test_unknown_api_version_or_kind_names_the_field(text: str, path: str, words: str) -> None:
    with pytest.raises(ImportFailure) as failure:
        translate("kubeai", "---\n" + text, ImportOptions())
    assert (failure.value.document, failure.value.path) == (0, path)
    assert words in failure.value.message


def test_the_second_document_making_the_same_object_is_refused() -> None:
    with pytest.raises(ImportFailure) as failure:
        translate("kubeai", _models(("a", ""), ("a", "")), ImportOptions())
    assert failure.value.document == 1
    assert "also made by document 0" in failure.value.message


def test_namespace_override_moves_every_object_and_reference() -> None:
    translation = translate("kubeai", _models(("a", "")), ImportOptions(namespace="moved"))
    assert {obj["metadata"]["namespace"] for obj in translation.objects} == {"moved"}  # type: ignore[index]
    policy = translation.objects[1]
    assert 'namespace="moved"' in str(policy["spec"])


def test_strict_fails_on_dropped_desired_state_only() -> None:
    exported = _models(("a", "")).replace("namespace: a}", "namespace: a, uid: x, resourceVersion: '1'}")
    exported += "status: {replicas: {all: 1}}\n"
    with pytest.raises(StrictViolation) as violation:
        translate("kubeai", exported, ImportOptions(strict=True))
    assert [line.path for line in violation.value.dropped] == ["spec.features"]
    assert violation.value.translation.report
    without_features = exported.replace("features: [TextGeneration], ", "")
    translation = translate("kubeai", without_features, ImportOptions(strict=True))
    assert {line.path for line in translation.report if line.outcome == "dropped"} == {
        "metadata.uid",
        "metadata.resourceVersion",
        "status",
    }


def test_unknown_peer_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown peer"):
        translate("other", "", ImportOptions())


def test_parse_keeps_empty_documents_for_indexing() -> None:
    assert parse("a: 0\n---\n---\na: 1\n") == [{"a": 0}, None, {"a": 1}]


@pytest.mark.parametrize(
    ("metadata", "path", "words"),
    [
        ("{namespace: a}", "metadata.name", "required"),
        ("{name: 3}", "metadata.name", "expected a string"),
        ("{name: m, namespace: [a]}", "metadata.namespace", "expected a string"),
        ("{name: m, labels: [a]}", "metadata.labels", "expected an object"),
        ("{name: m, labels: {a: 1}}", "metadata.labels.a", "expected a string, got an integer"),
        ("{name: m, annotations: {a: {b: c}}}", "metadata.annotations.a", "expected a string, got an object"),
        ("[m]", "metadata", "expected an object"),
    ],
)
def test_misshapen_metadata_names_the_field(metadata: str, path: str, words: str) -> None:
    text = f"apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {metadata}\nspec: {{url: hf://a/b, engine: VLLM}}\n"
    with pytest.raises(ImportFailure) as failure:
        translate("kubeai", text, ImportOptions())
    assert (failure.value.document, failure.value.path) == (0, path)
    assert words in failure.value.message


def test_every_llmkube_manifest_translates_whole_with_its_core_objects() -> None:
    """translate() checks the objects our admission validates and lets core ones (Services) through."""
    manifests = sorted((Path(__file__).parent / "llmkube" / "manifests").glob("*.yaml"))
    assert manifests
    for manifest in manifests:
        translation = translate("llmkube", manifest.read_text(encoding="utf-8"), ImportOptions())
        kinds = {obj["kind"] for obj in translation.objects}  # type: ignore[index]
        assert "ModelServing" in kinds, manifest.name
        if manifest.stem in ("llamacpp", "others", "vllm"):
            assert "Service" in kinds, manifest.name
