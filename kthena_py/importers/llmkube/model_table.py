"""The field table of LLMKube's Model: every field of the kind, and where it goes in kthena_py.

A Model becomes a ModelCache of the same name: what to stage, how to check it and where. Its hardware and
resource preferences are not the cache's business: they are read by the translation of each InferenceService of
the input that references the Model (see :mod:`kthena_py.importers.llmkube.inferenceservice`).
"""

from __future__ import annotations

from kthena_py.importers.llmkube.common import envelope_rows
from kthena_py.importers.report import FieldRule

__all__ = ["MODEL_TABLE"]

_MC = "ModelCache spec"
_SERVING = "ModelServing (of each InferenceService referencing the Model)"
_AGENT = "a metal-agent setting: kthena_py runs on Kubernetes nodes only"

MODEL_TABLE: tuple[FieldRule, ...] = (
    *envelope_rows("Model", "ModelCache"),
    FieldRule(
        "spec.source",
        "mapped",
        f"{_MC}.source",
        "http(s)://, hf://, s3:// and pvc:// and bare org/repo names as they are (a pvc:// source is copied into "
        "the cache's storage, where LLMKube reads it in place); file://, absolute paths and oci:// are refused "
        "(stage them on a claim and use pvc://); without a source, the common directory of the files' URLs",
    ),
    FieldRule("spec.files", "mapped", f"{_MC}.files", "absolute URLs under the source become relative paths"),
    FieldRule(
        "spec.mmproj",
        "approximated",
        f"{_MC}.files; llama.cpp --mmproj",
        "staged as one more file of the cache and passed to llama.cpp with --mmproj",
    ),
    FieldRule("spec.sha256", "mapped", f"{_MC}.sha256", "lower-cased"),
    FieldRule("spec.fileSha256", "mapped", f"{_MC}.fileSHA256", "keys follow spec.files; digests lower-cased"),
    FieldRule("spec.refreshPolicy", "mapped", f"{_MC}.refreshPolicy"),
    FieldRule(
        "spec.sourceSecretRef.name",
        "mapped",
        f"{_MC}.sourceSecretRef.name",
        "the downloader reads the same keys (HF_TOKEN, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL)",
    ),
    FieldRule("spec.attestation.configMapKeyRef.name", "mapped", f"{_MC}.attestation.configMapKeyRef.name"),
    FieldRule("spec.attestation.configMapKeyRef.key", "mapped", f"{_MC}.attestation.configMapKeyRef.key"),
    FieldRule(
        "spec.attestation.configMapKeyRef.optional",
        "dropped",
        "",
        "kthena_py's attestation reference is required: a missing ConfigMap fails the verification",
    ),
    FieldRule("spec.downloadConcurrency", "mapped", f"{_MC}.maxWorkers"),
    FieldRule(
        "spec.downloadMaxInFlightSize",
        "dropped",
        "",
        "kthena_py's downloader bounds the files in flight (maxWorkers), not their bytes; it stages onto a "
        "claim or a node directory, never a FUSE cache",
    ),
    FieldRule(
        "spec.format",
        "dropped",
        "",
        "the ModelCache stages any files; GGUF metadata is read from the staged files (status.gguf); the "
        "engine follows the InferenceService's runtime",
    ),
    FieldRule("spec.quantization", "dropped", "", "descriptive; the GGUF metadata in the cache's status says it"),
    FieldRule(
        "spec.hardware.accelerator",
        "approximated",
        f"{_SERVING}: llama.cpp image tag",
        "cuda/rocm/vulkan/intel pick the llama.cpp server image variant when the InferenceService names no "
        "image; rocm and vulkan request devic.es/dri-render; metal: " + _AGENT,
    ),
    FieldRule(
        "spec.hardware.gpu.count",
        "mapped",
        f"{_SERVING}: container GPU limit; vLLM --tensor-parallel-size",
        "used when the InferenceService has no resources.gpu",
    ),
    FieldRule("spec.hardware.gpu.enabled", "mapped", f"{_SERVING}: no GPU when false"),
    FieldRule(
        "spec.hardware.gpu.layers",
        "approximated",
        f"{_SERVING}: llama.cpp --n-gpu-layers",
        "-1 (auto) becomes 999 (offload every layer)",
    ),
    FieldRule(
        "spec.hardware.gpu.memory",
        "dropped",
        "",
        "no scheduler kthena_py uses places pods by GPU memory; pick the nodes with nodeSelector",
    ),
    FieldRule(
        "spec.hardware.gpu.resourceClaims[].name",
        "mapped",
        f"{_SERVING}: pod resourceClaims[].name; container resources.claims[].name",
    ),
    FieldRule(
        "spec.hardware.gpu.resourceClaims[].resourceClaimName",
        "mapped",
        f"{_SERVING}: pod resourceClaims[].resourceClaimName",
    ),
    FieldRule(
        "spec.hardware.gpu.resourceClaims[].resourceClaimTemplateName",
        "mapped",
        f"{_SERVING}: pod resourceClaims[].resourceClaimTemplateName",
    ),
    FieldRule("spec.hardware.gpu.resourceName", "mapped", f"{_SERVING}: the GPU resource name"),
    FieldRule(
        "spec.hardware.gpu.runtime",
        "approximated",
        f"{_SERVING}: GPU resource name; llama.cpp image tag",
        "with vendor amd: devic.es/dri-render and the server-vulkan or server-rocm llama.cpp image",
    ),
    FieldRule(
        "spec.hardware.gpu.sharding.layerSplit",
        "approximated",
        f"{_SERVING}: llama.cpp --tensor-split",
        "each range's layer count becomes that GPU's share",
    ),
    FieldRule(
        "spec.hardware.gpu.sharding.strategy",
        "approximated",
        f"{_SERVING}: llama.cpp --split-mode",
        "layer and pipeline -> layer, tensor and row -> row, none -> none",
    ),
    FieldRule(
        "spec.hardware.gpu.tolerationKey",
        "mapped",
        f"{_SERVING}: pod tolerations (Exists, NoSchedule)",
    ),
    FieldRule(
        "spec.hardware.gpu.vendor",
        "mapped",
        f"{_SERVING}: the GPU resource name",
        "nvidia -> nvidia.com/gpu, amd -> amd.com/gpu, intel -> gpu.intel.com/i915",
    ),
    FieldRule("spec.memoryBudget", "dropped", "", _AGENT),
    FieldRule("spec.memoryFraction", "dropped", "", _AGENT),
    FieldRule(
        "spec.resources.cpu",
        "mapped",
        f"{_SERVING}: container requests.cpu",
        "used when the InferenceService has no resources.cpu",
    ),
    FieldRule(
        "spec.resources.memory",
        "mapped",
        f"{_SERVING}: container requests.memory",
        "used when the InferenceService has no resources.memory",
    ),
    FieldRule(
        "spec.modelCache.claimName",
        "mapped",
        f"{_MC}.storage.persistentVolumeClaim.claimName",
        "without it the cache creates its own claim (volumeClaimTemplate, 100Gi, ReadWriteMany: resize it)",
    ),
    FieldRule(
        "spec.modelCache.persistence",
        "approximated",
        f"{_MC}.storage",
        "Ephemeral has no kthena_py equivalent: the weights are staged once into the cache's claim instead of "
        "into each pod's emptyDir",
    ),
    FieldRule("spec.modelCache.prefetch", "mapped", f"{_MC}.prefetch", "an alias of spec.prefetch"),
    FieldRule(
        "spec.modelCache.storageClassName",
        "mapped",
        f"{_MC}.storage.volumeClaimTemplate.storageClassName",
    ),
    FieldRule(
        "spec.prefetch",
        "mapped",
        f"{_MC}.prefetch",
        "always written: unset is false (stage when a ModelServing names the cache), as LLMKube",
    ),
    FieldRule("spec.prefetchAffinity", "mapped", f"{_MC}.placement.affinity", "copied whole"),
    FieldRule("spec.prefetchNodeSelector", "mapped", f"{_MC}.placement.nodeSelector"),
    FieldRule("spec.prefetchTolerations", "mapped", f"{_MC}.placement.tolerations", "copied whole"),
    FieldRule(
        "spec.prefetchOCI.ephemeralStorage",
        "dropped",
        "",
        "kthena_py stages into volumes and never publishes weights as an OCI image",
    ),
    FieldRule(
        "spec.prefetchOCI.image",
        "dropped",
        "",
        "kthena_py stages into volumes and never publishes weights as an OCI image",
    ),
    FieldRule(
        "spec.prefetchOCI.pushSecretRef.name",
        "dropped",
        "",
        "kthena_py stages into volumes and never publishes weights as an OCI image",
    ),
)
