"""config.json -> ConfigInfo: the fields, where the context length hides, and odd input that must not raise."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.modelmeta.hfconfig import MAX_INFO_TEXT, ConfigInfo, config_info

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
    "hidden_size": 4096,
}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (LLAMA, ConfigInfo("LlamaForCausalLM", "llama", 8192, "bfloat16")),
        (
            {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": 1024},
            ConfigInfo("GPT2LMHeadModel", "gpt2", 1024),
        ),
        ({"model_type": "mpt", "max_seq_len": 2048}, ConfigInfo(None, "mpt", 2048)),
        ({"model_type": "chatglm", "seq_length": 32768}, ConfigInfo(None, "chatglm", 32768)),
        ({"max_sequence_length": 4096}, ConfigInfo(context_length=4096)),
        ({"max_position_embeddings": 4096, "n_positions": 1024}, ConfigInfo(context_length=4096)),
        ({"max_position_embeddings": 0, "n_positions": 1024}, ConfigInfo(context_length=1024)),
        ({"max_position_embeddings": 2048.0}, ConfigInfo(context_length=2048)),
        (
            {
                "architectures": ["Gemma3ForConditionalGeneration"],
                "model_type": "gemma3",
                "text_config": {"max_position_embeddings": 131072, "model_type": "gemma3_text"},
                "vision_config": {"max_position_embeddings": 999},
            },
            ConfigInfo("Gemma3ForConditionalGeneration", "gemma3", 131072),
        ),
        (
            {"max_position_embeddings": 512, "text_config": {"max_position_embeddings": 4096}},
            ConfigInfo(context_length=512),
        ),
        ({"dtype": "float16"}, ConfigInfo(torch_dtype="float16")),
        ({"torch_dtype": "float32", "dtype": "float16"}, ConfigInfo(torch_dtype="float32")),
    ],
)
def test_config_fields(config: dict[str, Any], expected: ConfigInfo) -> None:
    assert config_info(config) == expected


@pytest.mark.parametrize(
    "config",
    [
        None,
        [],
        "config",
        42,
        {},
        {"architectures": "LlamaForCausalLM"},
        {"architectures": []},
        {"architectures": [7]},
        {"architectures": ["  "]},
        {"model_type": ["llama"]},
        {"max_position_embeddings": True},
        {"max_position_embeddings": -1},
        {"max_position_embeddings": "4096"},
        {"max_position_embeddings": 4096.5},
        {"max_position_embeddings": float("inf")},
        {"max_position_embeddings": float("nan")},
        {"max_position_embeddings": 2**80},
        {"text_config": "x"},
        {"text_config": {"max_position_embeddings": None}},
        {"torch_dtype": {"x": 1}},
    ],
)
def test_odd_input_gives_empty_fields(config: Any) -> None:
    info = config_info(config)
    assert info == ConfigInfo() and info.empty and info.to_json() == {}


def test_json_is_camel_case_without_none() -> None:
    assert config_info(LLAMA).to_json() == {
        "architecture": "LlamaForCausalLM",
        "modelType": "llama",
        "contextLength": 8192,
        "torchDtype": "bfloat16",
    }
    assert config_info({"model_type": "llama"}).to_json() == {"modelType": "llama"}


def test_long_strings_are_cut() -> None:
    assert config_info({"model_type": "m" * 1000}).model_type == "m" * MAX_INFO_TEXT


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)
KEYS = st.sampled_from(
    ["architectures", "model_type", "max_position_embeddings", "n_positions", "torch_dtype", "text_config", "dtype"]
)


@given(st.one_of(JSON, st.dictionaries(KEYS, JSON, max_size=7)))
def test_any_json_gives_a_config_info_with_sane_fields(config: Any) -> None:
    info = config_info(config)
    assert info.context_length is None or info.context_length > 0
    for text in (info.architecture, info.model_type, info.torch_dtype):
        assert text is None or (isinstance(text, str) and 0 < len(text) <= MAX_INFO_TEXT)
