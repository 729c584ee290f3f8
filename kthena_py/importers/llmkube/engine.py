"""The engine container of an imported InferenceService: image, command line and port, per runtime.

Guarantees (pure functions of the InferenceService, its Model and the GPU request):

* llamacpp, vllm and tgi get their server's flags from the typed knobs, in the table's order, with the
  InferenceService's ``extraArgs`` last (llamacpp and vllm only); a knob of another runtime is never written.
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
from kthena_py.importers.llmkube.gpu import GpuRequest
from kthena_py.importers.llmkube.values import read_bool, read_float, read_int, read_str, read_str_list

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
    source = read_str(model, "spec.source") if model is not None else None
    if source and source.lower().endswith(_WEIGHT_SUFFIXES):
        return f"{MODEL_PATH}/{source.rsplit('/', 1)[-1]}"
    return MODEL_PATH


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
    _add(args, "--split-mode", gpu.split_mode)
    if gpu.tensor_split:
        args.extend(["--tensor-split", ",".join(str(share) for share in gpu.tensor_split)])
    _add(args, "--ctx-size", read_int(doc, "spec.contextSize"))
    _add(args, "--batch-size", read_int(doc, "spec.batchSize"))
    _add(args, "--ubatch-size", read_int(doc, "spec.uBatchSize"))
    _add(args, "--parallel", read_int(doc, "spec.parallelSlots"))
    flash = read_bool(doc, "spec.flashAttention")
    if flash is not None:
        args.extend(["--flash-attn", "on" if flash else "off"])
    _add(args, "--jinja", read_bool(doc, "spec.jinja"))
    _add(args, "--cache-type-k", read_str(doc, "spec.cacheTypeCustomK") or read_str(doc, "spec.cacheTypeK"))
    _add(args, "--cache-type-v", read_str(doc, "spec.cacheTypeCustomV") or read_str(doc, "spec.cacheTypeV"))
    _add(args, "--no-kv-offload", read_bool(doc, "spec.noKvOffload"))
    _add(args, "--no-warmup", read_bool(doc, "spec.noWarmup"))
    _add(args, "--cpu-moe", read_bool(doc, "spec.moeCPUOffload"))
    _add(args, "--n-cpu-moe", read_int(doc, "spec.moeCPULayers"))
    for entry in read_str_list(doc, "spec.metadataOverrides") or []:
        args.extend(["--override-kv", entry])
    for entry in read_str_list(doc, "spec.tensorOverrides") or []:
        args.extend(["--override-tensor", entry])
    budget = read_int(doc, "spec.reasoningBudget")
    _add(args, "--reasoning-budget", budget)
    if budget is not None:
        _add(args, "--reasoning-budget-message", read_str(doc, "spec.reasoningBudgetMessage"))
    _add(args, "--rope-scaling", read_str(doc, "spec.ropeScaling.type"))
    _add(args, "--rope-scale", read_str(doc, "spec.ropeScaling.factor"))
    _add(args, "--yarn-orig-ctx", read_int(doc, "spec.ropeScaling.originalContext"))
    return args


def speculative_config(doc: ImportDocument, draft_repo: str | None) -> str | None:
    """The ``--speculative-config`` JSON of vLLM, or ``None`` when speculative decoding is off or has no draft."""
    if read_bool(doc, "spec.vllmConfig.speculative.enabled") is not True or not draft_repo:
        return None
    tokens = read_int(doc, "spec.vllmConfig.speculative.numSpeculativeTokens") or 4
    return json.dumps({"model": draft_repo, "num_speculative_tokens": tokens}, separators=(",", ":"))


def _vllm(doc: ImportDocument, model_arg: str | None, port: int, gpu: GpuRequest, draft_repo: str | None) -> list[str]:
    args: list[str] = []
    if model_arg:
        args.extend(["--model", model_arg])
    served = read_str(doc, "spec.modelRef")
    if served:
        args.extend(["--served-model-name", served])
    args.extend(["--port", str(port)])
    parallel = read_int(doc, "spec.vllmConfig.tensorParallelSize")
    if parallel is None and gpu.count > 1:
        parallel = gpu.count
    _add(args, "--tensor-parallel-size", parallel)
    _add(args, "--gpu-memory-utilization", read_float(doc, "spec.vllmConfig.gpuMemoryUtilization"))
    _add(args, "--max-model-len", read_int(doc, "spec.vllmConfig.maxModelLen"))
    _add(args, "--max-num-batched-tokens", read_int(doc, "spec.vllmConfig.maxNumBatchedTokens"))
    _add(args, "--quantization", read_str(doc, "spec.vllmConfig.quantization"))
    _add(args, "--dtype", read_str(doc, "spec.vllmConfig.dtype"))
    kv = read_str(doc, "spec.vllmConfig.kvCacheCustomDtype") or read_str(doc, "spec.vllmConfig.kvCacheDtype")
    _add(args, "--kv-cache-dtype", kv)
    _add(args, "--cpu-offload-gb", read_int(doc, "spec.vllmConfig.cpuOffloadGB"))
    _add(args, "--enable-prefix-caching", read_bool(doc, "spec.vllmConfig.enablePrefixCaching"))
    _add(args, "--enable-chunked-prefill", read_bool(doc, "spec.vllmConfig.enableChunkedPrefill"))
    _add(args, "--enable-expert-parallel", read_bool(doc, "spec.vllmConfig.enableExpertParallel"))
    _add(args, "--speculative-config", speculative_config(doc, draft_repo))
    return args


def _tgi(doc: ImportDocument, model_arg: str | None, port: int) -> list[str]:
    args: list[str] = []
    if model_arg:
        args.extend(["--model-id", model_arg])
    args.extend(["--port", str(port)])
    _add(args, "--quantize", read_str(doc, "spec.tgiConfig.quantize"))
    _add(args, "--dtype", read_str(doc, "spec.tgiConfig.dtype"))
    _add(args, "--max-input-length", read_int(doc, "spec.tgiConfig.maxInputLength"))
    _add(args, "--max-total-tokens", read_int(doc, "spec.tgiConfig.maxTotalTokens"))
    return args


def _hf_token_env(doc: ImportDocument, prefix: str) -> list[dict[str, Any]]:
    name = read_str(doc, f"{prefix}.hfTokenSecretRef.name")
    key = read_str(doc, f"{prefix}.hfTokenSecretRef.key")
    optional = read_bool(doc, f"{prefix}.hfTokenSecretRef.optional")
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
    command = read_str_list(doc, "spec.command")
    extra = read_str_list(doc, "spec.extraArgs") or []
    env: list[dict[str, Any]] = []
    if runtime == "llamacpp":
        args = _llamacpp(doc, model_arg, port, gpu, mmproj) + extra
    elif runtime == "vllm":
        args = _vllm(doc, model_arg, port, gpu, draft_repo) + extra
        backend = read_str(doc, "spec.vllmConfig.attentionBackend")
        if backend:
            env.append({"name": "VLLM_ATTENTION_BACKEND", "value": backend.upper()})
        env.extend(_hf_token_env(doc, "spec.vllmConfig"))
    elif runtime == "tgi":
        args = _tgi(doc, model_arg, port)
        env.extend(_hf_token_env(doc, "spec.tgiConfig"))
    elif runtime == "personaplex":
        args = ["--cpu-offload"] if read_bool(doc, "spec.personaPlexConfig.cpuOffload") else []
        env.extend(_hf_token_env(doc, "spec.personaPlexConfig"))
    else:
        args = read_str_list(doc, "spec.args") or []
    return EngineCommand(command=command, args=args, env=env)
