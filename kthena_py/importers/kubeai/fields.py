"""The field table of KubeAI's Model (``kubeai.org/v1``): every field, what ``kthena-py import`` does with it.

Guarantees: one :class:`~kthena_py.importers.report.FieldRule` per field of the Model's Go API (seed 003) and
of the object metadata ``kubectl get -o yaml`` prints, each exactly once; docs/migrating.md renders this table
(``hack/gen-import-docs.py``), so the docs and the translator cannot disagree. A translator may refine a rule's
outcome or note for one document (``gs://`` is approximated where ``hf://`` is mapped, say); the table states
the general case.
"""

from __future__ import annotations

from kthena_py.importers.metadata import METADATA_FIELDS
from kthena_py.importers.report import FieldRule

__all__ = ["MODEL_FIELDS"]

MODEL_FIELDS: tuple[FieldRule, ...] = (
    *METADATA_FIELDS,
    FieldRule(
        "spec.url",
        "mapped",
        "entry container command line; with cacheProfile: ModelCache spec.source",
        "hf://org/model: the engine's model argument (the engine downloads; give it HF_TOKEN through spec.env "
        "or a Secret); pvc://claim[/path]: a read-only volume at /model; ollama://model: pulled by the OLlama "
        "container at start; s3:// (with cacheProfile): ModelCache source; gs:// and oss:// (with "
        "cacheProfile): approximated as an S3-compatible ModelCache source (set ENDPOINT in its secret)",
    ),
    FieldRule(
        "spec.adapters[].name",
        "approximated",
        "ModelServing annotation serving.kthena-py.io/lora-adapters (name)",
        "KubeAI downloads the adapter in the pod and loads it into vLLM; here Kthena's runtime sidecar (added to "
        "the entry pod, port 8100, lora-endpoint: sidecar) downloads the url and loads it into vLLM",
    ),
    FieldRule(
        "spec.adapters[].url",
        "mapped",
        "ModelServing annotation serving.kthena-py.io/lora-adapters (source)",
        "",
    ),
    FieldRule(
        "spec.features",
        "dropped",
        "",
        "kthena_py does not restrict a model's OpenAI endpoints: the engine serves what it serves",
    ),
    FieldRule(
        "spec.engine",
        "mapped",
        "entry container image, command line, port 8000 and readiness probe",
        "VLLM, OLlama, FasterWhisper and Infinity, started the way KubeAI starts them",
    ),
    FieldRule(
        "spec.resourceProfile",
        "mapped",
        "entry pod resources, nodeSelector, tolerations, affinity, runtimeClassName; ModelServing spec.schedulerName",
        "<profile>:<count> from --kubeai-config (KubeAI's chart defaults otherwise); requests and limits times "
        "count; the profile's imageName picks the engine image (modelServers images of --kubeai-config, else KubeAI's "
        "chart defaults)",
    ),
    FieldRule(
        "spec.cacheProfile",
        "approximated",
        "ModelCache (same name) + ModelServing annotation serving.kthena-py.io/model-cache",
        "staged once into the ReadWriteMany claim shared-model-cache-<cacheProfile> (KubeAI's cache profiles "
        "are not read: create that claim on the profile's storage, or edit the ModelCache's storage); the "
        "engine reads the staged copy at /model-cache ($(KTHENA_MODEL_PATH))",
    ),
    FieldRule("spec.image", "mapped", "entry container image", "replaces the engine's default image"),
    FieldRule("spec.args", "mapped", "entry container args", "after the engine's own arguments"),
    FieldRule("spec.env", "mapped", "entry container env", ""),
    FieldRule(
        "spec.replicas",
        "mapped",
        "ModelServing spec.replicas",
        "the starting count; unset: minReplicas (KubeAI starts there too)",
    ),
    FieldRule(
        "spec.minReplicas",
        "mapped",
        "AutoscalingPolicy homogeneousTarget.minReplicas",
        "0 also opts the ModelServing in to the activator (annotation activator.kthena-py.io/scale-from-zero)",
    ),
    FieldRule(
        "spec.maxReplicas",
        "mapped",
        "AutoscalingPolicy homogeneousTarget.maxReplicas",
        "unset (KubeAI: no limit) becomes 1000000, the largest kthena_py accepts",
    ),
    FieldRule(
        "spec.autoscalingDisabled",
        "mapped",
        "no AutoscalingPolicy",
        "true: replicas stay as written, and minReplicas, maxReplicas, targetRequests and "
        "scaleDownDelaySeconds are dropped",
    ),
    FieldRule(
        "spec.targetRequests",
        "approximated",
        "AutoscalingPolicy metric demand, targetValue",
        "requests per replica, counted at the activator (held plus in flight, read from Prometheus) where KubeAI "
        "counts active requests in its proxy; set the policy's Prometheus serverURL to yours. Unset: KubeAI's "
        "default 100",
    ),
    FieldRule(
        "spec.scaleDownDelaySeconds",
        "approximated",
        "AutoscalingPolicy behavior.scaleDown.stabilizationWindow",
        "a window in which any recommendation to keep a replica keeps it, where KubeAI waits this long after "
        "deciding; unset: KubeAI's default 30s; at most 30 minutes (longer is capped)",
    ),
    FieldRule(
        "spec.owner",
        "dropped",
        "",
        "deprecated in KubeAI; it only filled the owner of /v1/models",
    ),
    FieldRule("status", "dropped", "", "observed state; kthena_py's controllers report their own"),
)
