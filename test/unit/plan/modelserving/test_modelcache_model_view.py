"""``kthena-py status`` shows what a gated ModelServing's cache holds: architecture, context length, quantization."""

from __future__ import annotations

from typing import Any

from kthena_py.plan.modelserving.view import build_view, render_text, status_document
from kthena_py.vocab.labels import MODEL_CACHE

from .builders import NOW, ms_doc, role_doc


def _cache(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "llama-3", "namespace": "ns", "generation": 1},
        "spec": {"source": "hf://meta/llama-3", "storage": {"persistentVolumeClaim": {"claimName": "models"}}},
        "status": {"phase": "Ready", "observedGeneration": 1, **status},
    }


GATED = ms_doc(role_doc("prefill"), annotations={MODEL_CACHE: "llama-3"})


def test_the_gguf_summary_is_shown_under_the_cache() -> None:
    gguf = {"architecture": "llama", "contextLength": 4096, "quantization": "Q4_K_M", "layerCount": 22}
    view = build_view(GATED, [], now=NOW, model_cache=_cache({"gguf": gguf}))
    lines = render_text(view, ages=False).splitlines()
    at = next(i for i, line in enumerate(lines) if "ModelCache llama-3: Ready" in line)
    assert lines[at + 1] == "    model: llama, 4096 ctx, Q4_K_M"
    assert status_document(view)["modelCache"]["model"] == "llama, 4096 ctx, Q4_K_M"


def test_a_safetensors_model_shows_its_config() -> None:
    config = {"architecture": "LlamaForCausalLM", "contextLength": 8192, "torchDtype": "bfloat16"}
    view = build_view(GATED, [], now=NOW, model_cache=_cache({"modelConfig": config}))
    assert "    model: LlamaForCausalLM, 8192 ctx, bfloat16" in render_text(view, ages=False).splitlines()


def test_a_cache_without_metadata_shows_no_model_line() -> None:
    view = build_view(GATED, [], now=NOW, model_cache=_cache({}))
    assert "model:" not in render_text(view, ages=False)
    assert status_document(view)["modelCache"]["model"] == ""
    missing = build_view(GATED, [], now=NOW)
    assert "model:" not in render_text(missing, ages=False)
