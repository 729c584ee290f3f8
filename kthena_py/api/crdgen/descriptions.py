"""Descriptions of the API types and fields, for the CRD schemas (``kubectl explain``) and docs/api.md.

Guarantees: every type and field of the API reference has the reference's own text, extracted once into
``data/descriptions.json`` by ``hack/extract-api-descriptions.py``. Where the reference has no text, or no
entry at all (the ``metav1``-typed fields kthena_py accepts, Volcano's network-topology spec,
``metav1.Condition``), :data:`EXTRA_TYPES` and :data:`EXTRA_FIELDS` provide it; :data:`OVERRIDES` replaces
reference texts that contradict what kthena_py implements. Lookups never raise: an undocumented field has the
empty description (a unit test insists there are none). Code-generator marker text that leaked into the
reference's comments (``MaxItems: 4``, ``kubebuilder:default=All``, ``+optional``) is removed
(:func:`clean`), so ``kubectl explain`` shows prose only; the constraints themselves are in the schema.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

__all__ = [
    "COMMON_FIELDS",
    "EXTRA_FIELDS",
    "EXTRA_TYPES",
    "MARKER",
    "OVERRIDES",
    "field_description",
    "type_description",
    "value_description",
]

#: Types absent from the API reference.
EXTRA_TYPES: dict[str, str] = {
    "NetworkTopologySpec": (
        "NetworkTopologySpec is Volcano's network-topology constraint for a PodGroup or one of its sub-groups "
        "(scheduling.volcano.sh/v1beta1)."
    ),
    "Condition": "Condition contains details for one aspect of the current state of this API resource.",
    "RoleRolloutDependency": (
        "RoleRolloutDependency declares that a Role starts its target version only after the Roles it depends on."
    ),
    "ModelCache": (
        "ModelCache stages model weights once into shared or node-local storage with a download Job, verifies "
        "every file's sha256, and reports when they are Ready; ModelServings that name it wait for it."
    ),
    "ModelPool": (
        "ModelPool lets several ModelServings of its namespace share a few GPU slots: at most slots members are "
        "resident (scaled up) at once; a request for another member is held by the activator while the pool "
        "controller drains an idle resident, waits until its pods are gone, and scales the requested member up."
    ),
    "ModelPoolSpec": "ModelPoolSpec says which ModelServings share the slots and how they are swapped.",
    "ModelPoolStatus": (
        "ModelPoolStatus says which members are resident, what the pool is doing, and how its last swap went."
    ),
    "PoolMember": "PoolMember is one ModelServing of the pool.",
    "ModelServingReference": "ModelServingReference names a ModelServing in the pool's namespace.",
    "IdleCheck": (
        "IdleCheck says how the controller tells that a resident member is idle: it scrapes the Prometheus text of "
        "the member's Ready entry pods and sums the listed gauges; the member is idle when the sum is 0. A probe "
        "that fails never counts as idle."
    ),
    "PoolSwap": (
        "PoolSwap is the swap in progress, written before each step is acted on so a restarted controller resumes it."
    ),
    "LastSwap": "LastSwap is the last completed swap: its members, the time of each step and its duration.",
    "PoolMemberStatus": "PoolMemberStatus says where one member stands.",
    "ModelCacheSpec": "ModelCacheSpec says what to stage, how to check it, and where.",
    "ModelCacheStatus": "ModelCacheStatus says what the cache holds and where it stands.",
    "ModelCacheStorage": (
        "ModelCacheStorage is where the weights live: exactly one of an existing claim, a claim the cache "
        "creates, or a node-local directory. Immutable: a changed storage is a new cache."
    ),
    "PersistentVolumeClaimStorage": (
        "PersistentVolumeClaimStorage is an existing claim the cache writes into; the user owns it, and deleting "
        "the cache removes only the model's directory."
    ),
    "VolumeClaimTemplateStorage": (
        "VolumeClaimTemplateStorage is a claim the cache creates (named <cache>-cache), owned by the cache and "
        "deleted with it."
    ),
    "NodeLocalStorage": (
        "NodeLocalStorage is a directory on every node nodeSelector names; the cache is staged on each such node "
        "by its own Job, and status.nodes lists where it is ready."
    ),
    "SecretReference": "SecretReference names a Secret in the cache's namespace.",
    "DownloadPlacement": (
        "DownloadPlacement is where the download Job's pod may run; it does not decide where the model is served."
    ),
    "ModelCacheFile": "ModelCacheFile is one staged file.",
    "DownloadProgress": "DownloadProgress is how far the running download is, scraped from the download pod.",
    "ConfigMapKeySelector": "ConfigMapKeySelector selects one key of a ConfigMap in the cache's namespace.",
    "AttestationReference": (
        "AttestationReference names the DSSE envelope (an in-toto statement signed by a trusted key) whose "
        "subjects must carry the staged files' sha256 digests."
    ),
    "UpstreamIdentity": (
        "UpstreamIdentity identifies the source's content as seen without downloading it: its ETag (a Hugging "
        "Face commit, or a digest of an object-store listing, for multi-file sources), length and modification time."
    ),
    "GGUFMetadata": "GGUFMetadata is what the staged GGUF file's header says about the model.",
    "ServedDirectory": (
        "ServedDirectory names a re-staged copy (refreshPolicy OnChange) that gated pods mount instead of the "
        "first staging's directory, and the spec it was staged for."
    ),
    "ModelConfigMetadata": "ModelConfigMetadata is what the staged model's config.json says about it.",
}

#: Fields absent from the API reference, by type and JSON name.
EXTRA_FIELDS: dict[str, dict[str, str]] = {
    "AutoscalingPolicyStablePolicy": {
        "period": "Period is the length of the window the Instances and Percent limits apply to. Defaults to 15s.",
        "stabilizationWindow": (
            "StabilizationWindow is how far back recommendations are considered before acting; the most "
            "conservative recommendation in the window wins. Unset means no stabilization."
        ),
    },
    "AutoscalingPolicyPanicPolicy": {
        "period": "Period is the length of the window the Percent limit applies to in panic mode.",
        "panicModeHold": (
            "PanicModeHold is how long panic mode lasts after it was last triggered. 0s disables panic mode. "
            "Defaults to 60s."
        ),
    },
    "PodMetricSource": {
        "labelSelector": (
            "LabelSelector narrows the target's pods that are scraped (for example the decode role only); "
            "unset means every pod of the target."
        ),
    },
    "AutoscalingPolicyStatus": {"conditions": "Conditions describe the current state of the policy."},
    "ServingGroup": {
        "roles": (
            "Roles are the roles of every ServingGroup (1 to 4), for example prefill and decode. Each role "
            "instance is an entry pod plus workerReplicas worker pods."
        ),
    },
    "ModelServingStatus": {"conditions": "Conditions describe the current state of the ModelServing."},
    "ModelStatus": {"conditions": "Conditions describe the current state of the ModelBooster."},
    "TargetScalingStatus": {"lastScaleTime": "LastScaleTime is when the unit was last scaled."},
    "RoleRatioStatus": {
        "numeratorRole": "NumeratorRole is the role on the numerator side of the ratio.",
        "denominatorRole": "DenominatorRole is the role on the denominator side of the ratio.",
        "currentRatio": "CurrentRatio is the observed replicas[numeratorRole] / replicas[denominatorRole].",
    },
    "NetworkTopologySpec": {
        "mode": (
            "Mode is hard (the tier constraint must be met for the pods to be scheduled) or soft (best effort). "
            "Defaults to hard."
        ),
        "highestTierAllowed": (
            "HighestTierAllowed is the highest network tier the pods may span. Cannot be set together with "
            "highestTierName."
        ),
        "highestTierName": (
            "HighestTierName names the highest network tier the pods may span. Cannot be set together with "
            "highestTierAllowed."
        ),
    },
    "ModelPoolSpec": {
        "members": (
            "Members are the ModelServings of the pool's namespace that share the slots (1 to 64; a "
            "ModelServing belongs to one pool at most, and no AutoscalingPolicy may target a member: the pool "
            "controller is the only writer of its members' replicas)."
        ),
        "default": "Default is the member made resident on a cold pool (it must name a member).",
        "gpu": "GPU is the number of GPUs of one slot (informational).",
        "nodeSelector": (
            "NodeSelector names the labels of the nodes the slot is on (informational: a member whose entry "
            "template does not select them is reported in the MembersValid condition; its spec is never changed)."
        ),
        "swapPolicy": "SwapPolicy is sticky: a resident stays until another member has demand.",
        "swapBudget": (
            "SwapBudget is how long the activator holds a request for a non-resident member before answering 503 "
            "with Retry-After (a positive Go duration, default 300s)."
        ),
        "slots": (
            "Slots is how many members may be resident at once (default 1); with no free slot the least recently "
            "used idle resident is swapped out."
        ),
        "idleCheck": "IdleCheck says how a resident is found idle before it is swapped out.",
    },
    "PoolMember": {"modelServingRef": "ModelServingRef names the member's ModelServing."},
    "ModelServingReference": {"name": "Name of the ModelServing."},
    "IdleCheck": {
        "port": "Port of the metrics endpoint on the entry pods. Unset: the member's serving port.",
        "path": "Path of the metrics endpoint (default /metrics).",
        "metrics": (
            "Metrics are the gauges summed over the member's Ready entry pods. Unset: vllm:num_requests_running "
            "and vllm:num_requests_waiting."
        ),
    },
    "PoolSwap": {
        "from": "From is the member being swapped out (empty when a slot was free).",
        "to": "To is the member being made resident.",
        "step": (
            "Step is Draining (waiting for the idle check of the member swapped out), Releasing (it is at 0 "
            "replicas, waiting until its pods are gone) or Loading (the new member is at 1 replica, waiting until "
            "it is Ready)."
        ),
        "started": "Started is when the swap was decided (RFC 3339).",
        "drained": "Drained is when the member swapped out was scaled to 0 (RFC 3339).",
        "released": "Released is when its last pod was gone and the new member was scaled up (RFC 3339).",
    },
    "LastSwap": {
        "from": "From is the member that was swapped out (empty when a slot was free).",
        "to": "To is the member that was made resident.",
        "started": "Started is when the swap was decided (RFC 3339).",
        "drained": "Drained is when the member swapped out was scaled to 0 (RFC 3339).",
        "released": "Released is when its last pod was gone (RFC 3339).",
        "ready": "Ready is when the new member was Ready (RFC 3339).",
        "durationSeconds": "DurationSeconds is the time from started to ready, in seconds.",
    },
    "PoolMemberStatus": {
        "name": "Name of the member's ModelServing.",
        "phase": "Phase is Ready, Scaling, Stopped, Failed or Missing.",
        "resident": "Resident is true while the member holds a slot.",
        "replicas": "Replicas is the member's spec.replicas.",
        "lastRequestTime": "LastRequestTime is the latest request an activator reported for the member (RFC 3339).",
    },
    "ModelPoolStatus": {
        "observedGeneration": "ObservedGeneration is the generation this status describes.",
        "phase": "Phase is Pending, Ready, Swapping or Degraded.",
        "residentMember": "ResidentMember is the resident member (with several slots: the one made resident last).",
        "residentMembers": "ResidentMembers are all the members holding a slot.",
        "pendingMember": "PendingMember is the member the swap in progress brings in.",
        "evictingMember": "EvictingMember is the member the swap in progress drains (empty when a slot was free).",
        "swap": "Swap is the swap in progress (absent otherwise).",
        "lastSwap": "LastSwap is the last completed swap.",
        "members": "Members says where each member stands.",
        "conditions": "Conditions: SlotAllocated, MembersValid, SwapDeferred and Ready.",
    },
    "ModelCacheSpec": {
        "source": (
            "Source is the model to stage: hf://org/name or org/name (Hugging Face), s3://bucket/path or "
            "obs://bucket/path (S3-compatible; the endpoint comes from the secret's ENDPOINT), http(s)://..., "
            "or pvc://claim/path; ms:// only where the downloader has ModelScope support."
        ),
        "revision": (
            "Revision is the source revision to stage (a Hugging Face branch, tag or commit). Unset: the default."
        ),
        "files": "Files limits the download to these paths of the source. Unset: every file.",
        "sha256": "SHA256 is the expected sha256 of a one-file model (lower-case hex).",
        "fileSHA256": (
            "FileSHA256 maps file paths to their expected sha256 (lower-case hex). With files set, every key must "
            "be one of files."
        ),
        "sourceSecretRef": (
            "SourceSecretRef names a Secret whose keys become the download Job's environment (HF_TOKEN, "
            "ACCESS_KEY, SECRET_KEY, ENDPOINT, ...). Its values never appear in the status, Events or logs."
        ),
        "storage": "Storage is where the weights are staged (immutable).",
        "placement": "Placement constrains where the download Job's pod runs.",
        "prefetch": (
            "Prefetch stages the model as soon as the cache exists (true, the default); false waits until a "
            "ModelServing in the namespace names the cache."
        ),
        "maxWorkers": "MaxWorkers is how many files the downloader fetches in parallel.",
        "refreshPolicy": (
            "RefreshPolicy says what a change of the source does: IfNotPresent (the default) reports it on the "
            "SourceDrifted condition and keeps serving the staged copy; OnChange stages the new content beside the "
            "served copy and, once it is verified, moves the gated ModelServings onto it by a rollout."
        ),
        "revalidationInterval": (
            "RevalidationInterval is how often a remote source is checked for changes with metadata requests only "
            "(HEAD, a revision or listing lookup), jittered per cache. Unset: 1h; 0s turns revalidation off."
        ),
        "attestation": (
            "Attestation references a signed statement about the staged files; the manager verifies it against "
            "its trusted keys (see --model-attestation)."
        ),
    },
    "ConfigMapKeySelector": {
        "name": "Name of the ConfigMap, in the cache's namespace.",
        "key": "Key of the ConfigMap's data that holds the document.",
    },
    "AttestationReference": {
        "configMapKeyRef": "ConfigMapKeyRef is the ConfigMap key holding the DSSE envelope (JSON).",
        "policy": (
            "Policy is Warn or Enforce; it can only tighten the manager-wide --model-attestation mode, never "
            "relax it. Unset: the manager's mode (Warn when the manager's mode is off)."
        ),
    },
    "UpstreamIdentity": {
        "etag": "ETag is the source's ETag, Hugging Face commit, or the digest of a multi-object listing.",
        "contentLength": "ContentLength is the source's size in bytes (the sum, for several files).",
        "lastModified": "LastModified is the source's modification time, when it reports one.",
    },
    "ServedDirectory": {
        "directory": "Directory is the re-staged copy's directory inside the storage (<first directory>-<token>).",
        "fingerprint": "Fingerprint is the staging spec's fingerprint it was staged and verified for.",
    },
    "GGUFMetadata": {
        "fileVersion": "FileVersion is the GGUF format version (2 or 3).",
        "architecture": "Architecture is general.architecture (e.g. llama).",
        "modelName": "ModelName is general.name.",
        "license": "License is general.license.",
        "contextLength": "ContextLength is <arch>.context_length (tokens).",
        "embeddingSize": "EmbeddingSize is <arch>.embedding_length.",
        "layerCount": "LayerCount is <arch>.block_count.",
        "headCount": "HeadCount is <arch>.attention.head_count.",
        "headCountKV": "HeadCountKV is <arch>.attention.head_count_kv (grouped-query attention).",
        "keyLength": "KeyLength is <arch>.attention.key_length.",
        "valueLength": "ValueLength is <arch>.attention.value_length.",
        "quantization": "Quantization is the file type named from general.file_type (e.g. Q4_K_M).",
        "tensorCount": "TensorCount is the number of tensors in the file.",
    },
    "ModelConfigMetadata": {
        "architecture": "Architecture is the first entry of config.json's architectures.",
        "modelType": "ModelType is config.json's model_type.",
        "contextLength": "ContextLength is config.json's max_position_embeddings (or its equivalent).",
        "torchDtype": "TorchDtype is config.json's torch_dtype.",
    },
    "SecretReference": {"name": "Name of the Secret."},
    "PersistentVolumeClaimStorage": {"claimName": "ClaimName is the name of the claim, in the cache's namespace."},
    "VolumeClaimTemplateStorage": {
        "storageClassName": "StorageClassName of the claim. Unset: the cluster's default class.",
        "size": "Size of the claim (its storage request).",
        "accessModes": "AccessModes of the claim; ReadWriteMany lets pods on every node mount it.",
    },
    "NodeLocalStorage": {
        "path": "Path is the directory on each node (a hostPath); the model goes into a subdirectory of it.",
        "nodeSelector": "NodeSelector picks the nodes the model is staged on (at least one label).",
    },
    "ModelCacheStorage": {
        "persistentVolumeClaim": "PersistentVolumeClaim is an existing claim to stage into.",
        "volumeClaimTemplate": "VolumeClaimTemplate is a claim the cache creates and owns.",
        "nodeLocal": "NodeLocal is a directory on every node a selector names.",
    },
    "DownloadPlacement": {
        "nodeSelector": "NodeSelector of the download pod (node-local caches are pinned to their node anyway).",
        "tolerations": "Tolerations of the download pod.",
        "affinity": "Affinity of the download pod.",
    },
    "ModelCacheFile": {
        "name": "Name is the file's path relative to the model directory.",
        "size": "Size in bytes.",
        "sha256": "SHA256 is the file's verified sha256 (lower-case hex).",
    },
    "DownloadProgress": {
        "bytesDone": "BytesDone is how many bytes are downloaded and verified so far.",
        "bytesTotal": "BytesTotal is the size of the whole download, when known.",
        "filesDone": "FilesDone is how many files are complete.",
        "filesTotal": "FilesTotal is how many files the download has, when known.",
        "percent": "Percent is bytesDone of bytesTotal, e.g. 42%.",
        "etaSeconds": "EtaSeconds is the estimated time left, in seconds.",
    },
    "ModelCacheStatus": {
        "phase": "Phase is Pending, Downloading, Ready or Failed.",
        "path": (
            "Path says where the model is: pvc://<claim>/<dir> for a claim, <nodeLocal.path>/<dir> on each ready "
            "node for a node-local cache."
        ),
        "size": "Size of the staged files, human-readable (e.g. 2.0 GiB).",
        "sizeBytes": "SizeBytes is the size of the staged files in bytes.",
        "files": "Files are the staged files with their sizes and verified digests.",
        "sha256": "SHA256 is the digest of a one-file model.",
        "revision": "Revision is the source revision that was staged, as the source reported it.",
        "progress": "Progress of the running download (only while Downloading).",
        "nodes": "Nodes are the nodes where a node-local cache is ready.",
        "jobName": "JobName is the newest download Job of the current spec.",
        "fingerprint": "Fingerprint identifies the staging spec (source, revision, files, digests, storage).",
        "sourceETag": "SourceETag identifies the source content that is staged (see UpstreamIdentity.etag).",
        "sourceContentLength": "SourceContentLength is the size the source reported for the staged content.",
        "sourceLastModified": "SourceLastModified is the modification time the source reported for it.",
        "upstream": "Upstream is the source's identity at the last revalidation.",
        "lastRevalidated": "LastRevalidated is when the source was last checked for changes.",
        "servedDirectory": (
            "ServedDirectory is the verified re-staged copy gated pods mount (OnChange); absent: the first "
            "staging's directory."
        ),
        "gguf": "GGUF is the metadata of the staged GGUF file's header (GGUF models).",
        "modelConfig": "ModelConfig is the metadata of the staged config.json (Hugging Face models).",
        "observedGeneration": "ObservedGeneration is the generation this status describes.",
        "conditions": "Conditions: Ready, Progressing, Degraded, SourceDrifted and AttestationVerified.",
    },
    "Condition": {
        "type": "Type of the condition, in CamelCase or in foo.example.com/CamelCase.",
        "status": "Status of the condition: True, False or Unknown.",
        "observedGeneration": "The .metadata.generation the condition was set based upon.",
        "lastTransitionTime": "The last time the condition transitioned from one status to another.",
        "reason": "A programmatic identifier (CamelCase) of the reason for the last transition.",
        "message": "A human-readable message with details about the transition.",
    },
}

#: Reference texts replaced because they contradict the API kthena_py implements (see ``DIFFERENCES``).
OVERRIDES: dict[str, dict[str, str]] = {
    "PluginScope": {
        "target": "Target limits the plugin to specific pod targets (All, Entry or Worker). Unset means All.",
    },
}

#: The standard texts of ``apiVersion``, ``kind`` and ``metadata`` of a top-level object.
COMMON_FIELDS = {
    "apiVersion": (
        "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
        "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
    ),
    "kind": (
        "Kind is a string value representing the REST resource this object represents. Servers may infer this "
        "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
    ),
    "metadata": (
        "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    ),
}


#: Code-generator markers (kubebuilder validation markers, ``+optional``, ``+listType=...``) in comment text.
MARKER = re.compile(
    r"\+?kubebuilder:\S+"
    r"|\+(?:optional|required|k8s:\S+|listType=\S+|listMapKey=\S+|mapType=\S+|structType=\S+)"
    r"|\b(?:MaxItems|MinItems|MaxLength|MinLength|Maximum|Minimum|ExclusiveMaximum|ExclusiveMinimum|MaxProperties"
    r"|MinProperties|MultipleOf):\s*-?\d+(?:\.\d+)?"
)


def clean(text: str) -> str:
    """Remove marker text (see :data:`MARKER`) from a description and tidy the spaces left behind."""
    text = MARKER.sub("", text)
    return re.sub(r"\s{2,}", " ", text).strip()


@functools.cache
def _reference() -> dict[str, Any]:
    text = resources.files("kthena_py.api.crdgen").joinpath("data", "descriptions.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def type_description(type_name: str) -> str:
    """Return the description of a type (``""`` when undocumented).

    Args:
        type_name: The type's name in the API reference, e.g. ``ServingGroup``.
    """
    types: dict[str, str] = _reference()["types"]
    return clean(types.get(type_name, "")) or EXTRA_TYPES.get(type_name, "")


def field_description(type_name: str, json_name: str) -> str:
    """Return the description of a field (``""`` when undocumented).

    Args:
        type_name: The type that has the field, e.g. ``Role``.
        json_name: The field's JSON name, e.g. ``workerReplicas``.
    """
    override = OVERRIDES.get(type_name, {}).get(json_name)
    if override:
        return override
    fields: dict[str, dict[str, str]] = _reference()["fields"]
    text = clean(fields.get(type_name, {}).get(json_name, ""))
    return text or EXTRA_FIELDS.get(type_name, {}).get(json_name, "")


def value_description(type_name: str, value: str) -> str:
    """Return the description of one value of an enum type (``""`` when undocumented)."""
    values: dict[str, dict[str, str]] = _reference()["values"]
    return clean(values.get(type_name, {}).get(value, ""))
