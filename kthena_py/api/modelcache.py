"""``ModelCache`` (``serving.kthena-py.io/v1alpha1``): model weights downloaded once, verified, ready before pods.

A kind of kthena_py's own group, never Kthena's (Kthena's specs are extended only through annotations). A
ModelCache stages ``spec.source`` into ``spec.storage`` with a Job running ``kthena-py download``, checks every
file's sha256 while it streams, and reports ``status.phase`` Pending -> Downloading -> Ready (or Failed). A
ModelServing that names a cache in the annotation :data:`kthena_py.vocab.labels.MODEL_CACHE` gets no pods until
the cache is Ready, then mounts it read-only at :data:`MODEL_CACHE_MOUNT_PATH` with :data:`MODEL_PATH_ENV`
pointing at the model.

Guarantees (on top of :mod:`kthena_py.api.common`): exactly one storage kind is set; ``sha256`` and
``fileSHA256`` are lower-case hex digests and exclusive; :func:`model_dir` is the one place the model's
directory inside the storage is derived (Kthena's ``md5(modelURI)`` naming, so a ModelBooster's per-pod
downloader and a cache over the same claim find the same files).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from kthena_py.api.common import ApiObject, Condition, KthenaModel
from kthena_py.api.duration import Duration
from kthena_py.api.quantity import Quantity

__all__ = [
    "MODEL_CACHE_API_VERSION",
    "MODEL_CACHE_GROUP",
    "MODEL_CACHE_KIND",
    "MODEL_CACHE_LIST_KIND",
    "MODEL_CACHE_MOUNT_PATH",
    "MODEL_CACHE_NAME_ENV",
    "MODEL_CACHE_PLURAL",
    "MODEL_CACHE_VERSION",
    "MODEL_CACHE_VOLUME",
    "MODEL_PATH_ENV",
    "PHASE_DOWNLOADING",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_READY",
    "REFRESH_IF_NOT_PRESENT",
    "REFRESH_ON_CHANGE",
    "AttestationPolicy",
    "AttestationReference",
    "ConfigMapKeySelector",
    "DownloadPlacement",
    "DownloadProgress",
    "GGUFMetadata",
    "ModelCache",
    "ModelCacheFile",
    "ModelCacheList",
    "ModelCachePhase",
    "ModelCacheSpec",
    "ModelCacheStatus",
    "ModelCacheStorage",
    "ModelConfigMetadata",
    "NodeLocalStorage",
    "PersistentVolumeClaimStorage",
    "RefreshPolicy",
    "SecretReference",
    "ServedDirectory",
    "UpstreamIdentity",
    "VolumeClaimTemplateStorage",
    "model_dir",
]

MODEL_CACHE_GROUP = "serving.kthena-py.io"
MODEL_CACHE_VERSION = "v1alpha1"
MODEL_CACHE_API_VERSION = f"{MODEL_CACHE_GROUP}/{MODEL_CACHE_VERSION}"
MODEL_CACHE_KIND = "ModelCache"
MODEL_CACHE_LIST_KIND = "ModelCacheList"
MODEL_CACHE_PLURAL = "modelcaches"

MODEL_CACHE_VOLUME = "kthena-model-cache"
"""The volume name a gated ModelServing's pods mount the cache under."""
MODEL_CACHE_MOUNT_PATH = "/model-cache"
"""Where every container of a gated pod finds the model (read-only); the same for every cache, so re-pointing a
ModelServing at a new cache changes no engine argument."""
MODEL_PATH_ENV = "KTHENA_MODEL_PATH"
"""The env var every container of a gated pod gets: the model's directory (:data:`MODEL_CACHE_MOUNT_PATH`)."""
MODEL_CACHE_NAME_ENV = "KTHENA_MODEL_CACHE"
"""The env var naming the ModelCache a gated pod serves."""

ModelCachePhase = Literal["Pending", "Downloading", "Ready", "Failed"]
PHASE_PENDING: ModelCachePhase = "Pending"
"""Nothing staged yet, and no download running (waiting for a ModelServing, a claim, or the download pod)."""
PHASE_DOWNLOADING: ModelCachePhase = "Downloading"
"""The download pod runs."""
PHASE_READY: ModelCachePhase = "Ready"
"""Every file is staged and verified (on at least one node, for a node-local cache)."""
PHASE_FAILED: ModelCachePhase = "Failed"
"""The last download failed (and is retried with backoff), or the storage is unavailable."""

RefreshPolicy = Literal["IfNotPresent", "OnChange"]
REFRESH_IF_NOT_PRESENT: RefreshPolicy = "IfNotPresent"
"""Stage once; a changed source is reported (``SourceDrifted``), never re-fetched on its own."""
REFRESH_ON_CHANGE: RefreshPolicy = "OnChange"
"""A changed source is staged beside the served copy, which the gated ModelServings leave by a rollout."""

AttestationPolicy = Literal["Warn", "Enforce"]
"""A cache's own attestation policy; it can only tighten the manager's ``--model-attestation`` mode."""

_SHA256 = r"^[a-f0-9]{64}$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_ACCESS_MODE = Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]
_READ_WRITE_MANY: _ACCESS_MODE = "ReadWriteMany"


class SecretReference(KthenaModel):
    """A Secret in the cache's namespace whose keys become the download Job's env (credentials)."""

    name: str = Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)


class PersistentVolumeClaimStorage(KthenaModel):
    """An existing claim the cache writes into (the user owns it; deleting the cache removes only its files)."""

    claim_name: str = Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)


class VolumeClaimTemplateStorage(KthenaModel):
    """A claim the cache creates (named ``<cache>-cache``, owned by the cache, deleted with it)."""

    storage_class_name: str | None = None
    size: Quantity
    access_modes: list[_ACCESS_MODE] = Field(default_factory=lambda: [_READ_WRITE_MANY], min_length=1)


class NodeLocalStorage(KthenaModel):
    """A directory on each node ``nodeSelector`` names; the cache is prefetched on every such node."""

    path: str = Field(min_length=2, pattern=r"^/[^\x00]*$")
    node_selector: dict[str, str] = Field(min_length=1)


class ModelCacheStorage(KthenaModel):
    """Where the weights live: exactly one of an existing claim, a claim to create, or a node-local path."""

    persistent_volume_claim: PersistentVolumeClaimStorage | None = None
    volume_claim_template: VolumeClaimTemplateStorage | None = None
    node_local: NodeLocalStorage | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        chosen = [
            name
            for name, value in (
                ("persistentVolumeClaim", self.persistent_volume_claim),
                ("volumeClaimTemplate", self.volume_claim_template),
                ("nodeLocal", self.node_local),
            )
            if value is not None
        ]
        if len(chosen) != 1:
            raise ValueError(
                "exactly one of persistentVolumeClaim, volumeClaimTemplate, nodeLocal must be set"
                + (f" (got {', '.join(chosen)})" if chosen else "")
            )
        return self


class DownloadPlacement(KthenaModel):
    """Where the download Job's pod may run; it governs nothing else (not where the model is served)."""

    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    affinity: dict[str, Any] | None = None


class ConfigMapKeySelector(KthenaModel):
    """One key of a ConfigMap in the cache's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")


class AttestationReference(KthenaModel):
    """Where the cache's signed attestation (a DSSE envelope holding an in-toto statement) is, and how strictly."""

    config_map_key_ref: ConfigMapKeySelector
    policy: AttestationPolicy | None = None


class ModelCacheSpec(KthenaModel):
    """What to stage, how to check it, and where."""

    source: str = Field(min_length=1, max_length=2048)
    revision: str | None = Field(default=None, min_length=1, max_length=256)
    files: list[str] | None = Field(default=None, min_length=1)
    sha256: str | None = Field(default=None, pattern=_SHA256)
    file_sha256: dict[str, str] | None = Field(default=None, alias="fileSHA256", min_length=1)
    source_secret_ref: SecretReference | None = None
    storage: ModelCacheStorage
    placement: DownloadPlacement | None = None
    prefetch: bool = True
    max_workers: int = Field(default=8, ge=1, le=64)
    refresh_policy: RefreshPolicy = REFRESH_IF_NOT_PRESENT
    revalidation_interval: Duration | None = None
    attestation: AttestationReference | None = None

    @model_validator(mode="after")
    def _digests(self) -> Self:
        if self.sha256 is not None and self.file_sha256 is not None:
            raise ValueError("sha256 and fileSHA256 are mutually exclusive: sha256 pins a one-file model")
        for name, digest in (self.file_sha256 or {}).items():
            if not name:
                raise ValueError("fileSHA256 keys must be file names")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"fileSHA256[{name}] must be 64 lower-case hex digits")
        return self


class ModelCacheFile(KthenaModel):
    """One staged file: its path relative to the model directory, size and verified sha256."""

    name: str
    size: int = Field(ge=0)
    sha256: str


class DownloadProgress(KthenaModel):
    """How far the running download is (scraped from the download pod while it runs)."""

    bytes_done: int = Field(ge=0)
    bytes_total: int | None = Field(default=None, ge=0)
    files_done: int = Field(ge=0)
    files_total: int | None = Field(default=None, ge=0)
    percent: str | None = None
    eta_seconds: int | None = Field(default=None, ge=0)


class UpstreamIdentity(KthenaModel):
    """What identifies the source's content without reading it: ETag (or commit / listing digest) and length."""

    etag: str | None = None
    content_length: int | None = Field(default=None, ge=0)
    last_modified: str | None = None


class ServedDirectory(KthenaModel):
    """A verified re-staged copy (``refreshPolicy: OnChange``) that gated pods mount, for one staging spec."""

    directory: str = Field(min_length=1, max_length=253, pattern=r"^[a-f0-9]{32}-[a-f0-9]{8}$")
    fingerprint: str = Field(min_length=1, max_length=64)


class GGUFMetadata(KthenaModel):
    """What a GGUF file's header says about the model (LLMKube's ``status.gguf``; 0 or absent: not given)."""

    file_version: int | None = Field(default=None, ge=0)
    architecture: str | None = None
    model_name: str | None = None
    license: str | None = None
    context_length: int | None = Field(default=None, ge=0)
    embedding_size: int | None = Field(default=None, ge=0)
    layer_count: int | None = Field(default=None, ge=0)
    head_count: int | None = Field(default=None, ge=0)
    head_count_kv: int | None = Field(default=None, ge=0, alias="headCountKV")
    key_length: int | None = Field(default=None, ge=0)
    value_length: int | None = Field(default=None, ge=0)
    quantization: str | None = None
    tensor_count: int | None = Field(default=None, ge=0)


class ModelConfigMetadata(KthenaModel):
    """What a Hugging Face model's ``config.json`` says (safetensors / PyTorch models)."""

    architecture: str | None = None
    model_type: str | None = None
    context_length: int | None = Field(default=None, ge=0)
    torch_dtype: str | None = None


class ModelCacheStatus(KthenaModel):
    """What the cache holds and where it stands."""

    phase: ModelCachePhase | None = None
    path: str | None = None
    size: str | None = None
    size_bytes: int | None = Field(default=None, ge=0)
    files: list[ModelCacheFile] | None = None
    sha256: str | None = None
    revision: str | None = None
    progress: DownloadProgress | None = None
    nodes: list[str] | None = None
    job_name: str | None = None
    fingerprint: str | None = None
    source_etag: str | None = Field(default=None, alias="sourceETag")
    source_content_length: int | None = Field(default=None, ge=0)
    source_last_modified: str | None = None
    upstream: UpstreamIdentity | None = None
    last_revalidated: str | None = None
    served_directory: ServedDirectory | None = None
    gguf: GGUFMetadata | None = None
    model_config_metadata: ModelConfigMetadata | None = Field(default=None, alias="modelConfig")
    observed_generation: int | None = Field(default=None, ge=0)
    conditions: list[Condition] | None = None


class ModelCache(ApiObject):
    """Model weights staged once into shared storage, verified, and gating the ModelServings that name them."""

    api_version: Literal["serving.kthena-py.io/v1alpha1"] = "serving.kthena-py.io/v1alpha1"
    kind: Literal["ModelCache"] = "ModelCache"
    spec: ModelCacheSpec
    status: ModelCacheStatus | None = None


class ModelCacheList(KthenaModel):
    """A list of ModelCaches."""

    api_version: Literal["serving.kthena-py.io/v1alpha1"] = "serving.kthena-py.io/v1alpha1"
    kind: Literal["ModelCacheList"] = "ModelCacheList"
    metadata: dict[str, Any] | None = None
    items: list[ModelCache] = Field(default_factory=list)


def model_dir(source: str, revision: str | None = None) -> str:
    """Return the model's directory name inside the cache's storage.

    Kthena's ModelBooster names the directory ``md5(modelURI)``; a cache of the same source without a revision
    uses the same name, so both find the same files. A pinned revision gets its own directory
    (``md5(source@revision)``), so staging a new revision never overwrites files a running pod reads.
    """
    key = source if revision is None else f"{source}@{revision}"
    return hashlib.md5(key.encode(), usedforsecurity=False).hexdigest()
