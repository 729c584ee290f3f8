"""KubeAI Model -> kthena_py: golden manifests written from seed 003's fields, and the field table's coverage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kthena_py.api.validation import validate_document
from kthena_py.importers.context import ImportOptions, ResourceProfile
from kthena_py.importers.kubeai import FIELD_TABLES
from kthena_py.importers.report import ImportFailure
from kthena_py.importers.translate import translate
from kthena_py.vocab.labels import (
    ACTIVATOR_SCALE_FROM_ZERO,
    IMPORTED_FROM,
    IMPORTED_KIND,
    IMPORTED_NAME,
    IMPORTED_PEER,
    LORA_ADAPTERS,
    MODEL_CACHE,
)

from .golden import check_golden, paths_per_document

SEED_MODEL_SPEC = (
    "url",
    "adapters[].name",
    "adapters[].url",
    "features",
    "engine",
    "resourceProfile",
    "cacheProfile",
    "image",
    "args",
    "env",
    "replicas",
    "minReplicas",
    "maxReplicas",
    "autoscalingDisabled",
    "targetRequests",
    "scaleDownDelaySeconds",
    "owner",
)
"""Every json field of seed 003's ModelSpec (Adapter's fields as list items)."""

MODEL = ("kubeai.org/v1", "Model")


def test_the_field_table_has_every_seed_field_exactly_once() -> None:
    paths = [rule.path for rule in FIELD_TABLES[MODEL]]
    assert len(paths) == len(set(paths))
    assert sorted(path.removeprefix("spec.") for path in paths if path.startswith("spec.")) == sorted(SEED_MODEL_SPEC)
    for rule in FIELD_TABLES[MODEL]:
        assert rule.outcome == "mapped" or rule.note, f"{rule.path}: {rule.outcome} needs a note saying how/why"
        assert (rule.outcome == "dropped") == (rule.target == ""), rule.path


def test_golden_models_translate_to_the_golden_objects_and_report() -> None:
    translation = check_golden("kubeai", "kubeai-models")
    reported = {line.path for line in translation.report}
    for field in SEED_MODEL_SPEC:
        assert f"spec.{field}" in reported, f"the golden input lacks spec.{field}"
    for document, counts in paths_per_document(translation).items():
        assert max(counts.values()) == 1, f"document {document}: {counts.most_common(1)} reported more than once"


def test_golden_objects_are_valid_and_carry_their_origin() -> None:
    translation = check_golden("kubeai", "kubeai-models")
    for obj in translation.objects:
        assert validate_document(obj) == [], obj["metadata"]
        metadata: Any = obj["metadata"]
        assert metadata["labels"][IMPORTED_PEER] == "kubeai"
        assert metadata["labels"][IMPORTED_KIND] == "Model"
        name = metadata["labels"][IMPORTED_NAME]
        assert metadata["annotations"][IMPORTED_FROM].startswith("kubeai.org/v1 Model ")
        assert metadata["annotations"][IMPORTED_FROM].endswith(f"/{name}")


def _model(**spec: Any) -> dict[str, Any]:
    body = {"url": "hf://org/model", "engine": "VLLM", "features": ["TextGeneration"], **spec}
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "ns"}, "spec": body}


def _objects(model: dict[str, Any], **options: Any) -> dict[str, dict[str, Any]]:
    translation = translate("kubeai", [model], ImportOptions(**options))
    return {str(obj["kind"]): dict(obj) for obj in translation.objects}


def test_scale_from_zero_with_a_cache_profile_is_gated_and_opted_in() -> None:
    objects = _objects(_model(minReplicas=0, cacheProfile="fs"))
    serving = objects["ModelServing"]
    assert serving["spec"]["replicas"] == 0
    assert serving["metadata"]["annotations"][MODEL_CACHE] == "m"
    assert serving["metadata"]["annotations"][ACTIVATOR_SCALE_FROM_ZERO] == "true"
    assert objects["ModelCache"]["spec"]["source"] == "hf://org/model"
    assert objects["AutoscalingPolicy"]["spec"]["homogeneousTarget"]["minReplicas"] == 0
    args = serving["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["args"]
    assert "--model=$(KTHENA_MODEL_PATH)" in args


@pytest.mark.parametrize(
    ("spec", "present", "absent"),
    [
        ({"minReplicas": 1}, {"AutoscalingPolicy"}, {"ModelCache"}),
        ({"autoscalingDisabled": True, "replicas": 3}, set(), {"AutoscalingPolicy", "ModelCache"}),
        ({"cacheProfile": "x"}, {"ModelCache", "AutoscalingPolicy"}, set()),
    ],
)
def test_which_objects_are_emitted(spec: dict[str, Any], present: set[str], absent: set[str]) -> None:
    kinds = set(_objects(_model(**spec)))
    assert "ModelServing" in kinds
    assert present <= kinds
    assert not (absent & kinds)


def test_the_opt_in_follows_min_replicas() -> None:
    annotations = _objects(_model(minReplicas=2))["ModelServing"]["metadata"]["annotations"]
    assert ACTIVATOR_SCALE_FROM_ZERO not in annotations


def test_adapters_become_the_lora_annotation() -> None:
    adapters = [{"name": "a", "url": "hf://x/a"}, {"name": "b", "url": "s3://bucket/b"}]
    annotations = _objects(_model(adapters=adapters))["ModelServing"]["metadata"]["annotations"]
    assert json.loads(annotations[LORA_ADAPTERS]) == [
        {"name": "a", "source": "hf://x/a"},
        {"name": "b", "source": "s3://bucket/b"},
    ]


def test_resource_profile_from_the_given_config_is_scaled_by_count() -> None:
    profile = ResourceProfile(
        image_name="gpu-x",
        requests={"cpu": "500m", "memory": "3Gi", "vendor.com/gpu": "1"},
        limits={"vendor.com/gpu": "1"},
        node_selector={"pool": "gpu"},
        affinity={"nodeAffinity": {}},
        tolerations=({"key": "gpu", "operator": "Exists"},),
        runtime_class_name="nvidia",
        scheduler_name="custom",
    )
    serving = _objects(_model(resourceProfile="x:3"), kubeai_profiles={"x": profile})["ModelServing"]
    pod = serving["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "1500m", "memory": "9Gi", "vendor.com/gpu": "3"},
        "limits": {"vendor.com/gpu": "3"},
    }
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert pod["affinity"] == {"nodeAffinity": {}}
    assert pod["runtimeClassName"] == "nvidia"
    assert serving["spec"]["schedulerName"] == "custom"


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"engine": "TGI"}, "spec.engine", "unknown engine"),
        ({"url": "ollama://x"}, "spec.url", "OLlama engine only"),
        ({"engine": "OLlama"}, "spec.url", "ollama:// urls only"),
        ({"url": "s3://b/m"}, "spec.url", "need a cacheProfile"),
        ({"url": "pvc://x", "cacheProfile": "c"}, "spec.cacheProfile", "only with"),
        ({"resourceProfile": "nope:1"}, "spec.resourceProfile", "unknown profile 'nope'"),
        ({"resourceProfile": "cpu"}, "spec.resourceProfile", "<profile>:<count>"),
        ({"resourceProfile": "cpu:0"}, "spec.resourceProfile", "<profile>:<count>"),
        ({"minReplicas": 3, "maxReplicas": 2}, "spec.minReplicas", "greater than maxReplicas"),
        ({"targetRequests": 0}, "spec.targetRequests", ">= 1"),
        ({"replicas": "2"}, "spec.replicas", "expected an integer, got a string"),
        ({"autoscalingDisabled": "yes"}, "spec.autoscalingDisabled", "expected a boolean"),
        ({"env": {"A": 1}}, "spec.env.A", "expected a string, got an integer"),
        ({"args": "--x"}, "spec.args", "expected a list of strings"),
        ({"adapters": [{"name": "a"}]}, "spec.adapters[].url", "non-empty string"),
        ({"adapters": [{"name": "a", "url": "hf://a"}], "engine": "Infinity"}, "spec.adapters", "only supported"),
        ({"url": None}, "spec.url", "required"),
        ({"tokenizer": "x"}, "spec.tokenizer", "unknown field"),
    ],
)
def test_bad_models_name_the_field(spec: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ImportFailure) as failure:
        translate("kubeai", [_model(**spec)], ImportOptions())
    assert failure.value.path == path
    assert failure.value.document == 0
    assert failure.value.source == "Model/ns/m"
    assert words in failure.value.message


@pytest.mark.parametrize(
    ("spec", "path", "expected"),
    [
        ({"scaleDownDelaySeconds": 7200}, "behavior.scaleDown.stabilizationWindow", "1800s"),
        ({"maxReplicas": 5_000_000}, "homogeneousTarget.maxReplicas", 1_000_000),
        ({"minReplicas": 2_000_000, "maxReplicas": 3_000_000}, "homogeneousTarget.minReplicas", 1_000_000),
    ],
)
def test_values_beyond_kthena_py_limits_are_capped_and_reported(spec: dict[str, Any], path: str, expected: Any) -> None:
    translation = translate("kubeai", [_model(**spec)], ImportOptions())
    policy: Any = next(obj for obj in translation.objects if obj["kind"] == "AutoscalingPolicy")
    value = policy["spec"]
    for key in path.split("."):
        value = value[key]
    assert value == expected
    assert validate_document(policy) == []
    capped = {line.path: line for line in translation.report if "capped" in line.note}
    assert set(capped) == {f"spec.{key}" for key in spec if key != "maxReplicas" or spec[key] > 1_000_000}


@pytest.mark.parametrize(
    ("engine", "where", "expected"),
    [
        ("VLLM", "args", "--model=$(KTHENA_MODEL_PATH)"),
        ("Infinity", "args", "--model-id=$(KTHENA_MODEL_PATH)"),
        ("FasterWhisper", "env", {"name": "WHISPER__MODEL", "value": "/model-cache"}),
    ],
)
def test_a_cached_model_is_read_from_the_mount(engine: str, where: str, expected: object) -> None:
    serving = _objects(_model(engine=engine, cacheProfile="c"))["ModelServing"]
    container = serving["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
    assert expected in container[where]
