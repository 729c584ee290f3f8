"""Model metadata on the controller's side: the result's gguf/modelConfig read tolerantly, into the status (kept
while the pod is gone, not across a spec change), and the one-line summary ``kthena-py status`` shows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.modelcache import GGUFMetadata, ModelCache, ModelCacheStatus, ModelConfigMetadata
from kthena_py.download.result import FileEntry, Outcome, Reason, render_result
from kthena_py.plan.modelcache import ClaimView, Observed, PlanSettings, plan_cache
from kthena_py.plan.modelcache.metadata import (
    MAX_TEXT,
    describe_model,
    gguf_of,
    metadata_status,
    model_config_of,
    model_labels,
)
from kthena_py.plan.modelcache.result import parse_result

from .builders import cache, job, result

GGUF = {
    "fileVersion": 3,
    "architecture": "llama",
    "modelName": "Tiny Llama",
    "license": "apache-2.0",
    "contextLength": 4096,
    "embeddingSize": 2048,
    "layerCount": 22,
    "headCount": 32,
    "headCountKV": 4,
    "keyLength": 64,
    "valueLength": 64,
    "quantization": "Q4_K_M",
    "tensorCount": 201,
}
CONFIG = {"architecture": "LlamaForCausalLM", "modelType": "llama", "contextLength": 8192, "torchDtype": "bfloat16"}
CLAIM = ClaimView("models", "Bound", False)


def test_the_downloaders_metadata_reaches_the_download_result() -> None:
    outcome = Outcome(
        Reason.SUCCEEDED,
        "ok",
        "hf://org/m",
        "/m",
        files=(FileEntry("m.gguf", 5, "a" * 64),),
        metadata={"gguf": GGUF, "modelConfig": CONFIG, "metadataError": "config.json: not JSON"},
    )
    parsed = parse_result(render_result(outcome))
    assert parsed is not None and parsed.ok
    assert parsed.gguf == GGUFMetadata.model_validate(GGUF)
    assert parsed.model_config == ModelConfigMetadata.model_validate(CONFIG)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, None),
        ("llama", None),
        ([GGUF], None),
        ({}, None),
        ({"architecture": 7, "contextLength": "4096", "headCount": [32, 32]}, None),
        ({"architecture": "llama", "contextLength": -1}, {"architecture": "llama"}),
        ({"contextLength": 4096.0, "layerCount": True}, {"contextLength": 4096}),
        ({"contextLength": 2**60, "tensorCount": 1.5}, None),
        ({"quantization": "  Q8_0 ", "license": ""}, {"quantization": "Q8_0"}),
        ({"modelName": "n" * 500}, {"modelName": "n" * MAX_TEXT}),
        ({**GGUF, "unknownKey": 1}, GGUF),
    ],
)
def test_gguf_is_read_field_by_field(data: Any, expected: dict[str, Any] | None) -> None:
    found = gguf_of(data)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.model_dump(by_alias=True, exclude_none=True) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, None),
        ({"architecture": ["x"]}, None),
        (CONFIG, CONFIG),
        ({"modelType": "gpt2", "contextLength": "1024"}, {"modelType": "gpt2"}),
    ],
)
def test_model_config_is_read_field_by_field(data: Any, expected: dict[str, Any] | None) -> None:
    found = model_config_of(data)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.model_dump(by_alias=True, exclude_none=True) == expected


@given(
    st.dictionaries(
        st.sampled_from([*GGUF, *CONFIG, "x"]),
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text(max_size=200)
        | st.lists(st.integers(), max_size=2),
    )
)
def test_any_result_object_gives_valid_status_models(data: dict[str, Any]) -> None:
    status = metadata_status(gguf_of(data), model_config_of(data))
    ModelCacheStatus.model_validate(status)  # what the status subresource will hold must be a valid status


@pytest.mark.parametrize(
    ("gguf", "config", "text"),
    [
        (GGUF, CONFIG, "llama, 4096 ctx, Q4_K_M"),
        (None, CONFIG, "LlamaForCausalLM, 8192 ctx, bfloat16"),
        ({"architecture": "qwen2"}, None, "qwen2"),
        ({"quantization": "Q8_0"}, {"modelType": "x"}, "Q8_0"),
        ({"tensorCount": 3}, {"modelType": "gpt2", "contextLength": 1024}, "gpt2, 1024 ctx"),
        (None, None, ""),
    ],
)
def test_describe_model(gguf: dict[str, Any] | None, config: dict[str, Any] | None, text: str) -> None:
    assert describe_model(gguf_of(gguf), model_config_of(config)) == text


def _plan(mc: ModelCache, *jobs: Any, now: float = 1000.0) -> dict[str, Any]:
    return plan_cache(mc, Observed(jobs=tuple(jobs), claim=CLAIM), PlanSettings(), now).status


def test_a_ready_cache_shows_the_metadata_and_keeps_it_while_the_pod_is_gone() -> None:
    mc = cache()
    done = job(mc, "succeeded", pod_phase="Succeeded", message=result(gguf=GGUF, modelConfig=CONFIG))
    status = _plan(mc, done)
    assert status["phase"] == "Ready"
    assert status["gguf"] == GGUF and status["modelConfig"] == CONFIG
    settled = cache(status=status)
    gone = _plan(settled, job(mc, "succeeded", pod_phase=None), now=5000.0)
    assert gone["gguf"] == GGUF and gone["modelConfig"] == CONFIG
    # A new spec (another fingerprint) stages again: the old model's metadata is not carried over.
    changed = cache(status=status, revision="v2")
    assert "gguf" not in _plan(changed) and "modelConfig" not in _plan(changed)


def test_a_result_without_metadata_gives_a_status_without_it() -> None:
    mc = cache()
    status = _plan(mc, job(mc, "succeeded", pod_phase="Succeeded", message=result(metadataError="m.gguf: bad")))
    assert status["phase"] == "Ready" and "gguf" not in status and "modelConfig" not in status


@pytest.mark.parametrize(
    ("status", "labels"),
    [
        ({}, None),
        ({"gguf": GGUF, "modelConfig": CONFIG}, ("llama", "Q4_K_M", "4096")),
        ({"modelConfig": CONFIG}, ("LlamaForCausalLM", "bfloat16", "8192")),
        ({"modelConfig": {"modelType": "gpt2"}}, ("gpt2", "", "")),
        ({"gguf": {"tensorCount": 3}}, ("", "", "")),
        ({"gguf": "broken"}, None),
    ],
)
def test_model_labels(status: dict[str, Any], labels: tuple[str, str, str] | None) -> None:
    assert model_labels(status) == labels


def test_modelmeta_json_and_the_api_models_have_the_same_fields() -> None:
    """The downloader writes modelmeta's JSON; the controller reads it into the API's models: same keys, all of them."""
    import dataclasses

    from kthena_py.modelmeta import ConfigInfo, GGUFInfo

    info = GGUFInfo(**{f.name: 1 if f.type == "int | None" else "x" for f in dataclasses.fields(GGUFInfo)})
    gguf_json = info.to_json()
    assert set(gguf_json) == {f.alias or name for name, f in GGUFMetadata.model_fields.items()}
    assert gguf_of(gguf_json) == GGUFMetadata.model_validate(gguf_json)
    config = ConfigInfo("A", "a", 1, "bfloat16")
    assert set(config.to_json()) == {f.alias or name for name, f in ModelConfigMetadata.model_fields.items()}
    assert model_config_of(config.to_json()) == ModelConfigMetadata.model_validate(config.to_json())
