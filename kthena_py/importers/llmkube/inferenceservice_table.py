"""The field table of LLMKube's InferenceService: every field of the kind, and where it goes in kthena_py.

An InferenceService becomes a ModelServing of the same name (one role ``server``, one entry pod per
ServingGroup, no workers), a Service for its ``endpoint`` and, with ``autoscaling``, an AutoscalingPolicy.
Engine knobs become command-line flags of the runtime they belong to; a knob LLMKube ignores for the chosen
runtime is reported as dropped for that document (:data:`RUNTIME_OF_ROW` says which rows are whose).
"""

from __future__ import annotations

from kthena_py.importers.llmkube.common import envelope_rows
from kthena_py.importers.report import FieldRule

__all__ = ["INFERENCESERVICE_TABLE", "RUNTIME_OF_ROW"]

_POD = "ModelServing spec.template.roles[server].entryTemplate.spec"
_CTR = f"{_POD}.containers[engine]"
_META = "ModelServing spec.template.roles[server].entryTemplate.metadata"
_ASP = "AutoscalingPolicy spec"
_SVC = "Service spec"
_SECRET_ENV = f"{_CTR}.env[HF_TOKEN].valueFrom.secretKeyRef"


def _flag(path: str, flag: str, runtime: str, note: str = "") -> FieldRule:
    return FieldRule(path, "mapped", f"{_CTR}.args {flag} ({runtime})", note)


def _hf_token(prefix: str) -> tuple[FieldRule, ...]:
    return (
        FieldRule(f"{prefix}.hfTokenSecretRef.name", "mapped", f"{_SECRET_ENV}.name"),
        FieldRule(f"{prefix}.hfTokenSecretRef.key", "mapped", f"{_SECRET_ENV}.key"),
        FieldRule(f"{prefix}.hfTokenSecretRef.optional", "mapped", f"{_SECRET_ENV}.optional"),
    )


_LLAMACPP: tuple[FieldRule, ...] = (
    _flag("spec.contextSize", "--ctx-size", "llamacpp"),
    _flag("spec.batchSize", "--batch-size", "llamacpp"),
    _flag("spec.uBatchSize", "--ubatch-size", "llamacpp"),
    _flag("spec.parallelSlots", "--parallel", "llamacpp"),
    _flag("spec.flashAttention", "--flash-attn on|off", "llamacpp", "the on/off form of current llama.cpp"),
    _flag("spec.jinja", "--jinja", "llamacpp", "written when true"),
    _flag("spec.cacheTypeK", "--cache-type-k", "llamacpp"),
    _flag("spec.cacheTypeV", "--cache-type-v", "llamacpp"),
    _flag("spec.cacheTypeCustomK", "--cache-type-k", "llamacpp", "wins over cacheTypeK"),
    _flag("spec.cacheTypeCustomV", "--cache-type-v", "llamacpp", "wins over cacheTypeV"),
    _flag("spec.noKvOffload", "--no-kv-offload", "llamacpp", "written when true"),
    _flag("spec.noWarmup", "--no-warmup", "llamacpp", "written when true"),
    _flag("spec.moeCPUOffload", "--cpu-moe", "llamacpp", "written when true"),
    _flag("spec.moeCPULayers", "--n-cpu-moe", "llamacpp"),
    _flag("spec.metadataOverrides", "--override-kv (one per entry)", "llamacpp"),
    _flag("spec.tensorOverrides", "--override-tensor (one per entry)", "llamacpp"),
    _flag("spec.reasoningBudget", "--reasoning-budget", "llamacpp"),
    _flag("spec.reasoningBudgetMessage", "--reasoning-budget-message", "llamacpp", "only with reasoningBudget"),
    _flag("spec.ropeScaling.type", "--rope-scaling", "llamacpp"),
    _flag("spec.ropeScaling.factor", "--rope-scale", "llamacpp"),
    _flag("spec.ropeScaling.originalContext", "--yarn-orig-ctx", "llamacpp"),
)

_VLLM: tuple[FieldRule, ...] = (
    _flag("spec.vllmConfig.tensorParallelSize", "--tensor-parallel-size", "vllm", "wins over the GPU count"),
    _flag("spec.vllmConfig.gpuMemoryUtilization", "--gpu-memory-utilization", "vllm"),
    _flag("spec.vllmConfig.maxModelLen", "--max-model-len", "vllm"),
    _flag("spec.vllmConfig.maxNumBatchedTokens", "--max-num-batched-tokens", "vllm"),
    _flag("spec.vllmConfig.quantization", "--quantization", "vllm"),
    _flag("spec.vllmConfig.dtype", "--dtype", "vllm"),
    _flag("spec.vllmConfig.kvCacheDtype", "--kv-cache-dtype", "vllm"),
    _flag("spec.vllmConfig.kvCacheCustomDtype", "--kv-cache-dtype", "vllm", "wins over kvCacheDtype"),
    _flag("spec.vllmConfig.cpuOffloadGB", "--cpu-offload-gb", "vllm"),
    _flag("spec.vllmConfig.enablePrefixCaching", "--enable-prefix-caching", "vllm", "written when true"),
    _flag("spec.vllmConfig.enableChunkedPrefill", "--enable-chunked-prefill", "vllm", "written when true"),
    _flag("spec.vllmConfig.enableExpertParallel", "--enable-expert-parallel", "vllm", "written when true"),
    FieldRule(
        "spec.vllmConfig.attentionBackend",
        "mapped",
        f"{_CTR}.env VLLM_ATTENTION_BACKEND (vllm)",
        "upper-cased, as vLLM spells its backends",
    ),
    *_hf_token("spec.vllmConfig"),
    FieldRule(
        "spec.vllmConfig.speculative.enabled",
        "mapped",
        f"{_CTR}.args --speculative-config (vllm)",
        "no speculative decoding unless true",
    ),
    FieldRule(
        "spec.vllmConfig.speculative.model",
        "approximated",
        f"{_CTR}.args --speculative-config model (vllm)",
        "the draft Model's Hugging Face repository (vLLM fetches it): one pod mounts one ModelCache, so the "
        "draft is not staged; a draft Model that is absent from the input or not on Hugging Face is dropped",
    ),
    _flag("spec.vllmConfig.speculative.numSpeculativeTokens", "--speculative-config num_speculative_tokens", "vllm"),
)

_TGI: tuple[FieldRule, ...] = (
    _flag("spec.tgiConfig.quantize", "--quantize", "tgi"),
    _flag("spec.tgiConfig.dtype", "--dtype", "tgi"),
    _flag("spec.tgiConfig.maxInputLength", "--max-input-length", "tgi"),
    _flag("spec.tgiConfig.maxTotalTokens", "--max-total-tokens", "tgi"),
    *_hf_token("spec.tgiConfig"),
)

_PERSONAPLEX: tuple[FieldRule, ...] = (
    FieldRule(
        "spec.personaPlexConfig.cpuOffload",
        "approximated",
        f"{_CTR}.args --cpu-offload (personaplex)",
        "written when true, as the flag of the Moshi server PersonaPlex builds on; LLMKube's own wiring is not "
        "documented: check it against your image",
    ),
    FieldRule(
        "spec.personaPlexConfig.quantize4Bit",
        "dropped",
        "",
        "LLMKube's wiring of the NF4 switch into its PersonaPlex image is not documented; add the server's flag "
        "to the container args yourself",
    ),
    *_hf_token("spec.personaPlexConfig"),
)

RUNTIME_OF_ROW: dict[str, str] = {
    **{rule.path: "llamacpp" for rule in _LLAMACPP},
    **{rule.path: "vllm" for rule in _VLLM},
    **{rule.path: "tgi" for rule in _TGI},
    **{rule.path: "personaplex" for rule in _PERSONAPLEX},
}
"""Rows that only one runtime reads; for another runtime, LLMKube ignores them and the report says dropped."""

INFERENCESERVICE_TABLE: tuple[FieldRule, ...] = (
    *envelope_rows("InferenceService", "ModelServing, Service, AutoscalingPolicy"),
    FieldRule(
        "spec.modelRef",
        "mapped",
        "ModelServing metadata.annotations serving.kthena-py.io/model-cache",
        "gated on the ModelCache imported from that Model, mounted read-only at /model-cache; the engine is "
        "given the path of the Model's first file",
    ),
    FieldRule(
        "spec.skipModelInit",
        "mapped",
        "ModelServing metadata.annotations serving.kthena-py.io/model-cache",
        "true: no gate and no mount, the image or the engine brings the model",
    ),
    FieldRule(
        "spec.replicas",
        "mapped",
        "ModelServing spec.replicas",
        "the initial count when autoscaled; a ModelPool member starts at 0 (the pool brings it up)",
    ),
    FieldRule(
        "spec.runtime",
        "approximated",
        f"{_CTR}.command/args",
        "llamacpp: llama-server with --model, --host, --port and --metrics; vllm: the OpenAI server with "
        "--model and --port; tgi: text-generation-launcher with --model-id and --port; personaplex and generic: "
        "the image's own entrypoint; each with the flags of its knobs",
    ),
    FieldRule(
        "spec.image",
        "mapped",
        f"{_CTR}.image",
        "unset: the runtime's public image (llama.cpp's server image in the accelerator's variant, vLLM's, "
        "TGI's); personaplex and generic need it",
    ),
    FieldRule("spec.command", "mapped", f"{_CTR}.command"),
    FieldRule(
        "spec.args",
        "mapped",
        f"{_CTR}.args (generic)",
        "LLMKube reads them for the generic runtime only, and so does the import",
    ),
    FieldRule(
        "spec.extraArgs",
        "mapped",
        f"{_CTR}.args (llamacpp, vllm)",
        "appended after the generated flags; LLMKube ignores them for other runtimes, and so does the import",
    ),
    FieldRule("spec.containerPort", "mapped", f"{_CTR}.ports[http].containerPort; the engine's --port"),
    FieldRule("spec.env", "mapped", f"{_CTR}.env", "copied whole"),
    FieldRule("spec.imagePullSecrets", "mapped", f"{_POD}.imagePullSecrets", "copied whole"),
    *_LLAMACPP,
    *_VLLM,
    *_TGI,
    *_PERSONAPLEX,
    FieldRule("spec.resources.cpu", "mapped", f"{_CTR}.resources.requests.cpu"),
    FieldRule("spec.resources.memory", "mapped", f"{_CTR}.resources.requests.memory"),
    FieldRule(
        "spec.resources.hostMemory",
        "approximated",
        f"{_CTR}.resources.requests.memory and limits.memory",
        "the RAM the offloaded layers need becomes the container's memory request and limit",
    ),
    FieldRule(
        "spec.resources.gpu",
        "mapped",
        f"{_CTR}.resources.limits[<GPU resource>]",
        "the resource name comes from the Model's hardware.gpu (nvidia.com/gpu by default); a GPU toleration is "
        "added as LLMKube does",
    ),
    FieldRule(
        "spec.resources.gpuMemory",
        "dropped",
        "",
        "no scheduler kthena_py uses places pods by GPU memory; pick the nodes with nodeSelector",
    ),
    FieldRule(
        "spec.priority",
        "approximated",
        f"{_POD}.priorityClassName",
        "critical, high, low and batch become PriorityClass llmkube-<level> (create it, or keep LLMKube's); "
        "normal is the cluster's default, no class",
    ),
    FieldRule("spec.priorityClassName", "mapped", f"{_POD}.priorityClassName", "wins over priority"),
    FieldRule("spec.nodeSelector", "mapped", f"{_POD}.nodeSelector"),
    FieldRule("spec.tolerations", "mapped", f"{_POD}.tolerations", "copied whole"),
    FieldRule("spec.runtimeClassName", "mapped", f"{_POD}.runtimeClassName"),
    FieldRule("spec.podLabels", "mapped", f"{_META}.labels"),
    FieldRule("spec.podAnnotations", "mapped", f"{_META}.annotations"),
    FieldRule("spec.podSecurityContext", "mapped", f"{_POD}.securityContext", "copied whole"),
    FieldRule("spec.securityContext", "mapped", f"{_CTR}.securityContext", "copied whole"),
    FieldRule("spec.probeOverrides.liveness", "mapped", f"{_CTR}.livenessProbe", "copied whole"),
    FieldRule(
        "spec.probeOverrides.readiness",
        "mapped",
        f"{_CTR}.readinessProbe",
        "copied whole; unset: GET /health on the engine port (llamacpp, vllm, tgi)",
    ),
    FieldRule("spec.probeOverrides.startup", "mapped", f"{_CTR}.startupProbe", "copied whole"),
    FieldRule(
        "spec.evictionProtection",
        "dropped",
        "",
        "a metal-agent setting: kthena_py runs on Kubernetes nodes only",
    ),
    FieldRule("spec.endpoint.port", "mapped", f"{_SVC}.ports[http].port", "the Service is always emitted (8080)"),
    FieldRule("spec.endpoint.type", "mapped", f"{_SVC}.type"),
    FieldRule(
        "spec.endpoint.path",
        "dropped",
        "",
        "a Service routes every path; the engine serves the OpenAI API at its own paths",
    ),
    FieldRule("spec.autoscaling.minReplicas", "mapped", f"{_ASP}.homogeneousTarget.minReplicas", "default 1"),
    FieldRule("spec.autoscaling.maxReplicas", "mapped", f"{_ASP}.homogeneousTarget.maxReplicas"),
    FieldRule(
        "spec.autoscaling.metrics[].name",
        "mapped",
        f"{_ASP}.metrics[].name; homogeneousTarget.target.metricSources[].pod.name",
        "scraped from each entry pod's /metrics on the engine port; unset metrics: llamacpp:requests_processing "
        "at 2, LLMKube's default (vllm:num_requests_running at 2 for vLLM, which does not export the former)",
    ),
    FieldRule(
        "spec.autoscaling.metrics[].type",
        "approximated",
        f"{_ASP}.metrics[]",
        "Pods metrics are carried; Resource (CPU or memory utilization) metrics are dropped: the autoscaler "
        "reads engine metrics",
    ),
    FieldRule("spec.autoscaling.metrics[].targetAverageValue", "mapped", f"{_ASP}.metrics[].targetValue"),
    FieldRule(
        "spec.autoscaling.metrics[].targetAverageUtilization",
        "dropped",
        "",
        "Resource utilization targets have no kthena_py source: the autoscaler reads engine metrics",
    ),
)
