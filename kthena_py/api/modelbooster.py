"""``ModelBooster`` (deprecated upstream since Kthena v1.1) and its nested types.

Guarantees (on top of :mod:`kthena_py.api.common`): every field of the reference exists with its documented
default, enum, pattern and bounds. Embedded Kubernetes types (env, envFrom, resources, affinity, tolerations,
the networking ``ModelMatch``) and the engine ``config`` are opaque JSON. Cross-field rules (worker types per
backend type, engine ports, PVC reachability, KV connectors) live in :mod:`kthena_py.api.validation`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kthena_py.api.common import Condition, KthenaModel, KthenaObject

__all__ = [
    "MODEL_BOOSTER_DEPRECATION_WARNING",
    "ModelBackend",
    "ModelBackendType",
    "ModelBooster",
    "ModelBoosterList",
    "ModelBoosterSpec",
    "ModelStatus",
    "ModelWorker",
    "ModelWorkerType",
]

#: The admission warning Kthena's webhook attaches to ModelBooster creates and spec updates.
MODEL_BOOSTER_DEPRECATION_WARNING = (
    "ModelBooster is deprecated as of Kthena v1.1. Use ModelServing, ModelServer, and ModelRoute instead. "
    "ModelBooster will be removed no earlier than Kthena v1.5."
)

ModelBackendType = Literal["vLLM", "vLLMDisaggregated"]
ModelWorkerType = Literal["server", "prefill", "decode", "controller", "coordinator"]

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_MAX_REPLICAS = 1_000_000


class ModelWorker(KthenaModel):
    """One engine worker kind of a backend (server, prefill, decode, ...)."""

    type: ModelWorkerType = "server"
    image: str | None = None
    replicas: int | None = Field(default=None, ge=0, le=_MAX_REPLICAS)
    pods: int | None = Field(default=None, ge=0, le=_MAX_REPLICAS)
    resources: dict[str, Any] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    config: Any = None


class ModelBackend(KthenaModel):
    """The inference backend a ModelBooster expands into (one ModelServing)."""

    name: str = Field(pattern=_DNS_LABEL)
    type: ModelBackendType
    model_uri: str = Field(alias="modelURI", pattern=r"^(hf://|s3://|obs://|pvc://|ms://).+")
    cache_uri: str | None = Field(default=None, alias="cacheURI", pattern=r"^(hostpath://|pvc://).+")
    env_from: list[dict[str, Any]] | None = None
    env: list[dict[str, Any]] | None = None
    replicas: int = Field(ge=0, le=_MAX_REPLICAS)
    workers: list[ModelWorker] = Field(min_length=1, max_length=1000)
    scheduler_name: str | None = None
    runtime_class_name: str | None = None


class ModelBoosterSpec(KthenaModel):
    """The desired state of a ModelBooster."""

    name: str | None = Field(default=None, max_length=64, pattern=_DNS_LABEL)
    owner: str | None = None
    backend: ModelBackend
    model_match: dict[str, Any] | None = None


class ModelStatus(KthenaModel):
    """The observed state of a ModelBooster (``conditions`` is Kthena's, absent from the reference)."""

    observed_generation: int | None = None
    conditions: list[Condition] | None = None


class ModelBooster(KthenaObject):
    """A ModelBooster: one model backend expanded into a ModelServing, a ModelServer and a ModelRoute."""

    kind: Literal["ModelBooster"] = "ModelBooster"
    spec: ModelBoosterSpec
    status: ModelStatus | None = None


class ModelBoosterList(KthenaObject):
    """A list of ModelBoosters."""

    kind: Literal["ModelBoosterList"] = "ModelBoosterList"
    items: list[ModelBooster]
