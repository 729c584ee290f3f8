"""Which GGUF describes a staged model, and reading a staged directory (bounded, never raising)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kthena_py.modelmeta.hfconfig import ConfigInfo
from kthena_py.modelmeta.inspect import MAX_CONFIG_BYTES, inspect_model, primary_gguf
from kthena_py.testing.artifacts.gguf import llama_like


@pytest.mark.parametrize(
    ("names", "requested", "primary"),
    [
        ([], (), None),
        (["config.json", "model.safetensors"], (), None),
        (["model-Q4_K_M.gguf"], (), "model-Q4_K_M.gguf"),
        (["README.md", "sub/model.GGUF"], (), "sub/model.GGUF"),
        (["a-Q4_K_M.gguf", "a-Q8_0.gguf"], (), None),
        (["a-Q4_K_M.gguf", "a-Q8_0.gguf"], ("a-Q8_0.gguf",), "a-Q8_0.gguf"),
        (["a-Q4_K_M.gguf", "a-Q8_0.gguf"], ("README.md", "*Q4_K_M*"), "a-Q4_K_M.gguf"),
        (["m-00002-of-00003.gguf", "m-00001-of-00003.gguf", "m-00003-of-00003.gguf"], (), "m-00001-of-00003.gguf"),
        (
            ["q4/m-00001-of-00002.gguf", "q4/m-00002-of-00002.gguf", "q8/m-00001-of-00002.gguf"],
            ("q8/*",),
            "q8/m-00001-of-00002.gguf",
        ),
        (["q4/m-00001-of-00002.gguf", "q8/m-00001-of-00002.gguf"], (), None),
        (["mmproj-model-f16.gguf", "model-Q4_K_M.gguf"], (), "model-Q4_K_M.gguf"),
        (["mmproj-model-f16.gguf"], (), "mmproj-model-f16.gguf"),
        (["model-Q4_K_M.gguf"], ("*.safetensors",), "model-Q4_K_M.gguf"),
    ],
)
def test_primary_gguf(names: list[str], requested: Sequence[str], primary: str | None) -> None:
    assert primary_gguf(names, requested) == primary


def _stage(root: Path, files: dict[str, bytes]) -> list[str]:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return list(files)


def test_a_gguf_and_a_config_are_both_read(tmp_path: Path) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 2048}
    names = _stage(
        tmp_path,
        {
            "tiny-Q4_K_M.gguf": llama_like(file_type=None, trailer=b"\0" * 10_000),
            "config.json": json.dumps(config).encode(),
        },
    )
    found = inspect_model(str(tmp_path), names)
    assert found.errors == ()
    assert found.gguf is not None and found.gguf.architecture == "llama" and found.gguf.quantization == "Q4_K_M"
    assert found.config == ConfigInfo("LlamaForCausalLM", "llama", 2048)


def test_unreadable_files_are_reported_not_raised(tmp_path: Path) -> None:
    names = _stage(tmp_path, {"model.gguf": b"GGUF\x03\0\0\0" + b"\0" * 5, "config.json": b"{not json"})
    found = inspect_model(str(tmp_path), names)
    assert found.gguf is None and found.config is None
    assert len(found.errors) == 2
    assert found.errors[0].startswith("model.gguf: truncated") and "(at byte 8)" in found.errors[0]
    assert found.errors[1].startswith("config.json: not JSON")


def test_a_missing_file_and_an_oversized_config_are_reported(tmp_path: Path) -> None:
    names = _stage(tmp_path, {"config.json": b" " * (MAX_CONFIG_BYTES + 1)})
    found = inspect_model(str(tmp_path), [*names, "gone.gguf"])
    assert found.gguf is None and found.config is None
    assert found.errors[0].startswith("gone.gguf: ")
    assert "over the 1048576-byte cap" in found.errors[1]


def test_a_config_that_says_nothing_is_no_config(tmp_path: Path) -> None:
    names = _stage(tmp_path, {"config.json": b'{"hidden_size": 8}', "model.safetensors": b"x"})
    assert inspect_model(str(tmp_path), names) == inspect_model(str(tmp_path), [])


def test_a_nested_config_json_is_not_the_models(tmp_path: Path) -> None:
    names = _stage(tmp_path, {"sub/config.json": b'{"model_type": "x"}'})
    assert inspect_model(str(tmp_path), names).config is None


def test_a_config_nested_too_deep_for_the_json_reader_is_reported(tmp_path: Path) -> None:
    names = _stage(tmp_path, {"config.json": b"[" * 200_000})
    found = inspect_model(str(tmp_path), names)
    assert found.config is None and found.errors[0].startswith("config.json: not JSON")
