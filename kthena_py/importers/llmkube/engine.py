"""The engine container of an imported InferenceService: image, command line and port, per runtime.

Guarantees (pure functions of the InferenceService, its Model and the GPU request):

* llamacpp, vllm and tgi get their server's flags from the typed knobs, in the table's order, with the
  InferenceService's ``extraArgs`` last (llamacpp and vllm only); a knob of another runtime is never written.
  llama.cpp's split across GPUs (``--split-mode``, ``--tensor-split``) is written only for more than one GPU,
  as LLMKube's sharding applies only then.
* personaplex and generic keep the image's entrypoint: ``command``/``args`` as given (``args`` only for generic,
  as LLMKube), plus the PersonaPlex switches.
* The model is read from the ModelCache mount (``$(KTHENA_MODEL_PATH)``, set by the serving gate) unless the
  service skips the model init.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kthena_py.importers.context import ImportDocument
from kthena_py.importers.documents import boolean, field, integer, string, string_list
from kthena_py.importers.llmkube.gpu import GpuRequest
from kthena_py.importers.report import ImportFailure

__all__ = [
    "DEFAULT_PORTS",
    "MODEL_PATH",
    "RUNTIMES",
    "EngineCommand",
    "default_image",
    "engine_command",
    "model_path",
]

RUNTIMES = ("llamacpp", "personaplex", "vllm", "tgi", "generic")
DEFAULT_PORTS = {"llamacpp": 8080, "vllm": 8000, "tgi": 8080, "personaplex": 8998, "generic": 8080}
MODEL_PATH = "$(KTHENA_MODEL_PATH)"
"""The ModelCache mount as the serving gate announces it to the engine (expanded by the kubelet)."""

_LLAMACPP_IMAGE = "ghcr.io/ggml-org/llama.cpp"
_LLAMACPP_VARIANT = {
    "cuda": "server-cuda",
    "rocm": "server-rocm",
    "vulkan": "server-vulkan",
    "intel": "server-intel",
    "cpu": "server",
}
_VENDOR_VARIANT = {"nvidia": "cuda", "amd": "rocm", "intel": "intel"}
_IMAGES = {"vllm": "vllm/vllm-openai:latest", "tgi": "ghcr.io/huggingface/text-generation-inference:latest"}
_WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt")


@dataclass(frozen=True)
class EngineCommand:
    """The engine container's entrypoint override, arguments and extra environment."""

    command: list[str] | None
    args: list[str]
    env: list[dict[str, Any]]


def default_image(runtime: str, gpu: GpuRequest, vendor: str) -> str | None:
    """The public image of ``runtime`` (``None``: the runtime has none, the service must name one)."""
    if runtime == "llamacpp":
        tier = gpu.amd_runtime or gpu.accelerator
        if not tier and gpu.count > 0:
            tier = _VENDOR_VARIANT.get(vendor, "cuda")
        return f"{_LLAMACPP_IMAGE}:{_LLAMACPP_VARIANT.get(tier, 'server')}"
    return _IMAGES.get(runtime)


def model_path(model: ImportDocument | None, staged_files: list[str] | None) -> str:
    """Where the engine finds the model in the mounted cache: the primary file, or the cache's directory."""
    if staged_files:
        return f"{MODEL_PATH}/{staged_files[0]}"
    source = string(model, "spec.source") if model is not None else None
    if source and source.lower().endswith(_WEIGHT_SUFFIXES):
        return f"{MODEL_PATH}/{source.rsplit('/', 1)[-1]}"
    return MODEL_PATH


def number(doc: ImportDocument, path: str) -> float | None:
    """A number field (integers accepted, booleans refused)."""
    value = field(doc.body, path)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ImportFailure(doc.index, doc.source, path, f"expected a number, got {value!r}")


def _add(args: list[str], flag: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        if value:
            args.append(flag)
        return
    if isinstance(value, float):
        args.extend([flag, f"{value:g}"])
        return
    args.extend([flag, str(value)])


def _llamacpp(doc: ImportDocument, model_arg: str | None, port: int, gpu: GpuRequest, mmproj: str | None) -> list[str]:
    args: list[str] = []
    if model_arg:
        args.extend(["--model", model_arg])
    if mmproj:
        args.extend(["--mmproj", mmproj])
    args.extend(["--host", "0.0.0.0", "--port", str(port), "--metrics"])
    if gpu.count > 0 or gpu.layers is not None:
        _add(args, "--n-gpu-layers", gpu.layers if gpu.layers is not None else 999)
    if gpu.count > 1:
        _add(args, "--split-mode", gpu.split_mode)
        if gpu.tensor_split:
            args.extend(["--tensor-split", ",".join(str(share) for share in gpu.tensor_split)])
    _add(args, "--ctx-size", integer(doc, "spec.contextSize"))
    _add(args, "--batch-size", integer(doc, "spec.batchSize"))
    _add(args, "--ubatch-size", integer(doc, "spec.uBatchSize"))
    _add(args, "--parallel", integer(doc, "spec.parallelSlots"))
    flash = boolean(doc, "spec.flashAttention")
    if flash is not None:
        args.extend(["--flash-attn", "on" if flash else "off"])
    _add(args, "--jinja", boolean(doc, "spec.jinja"))
    _add(args, "--cache-type-k", string(doc, "spec.cacheTypeCustomK") or string(doc, "spec.cacheTypeK"))
    _add(args, "--cache-type-v", string(doc, "spec.cacheTypeCustomV") or string(doc, "spec.cacheTypeV"))
    _add(args, "--no-kv-offload", boolean(doc, "spec.noKvOffload"))
    _add(args, "--no-warmup", boolean(doc, "spec.noWarmup"))
    _add(args, "--cpu-moe", boolean(doc, "spec.moeCPUOffload"))
    _add(args, "--n-cpu-moe", integer(doc, "spec.moeCPULayers"))
    for entry in string_list(doc, "spec.metadataOverrides") or []:
        args.extend(["--override-kv", entry])
    for entry in string_list(doc, "spec.tensorOverrides") or []:
        args.extend(["--override-tensor", entry])
    budget = integer(doc, "spec.reasoningBudget")
    _add(args, "--reasoning-budget", budget)
    if budget is not None:
        _add(args, "--reasoning-budget-message", string(doc, "spec.reasoningBudgetMessage"))
    _add(args, "--rope-scaling", string(doc, "spec.ropeScaling.type"))
    _add(args, "--rope-scale", string(doc, "spec.ropeScaling.factor"))
    _add(args, "--yarn-orig-ctx", integer(doc, "spec.ropeScaling.originalContext"))
    return args


def speculative_config(doc: ImportDocument, draft_repo: str | None) -> str | None:
    """The ``--speculative-config`` JSON of vLLM, or ``None`` when speculative decoding is off or has no draft."""
    if boolean(doc, "spec.vllmConfig.speculative.enabled") is not True or not draft_repo:
        return None
    tokens = integer(doc, "spec.vllmConfig.speculative.numSpeculativeTokens") or 4
    return json.dumps({"model": draft_repo, "num_speculative_tokens": tokens}, separators=(",", ":"))


def _vllm(doc: ImportDocument, model_arg: str | None, port: int, gpu: GpuRequest, draft_repo: str | None) -> list[str]:
    args: list[str] = []
    if model_arg:
        args.extend(["--model", model_arg])
    served = string(doc, "spec.modelRef")
    if served:
        args.extend(["--served-model-name", served])
    args.extend(["--port", str(port)])
    parallel = integer(doc, "spec.vllmConfig.tensorParallelSize")
    if parallel is None and gpu.count > 1:
        parallel = gpu.count
    _add(args, "--tensor-parallel-size", parallel)
    _add(args, "--gpu-memory-utilization", number(doc, "spec.vllmConfig.gpuMemoryUtilization"))
    _add(args, "--max-model-len", integer(doc, "spec.vllmConfig.maxModelLen"))
    _add(args, "--max-num-batched-tokens", integer(doc, "spec.vllmConfig.maxNumBatchedTokens"))
    _add(args, "--quantization", string(doc, "spec.vllmConfig.quantization"))
    _add(args, "--dtype", string(doc, "spec.vllmConfig.dtype"))
    kv = string(doc, "spec.vllmConfig.kvCacheCustomDtype") or string(doc, "spec.vllmConfig.kvCacheDtype")
    _add(args, "--kv-cache-dtype", kv)
    _add(args, "--cpu-offload-gb", integer(doc, "spec.vllmConfig.cpuOffloadGB"))
    _add(args, "--enable-prefix-caching", boolean(doc, "spec.vllmConfig.enablePrefixCaching"))
    _add(args, "--enable-chunked-prefill", boolean(doc, "spec.vllmConfig.enableChunkedPrefill"))
    _add(args, "--enable-expert-parallel", boolean(doc, "spec.vllmConfig.enableExpertParallel"))
    _add(args, "--speculative-config", speculative_config(doc, draft_repo))
    return args


def _tgi(doc: ImportDocument, model_arg: str | None, port: int) -> list[str]:
    args: list[str] = []
    if model_arg:
        args.extend(["--model-id", model_arg])
    args.extend(["--port", str(port)])
    _add(args, "--quantize", string(doc, "spec.tgiConfig.quantize"))
    _add(args, "--dtype", string(doc, "spec.tgiConfig.dtype"))
    _add(args, "--max-input-length", integer(doc, "spec.tgiConfig.maxInputLength"))
    _add(args, "--max-total-tokens", integer(doc, "spec.tgiConfig.maxTotalTokens"))
    return args


def _hf_token_env(doc: ImportDocument, prefix: str) -> list[dict[str, Any]]:
    name = string(doc, f"{prefix}.hfTokenSecretRef.name")
    key = string(doc, f"{prefix}.hfTokenSecretRef.key")
    optional = boolean(doc, f"{prefix}.hfTokenSecretRef.optional")
    if name is None and key is None and optional is None:
        return []
    ref: dict[str, Any] = {"name": name or "", "key": key or "HF_TOKEN"}
    if optional is not None:
        ref["optional"] = optional
    return [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}}]


def engine_command(
    doc: ImportDocument,
    runtime: str,
    *,
    model_arg: str | None,
    port: int,
    gpu: GpuRequest,
    mmproj: str | None = None,
    draft_repo: str | None = None,
) -> EngineCommand:
    """The command line and extra environment of ``doc``'s engine for ``runtime``."""
    command = string_list(doc, "spec.command")
    extra = string_list(doc, "spec.extraArgs") or []
    env: list[dict[str, Any]] = []
    if runtime == "llamacpp":
        args = _llamacpp(doc, model_arg, port, gpu, mmproj) + extra
    elif runtime == "vllm":
        args = _vllm(doc, model_arg, port, gpu, draft_repo) + extra
        backend = string(doc, "spec.vllmConfig.attentionBackend")
        if backend:
            env.append({"name": "VLLM_ATTENTION_BACKEND", "value": backend.upper()})
        env.extend(_hf_token_env(doc, "spec.vllmConfig"))
    elif runtime == "tgi":
        args = _tgi(doc, model_arg, port)
        env.extend(_hf_token_env(doc, "spec.tgiConfig"))
    elif runtime == "personaplex":
        args = ["--cpu-offload"] if boolean(doc, "spec.personaPlexConfig.cpuOffload") else []
        env.extend(_hf_token_env(doc, "spec.personaPlexConfig"))
    else:
        args = string_list(doc, "spec.args") or []
    return EngineCommand(command=command, args=args, env=env)
