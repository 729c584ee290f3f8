"""Properties of the KubeAI translator over generated Models: valid output, a complete report, origin on all."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.validation import validate_document
from kthena_py.importers.context import ImportOptions
from kthena_py.importers.kubeai import FIELD_TABLES
from kthena_py.importers.report import ImportFailure
from kthena_py.importers.translate import translate
from kthena_py.vocab.labels import ACTIVATOR_SCALE_FROM_ZERO, IMPORTED_PEER, MODEL_CACHE

RULES = {rule.path for rule in FIELD_TABLES[("kubeai.org/v1", "Model")]}
NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True)
ARGS = st.lists(st.from_regex(r"--[a-z]{1,8}=[a-z0-9]{1,5}", fullmatch=True), max_size=3)
ENV = st.dictionaries(st.from_regex(r"[A-Z][A-Z_]{0,8}", fullmatch=True), st.text(max_size=5), max_size=3)


@st.composite
def models(draw: st.DrawFn) -> dict[str, Any]:
    engine = draw(st.sampled_from(["VLLM", "OLlama", "FasterWhisper", "Infinity"]))
    spec: dict[str, Any] = {"engine": engine, "features": ["TextGeneration"]}
    if engine == "OLlama":
        spec["url"] = "ollama://" + draw(NAMES)
    else:
        scheme = draw(st.sampled_from(["hf", "pvc", "s3", "gs", "oss"]))
        spec["url"] = f"{scheme}://{draw(NAMES)}/{draw(NAMES)}"
        if scheme != "pvc" and (scheme != "hf" or draw(st.booleans())):
            spec["cacheProfile"] = draw(NAMES)
        if engine == "VLLM" and draw(st.booleans()):
            spec["adapters"] = [
                {"name": n, "url": f"hf://org/{n}"} for n in draw(st.lists(NAMES, max_size=3, unique=True))
            ]
    optional = {
        "resourceProfile": st.sampled_from(["cpu", "nvidia-gpu-l4", "nvidia-gpu-h100"]).map(
            lambda p: f"{p}:{draw(st.integers(1, 8))}"
        ),
        "image": st.just("registry.local/engine:1"),
        "args": ARGS,
        "env": ENV,
        "replicas": st.integers(0, 2**31 - 1),
        "autoscalingDisabled": st.booleans(),
        "targetRequests": st.one_of(st.integers(1, 500), st.integers(2**31 - 10, 2**31 - 1)),
        "scaleDownDelaySeconds": st.one_of(st.integers(0, 30), st.integers(1799, 2**62)),
        "owner": NAMES,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            spec[key] = draw(strategy)
    low = draw(st.one_of(st.integers(0, 3), st.integers(10**6 - 1, 2**31 - 1)))
    if draw(st.booleans()):
        spec["minReplicas"] = low
    if draw(st.booleans()):
        spec["maxReplicas"] = draw(
            st.one_of(st.integers(max(low, 1), max(low, 10)), st.integers(max(low, 10**6 - 1), 2**31 - 1))
        )
    metadata = {"name": draw(NAMES), "namespace": draw(NAMES)}
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": metadata, "spec": spec}


def _present(body: dict[str, Any]) -> set[str]:
    paths = {"apiVersion", "kind"} | {f"metadata.{key}" for key in body["metadata"]}
    for key, value in body["spec"].items():
        if key == "adapters":
            paths |= {f"spec.adapters[].{field}" for item in value for field in item}
        else:
            paths.add(f"spec.{key}")
    return paths


@given(models())
def test_every_model_translates_to_valid_objects_with_a_complete_report(model: dict[str, Any]) -> None:
    translation = translate("kubeai", [model], ImportOptions())
    reported = [line.path for line in translation.report]
    assert sorted(reported) == sorted(_present(model))
    assert set(reported) <= RULES
    for obj in translation.objects:
        assert validate_document(obj) == [], obj
        assert obj["metadata"]["labels"][IMPORTED_PEER] == "kubeai"  # type: ignore[index]
    kinds = [obj["kind"] for obj in translation.objects]
    spec = model["spec"]
    assert kinds.count("ModelCache") == int("cacheProfile" in spec)
    assert kinds.count("AutoscalingPolicy") == int(not spec.get("autoscalingDisabled"))
    annotations: Any = translation.objects[0]["metadata"]["annotations"]  # type: ignore[index]
    assert (MODEL_CACHE in annotations) == ("cacheProfile" in spec)
    opted_in = not spec.get("autoscalingDisabled") and spec.get("minReplicas", 0) == 0
    assert (ACTIVATOR_SCALE_FROM_ZERO in annotations) == opted_in


@given(models(), NAMES)
def test_namespace_override_moves_everything(model: dict[str, Any], namespace: str) -> None:
    translation = translate("kubeai", [model], ImportOptions(namespace=namespace))
    assert {obj["metadata"]["namespace"] for obj in translation.objects} == {namespace}  # type: ignore[index]
    assert {line.source for line in translation.report} == {f"Model/{namespace}/{model['metadata']['name']}"}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@given(models(), st.data())
def test_a_field_of_any_value_translates_validly_or_fails_naming_a_field(
    model: dict[str, Any], data: st.DataObject
) -> None:
    section = data.draw(st.sampled_from(["spec", "metadata", "top"]))
    target = model if section == "top" else model[section]
    key = data.draw(st.sampled_from(sorted(target)))
    target[key] = data.draw(JSON_VALUES)
    try:
        translation = translate("kubeai", [model], ImportOptions())
    except ImportFailure as failure:
        assert failure.document == 0
        assert failure.path, failure
        assert failure.message
        return
    for obj in translation.objects:
        assert validate_document(obj) == [], (model, obj)


def test_a_name_the_peer_accepts_but_a_modelserving_cannot_carry_fails_naming_it() -> None:
    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "0", "namespace": "a"},
        "spec": {"engine": "VLLM", "url": "hf://org/model", "features": ["TextGeneration"], "resourceProfile": "cpu:1"},
    }
    with pytest.raises(ImportFailure) as caught:
        translate("kubeai", [model], ImportOptions())
    assert caught.value.path == "metadata.name" and "DNS-1035" in caught.value.message
