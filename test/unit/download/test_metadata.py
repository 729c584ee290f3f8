"""Model metadata in the download result: attached after staging, never failing it, dropped first when long."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download.metadata import MAX_ERROR_CHARS, attach_metadata, metadata_document
from kthena_py.download.result import RESULT_LIMIT, FileEntry, Outcome, Reason, render_result
from kthena_py.modelmeta.inspect import ModelMetadata
from kthena_py.testing.artifacts.gguf import llama_like

from .conftest import run_download

GGUF_DOC = {
    "fileVersion": 3,
    "architecture": "llama",
    "modelName": "Tiny Llama",
    "license": "apache-2.0",
    "contextLength": 4096,
    "embeddingSize": 2048,
    "layerCount": 22,
    "headCount": 32,
    "headCountKV": 4,
    "quantization": "Q4_K_M",
    "tensorCount": 201,
}
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 4096}


def _outcome(count: int, metadata: dict[str, object], message: str = "downloaded and verified") -> Outcome:
    files = tuple(FileEntry(f"model-{i:05d}-of-00400.safetensors", i, f"{i:064x}") for i in range(count))
    return Outcome(Reason.SUCCEEDED, message, "hf://org/m", "/models/x", "c" * 40, files, metadata=metadata)


def test_small_results_carry_the_metadata_whole() -> None:
    doc = json.loads(render_result(_outcome(3, {"gguf": GGUF_DOC, "modelConfig": {"modelType": "llama"}})))
    assert doc["gguf"] == GGUF_DOC and doc["modelConfig"] == {"modelType": "llama"}
    assert len(doc["files"]) == 3 and "filesOmitted" not in doc


def test_the_metadata_goes_before_any_file() -> None:
    # Find the largest file count that fits with the metadata; one more file drops the metadata, not a file.
    fits = max(n for n in range(60) if "gguf" in json.loads(render_result(_outcome(n, {"gguf": GGUF_DOC}))))
    bigger = json.loads(render_result(_outcome(fits + 1, {"gguf": GGUF_DOC})))
    assert "gguf" not in bigger and len(bigger["files"]) == fits + 1 and "filesOmitted" not in bigger


@given(
    count=st.integers(0, 200),
    message=st.text(max_size=3000),
    error=st.text(max_size=MAX_ERROR_CHARS),
    with_gguf=st.booleans(),
)
def test_results_with_metadata_always_fit_and_never_lose_a_file_for_it(
    count: int, message: str, error: str, with_gguf: bool
) -> None:
    metadata: dict[str, object] = {"metadataError": error}
    if with_gguf:
        metadata["gguf"] = GGUF_DOC
    text = render_result(_outcome(count, metadata, message))
    assert len(text.encode()) <= RESULT_LIMIT
    doc = json.loads(text)
    if "metadataError" in doc:
        assert len(doc["files"]) == count and doc["message"] == message
    assert ("gguf" in doc) == ("metadataError" in doc and with_gguf)


def test_the_document_has_camel_case_objects_and_a_short_error() -> None:
    assert metadata_document(ModelMetadata()) == {}
    long = ModelMetadata(errors=("x" * 1000, "second"))
    assert metadata_document(long) == {"metadataError": "x" * (MAX_ERROR_CHARS - 3) + "..."}


async def test_attach_reads_the_staged_gguf_and_config(tmp_path: Path) -> None:
    (tmp_path / "tiny-Q4_K_M.gguf").write_bytes(llama_like(trailer=b"\0" * 1000))
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    entries = (FileEntry("config.json", 1, "a" * 64), FileEntry("tiny-Q4_K_M.gguf", 1, "b" * 64))
    outcome = Outcome(Reason.SUCCEEDED, "ok", "s", str(tmp_path), files=entries)
    attached = await attach_metadata(outcome)
    assert attached.metadata == {
        "gguf": GGUF_DOC,
        "modelConfig": {"architecture": "LlamaForCausalLM", "modelType": "llama", "contextLength": 4096},
    }
    failed = Outcome(Reason.INTEGRITY_CHECK_FAILED, "bad", "s", str(tmp_path), files=entries)
    assert await attach_metadata(failed) is failed


async def test_a_broken_header_is_a_short_error_and_still_a_success(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(llama_like()[:100])
    outcome = Outcome(Reason.SUCCEEDED, "ok", "s", str(tmp_path), files=(FileEntry("m.gguf", 100, "b" * 64),))
    attached = await attach_metadata(outcome)
    assert attached.succeeded and attached.exit_code == 0
    assert list(attached.metadata) == ["metadataError"]
    assert attached.metadata["metadataError"].startswith("m.gguf: truncated")


async def test_the_downloader_reports_the_metadata_fresh_and_cached(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "tiny-Q4_K_M.gguf").write_bytes(llama_like(file_type=None, trailer=b"\1" * 50_000))
    (src / "config.json").write_text(json.dumps(CONFIG))
    out = str(tmp_path / "out")
    first = await run_download(["-s", str(src), "-o", out])
    assert first.code == 0, first.output
    assert first.result["gguf"]["quantization"] == "Q4_K_M"  # from the file name: no general.file_type
    assert first.result["gguf"]["architecture"] == "llama" and first.result["gguf"]["contextLength"] == 4096
    assert first.result["modelConfig"]["architecture"] == "LlamaForCausalLM"
    again = await run_download(["-s", str(src), "-o", out])
    assert again.code == 0 and again.result["cached"] is True
    assert again.result["gguf"] == first.result["gguf"] and again.result["modelConfig"] == first.result["modelConfig"]


async def test_a_model_that_is_not_gguf_has_no_metadata_and_no_error(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.safetensors").write_bytes(b"\0" * 100)
    run = await run_download(["-s", str(src), "-o", str(tmp_path / "out")])
    assert run.code == 0
    assert not {"gguf", "modelConfig", "metadataError"} & set(run.result)
