"""The LLMKube translators' decisions, one rule at a time (table tests and properties)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.importers.context import ImportContext, ImportDocument, ImportOptions
from kthena_py.importers.llmkube import TRANSLATORS
from kthena_py.importers.llmkube.gpu import layer_shares, resource_name
from kthena_py.importers.llmkube.inferenceservice import priority_class
from kthena_py.importers.llmkube.model import staging_source
from kthena_py.importers.report import ImportFailure, ReportLine

V1 = "inference.llmkube.dev/v1alpha1"


def doc(kind: str, name: str, spec: dict[str, Any], index: int = 0) -> ImportDocument:
    return ImportDocument(index, {"apiVersion": V1, "kind": kind, "metadata": {"name": name}, "spec": spec})


def translate(*docs: ImportDocument) -> tuple[list[dict[str, Any]], list[ReportLine]]:
    context = ImportContext(ImportOptions(), docs)
    objects: list[dict[str, Any]] = []
    lines: list[ReportLine] = []
    for item in docs:
        emitted, report = TRANSLATORS[(V1, item.kind)](item, context)
        objects.extend(emitted)
        lines.extend(report)
    return objects, lines


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def engine(objects: list[dict[str, Any]]) -> dict[str, Any]:
    serving = by_kind(objects, "ModelServing")[0]
    container: dict[str, Any] = serving["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
    return container


@pytest.mark.parametrize(
    ("source", "files", "expected"),
    [
        ("hf://org/repo", [], ("hf://org/repo", [])),
        ("org/repo", ["a.gguf"], ("org/repo", ["a.gguf"])),
        ("s3://b/dir", ["s3://b/dir/x.gguf", "y.gguf"], ("s3://b/dir", ["x.gguf", "y.gguf"])),
        (None, ["https://h/r/resolve/main/a", "https://h/r/resolve/main/b"], ("https://h/r/resolve/main", ["a", "b"])),
        ("pvc://claim/path/model.gguf", [], ("pvc://claim/path/model.gguf", [])),
    ],
)
def test_staging_source(source: str | None, files: list[str], expected: tuple[str, list[str]]) -> None:
    assert staging_source(source, files) == expected


@pytest.mark.parametrize(
    ("source", "files"),
    [
        ("file:///mnt/models/m.gguf", []),
        ("/mnt/models/m.gguf", []),
        ("oci://registry/models/m@sha256:00", []),
        ("s3://b/dir", ["https://elsewhere/x.gguf"]),
        (None, []),
        (None, ["a.gguf"]),
        (None, ["https://h/a/x", "https://h/b/y"]),
    ],
)
def test_staging_source_refuses_what_a_job_cannot_fetch(source: str | None, files: list[str]) -> None:
    assert isinstance(staging_source(source, files), str)


@given(st.lists(st.from_regex(r"[a-z0-9]{1,8}\.gguf", fullmatch=True), min_size=1, max_size=5, unique=True))
def test_files_under_the_source_come_back_relative_in_order(names: list[str]) -> None:
    source = "s3://bucket/models"
    absolute = [f"{source}/{name}" if i % 2 else name for i, name in enumerate(names)]
    assert staging_source(source, absolute) == (source, names)


@pytest.mark.parametrize(
    ("vendor", "accelerator", "runtime", "override", "expected"),
    [
        ("nvidia", "", "", "", "nvidia.com/gpu"),
        ("amd", "", "", "", "amd.com/gpu"),
        ("amd", "", "vulkan", "", "devic.es/dri-render"),
        ("amd", "rocm", "", "", "devic.es/dri-render"),
        ("intel", "", "", "", "gpu.intel.com/i915"),
        ("nvidia", "vulkan", "", "", "nvidia.com/gpu"),
        ("amd", "", "rocm", "squat.ai/dri-render", "squat.ai/dri-render"),
    ],
)
def test_gpu_resource_name(vendor: str, accelerator: str, runtime: str, override: str, expected: str) -> None:
    assert resource_name(vendor, accelerator, runtime, override) == expected


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), min_size=1, max_size=8))
def test_layer_shares_count_each_range(pairs: list[tuple[int, int]]) -> None:
    ranges = [f"{min(a, b)}-{max(a, b)}" for a, b in pairs]
    assert layer_shares(ranges) == tuple(abs(a - b) + 1 for a, b in pairs)


@pytest.mark.parametrize("bad", ["0-", "15-0", "a-b", "7"])
def test_layer_shares_refuses_what_is_not_a_range(bad: str) -> None:
    assert isinstance(layer_shares(["0-3", bad]), str)


@pytest.mark.parametrize(
    ("priority", "explicit", "expected"),
    [(None, None, None), ("normal", None, None), ("high", None, "llmkube-high"), ("batch", "mine", "mine")],
)
def test_priority_class(priority: str | None, explicit: str | None, expected: str | None) -> None:
    assert priority_class(priority, explicit) == expected


def test_an_unknown_field_names_the_document_and_the_field() -> None:
    with pytest.raises(ImportFailure) as failure:
        translate(doc("Model", "m", {"source": "hf://o/r", "hardware": {"gpu": {"colour": "green"}}}))
    assert failure.value.path == "spec.hardware.gpu.colour"
    assert failure.value.source == "Model/default/m"
    assert "unknown field" in failure.value.message


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"modelRef": "m", "replicas": "two"}, "spec.replicas"),
        ({"modelRef": "m", "jinja": "yes"}, "spec.jinja"),
        ({"modelRef": "m", "endpoint": 8080}, "spec.endpoint"),
        ({"modelRef": "m", "extraArgs": "--seed 1"}, "spec.extraArgs"),
        ({"modelRef": "m", "runtime": "ollama"}, "spec.runtime"),
        ({"runtime": "llamacpp"}, "spec.modelRef"),
        ({"modelRef": "m", "runtime": "generic"}, "spec.image"),
    ],
)
def test_bad_inferenceservice_values_name_the_field(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(ImportFailure) as failure:
        translate(doc("InferenceService", "s", spec))
    assert failure.value.path == path


def test_a_knob_of_another_runtime_is_reported_dropped_and_not_written() -> None:
    objects, lines = translate(doc("InferenceService", "s", {"modelRef": "m", "runtime": "vllm", "contextSize": 4096}))
    line = next(line for line in lines if line.path == "spec.contextSize")
    assert (line.outcome, line.target) == ("dropped", "")
    assert "llamacpp" in line.note
    assert "--ctx-size" not in engine(objects)["args"]


def test_flash_attention_false_is_written_off() -> None:
    objects, _ = translate(doc("InferenceService", "s", {"modelRef": "m", "flashAttention": False}))
    args = engine(objects)["args"]
    assert args[args.index("--flash-attn") + 1] == "off"


def test_without_a_model_in_the_input_the_service_is_still_gated_on_its_name() -> None:
    objects, _ = translate(doc("InferenceService", "s", {"modelRef": "m"}))
    serving = by_kind(objects, "ModelServing")[0]
    assert serving["metadata"]["annotations"]["serving.kthena-py.io/model-cache"] == "m"
    assert engine(objects)["image"] == "ghcr.io/ggml-org/llama.cpp:server"
    assert "resources" not in engine(objects)


def test_a_pool_member_gets_no_autoscaling_policy() -> None:
    service = doc("InferenceService", "a", {"modelRef": "m", "autoscaling": {"maxReplicas": 3}}, index=0)
    pool = doc("ModelPool", "p", {"members": [{"inferenceServiceRef": {"name": "a"}}]}, index=1)
    objects, lines = translate(service, pool)
    assert by_kind(objects, "AutoscalingPolicy") == []
    line = next(line for line in lines if line.path == "spec.autoscaling.maxReplicas")
    assert line.outcome == "dropped" and "ModelPool p" in line.note
    assert by_kind(objects, "ModelPool")[0]["spec"]["members"] == [{"modelServingRef": {"name": "a"}}]
    assert by_kind(objects, "ModelServing")[0]["spec"]["replicas"] == 0


def test_vllm_without_metrics_scales_on_a_metric_vllm_exports() -> None:
    service = doc("InferenceService", "a", {"modelRef": "m", "runtime": "vllm", "autoscaling": {"maxReplicas": 2}})
    objects, lines = translate(service)
    policy = by_kind(objects, "AutoscalingPolicy")[0]["spec"]
    assert policy["metrics"] == [{"name": "vllm:num_requests_running", "targetValue": "2"}]
    assert policy["homogeneousTarget"]["target"]["metricSources"]["vllm:num_requests_running"]["pod"]["port"] == 8000
    line = next(line for line in lines if line.path == "spec.autoscaling.maxReplicas")
    assert line.outcome == "mapped" and "vllm:num_requests_running" in line.note


def test_only_resource_metrics_means_no_policy() -> None:
    metrics = [{"name": "cpu", "type": "Resource", "targetAverageUtilization": 70}]
    service = doc("InferenceService", "a", {"modelRef": "m", "autoscaling": {"maxReplicas": 3, "metrics": metrics}})
    objects, lines = translate(service)
    assert by_kind(objects, "AutoscalingPolicy") == []
    assert {line.outcome for line in lines if line.path.startswith("spec.autoscaling.")} == {"dropped"}


def test_no_metrics_means_llmkube_default_metric() -> None:
    objects, _ = translate(doc("InferenceService", "a", {"modelRef": "m", "autoscaling": {"maxReplicas": 2}}))
    policy = by_kind(objects, "AutoscalingPolicy")[0]["spec"]
    assert policy["metrics"] == [{"name": "llamacpp:requests_processing", "targetValue": "2"}]
    assert policy["homogeneousTarget"]["minReplicas"] == 1


@pytest.mark.parametrize(
    "members",
    [[], [{"inferenceServiceRef": {"name": ""}}], [{"inferenceServiceRef": {"name": "a"}}] * 2],
)
def test_bad_pool_members_are_refused(members: list[dict[str, Any]]) -> None:
    with pytest.raises(ImportFailure) as failure:
        translate(doc("ModelPool", "p", {"members": members}))
    assert failure.value.path.startswith("spec.members")


def test_a_model_claim_becomes_the_cache_storage_and_prefetch_defaults_to_false() -> None:
    objects, _ = translate(doc("Model", "m", {"source": "hf://o/r", "modelCache": {"claimName": "models"}}))
    spec = objects[0]["spec"]
    assert spec["storage"] == {"persistentVolumeClaim": {"claimName": "models"}}
    assert spec["prefetch"] is False


def test_llamacpp_splits_across_gpus_only_with_more_than_one() -> None:
    sharding = {"strategy": "row", "layerSplit": ["0-9", "10-31"]}
    model = doc("Model", "m", {"source": "hf://o/r", "hardware": {"gpu": {"count": 2, "sharding": sharding}}}, 0)
    for count, expected in ((1, None), (2, ["--split-mode", "row", "--tensor-split", "10,22"])):
        service = doc("InferenceService", "s", {"modelRef": "m", "resources": {"gpu": count}}, 1)
        args = engine(translate(model, service)[0])["args"]
        if expected is None:
            assert "--split-mode" not in args and "--tensor-split" not in args
        else:
            at = args.index("--split-mode")
            assert args[at : at + 4] == expected
