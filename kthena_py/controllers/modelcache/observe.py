"""What the ModelCache reconciler reads: the cache, its Jobs with their pods, its claim, nodes, ModelServings.

Guarantees:

* Jobs, claims, nodes and ModelServings come from the informer cache; a cache's Jobs are those it owns
  (owner UID), whatever their labels say.
* Pods are read live, with one label-selected LIST per reconcile and only when the cache has Jobs: the manager's
  shared pod cache holds only ModelServing pods (:func:`~kthena_py.controllers.resources.narrow_cache`), and a
  download pod's termination message and IP are needed only while its Job runs or just finished.
* A ModelServing names a cache by the annotation :data:`~kthena_py.vocab.labels.MODEL_CACHE` (same namespace).
* Superseded copies (:mod:`.retirement`): the cached pods' mounts of the claim and the naming ModelServings'
  rollouts, read only while the cache may have a copy to retire.
* The ConfigMap of ``spec.attestation`` is read live (one GET, only when the cache references one; ConfigMaps
  are not cached nor watched): :func:`read_attestation`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import pydantic

from kthena_py.api.modelcache import (
    MODEL_CACHE_API_VERSION,
    MODEL_CACHE_KIND,
    DownloadProgress,
    ModelCache,
    ModelCacheStatus,
)
from kthena_py.kube import KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, annotations_of, name_of
from kthena_py.kube.resources import CONFIGMAPS, JOBS, NODES, PERSISTENT_VOLUME_CLAIMS, PODS
from kthena_py.plan.modelcache import (
    AttestationDocument,
    Observed,
    claim_view,
    job_view,
    label_value,
    node_view,
    uses_claim,
)
from kthena_py.runtime.cache import CacheReader
from kthena_py.vocab.labels import MODEL_CACHE, MODEL_CACHE_NAME

from ..resources import MODELSERVINGS
from .retirement import cached_mounts, may_retire, rollouts

__all__ = ["naming_modelservings", "observe", "parse_cache", "read_attestation"]


def parse_cache(obj: KubeObject) -> ModelCache:
    """Parse a cached ModelCache; a status our model does not accept is dropped (it is rewritten anyway).

    Raises:
        pydantic.ValidationError: The spec or metadata is invalid.
    """
    document: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", MODEL_CACHE_API_VERSION),
        "kind": MODEL_CACHE_KIND,
        "metadata": obj.get("metadata") or {},
        "spec": obj.get("spec") or {},
    }
    cache = ModelCache.model_validate(document)
    try:
        status = ModelCacheStatus.model_validate(obj.get("status") or {})
    except pydantic.ValidationError:
        return cache
    return cache.model_copy(update={"status": status})


def naming_modelservings(cache: CacheReader, namespace: str, name: str) -> tuple[str, ...]:
    """The ModelServings of ``namespace`` whose annotation names the cache ``name``."""
    return tuple(
        sorted(
            name_of(ms) for ms in cache.list(MODELSERVINGS, namespace) if annotations_of(ms).get(MODEL_CACHE) == name
        )
    )


async def read_attestation(client: KubeApi, mc: ModelCache) -> AttestationDocument | None:
    """The envelope ``spec.attestation`` references (live GET), ``None`` when it references none.

    Raises:
        ApiError: The read failed other than with NotFound (the engine retries).
    """
    reference = mc.spec.attestation
    if reference is None:
        return None
    ref = reference.config_map_key_ref
    try:
        config_map = await client.get(CONFIGMAPS, ref.name, mc.namespace)
    except NotFound:
        return AttestationDocument(missing=f"ConfigMap {ref.name} not found in namespace {mc.namespace}")
    data = config_map.get("data") or {}
    binary = config_map.get("binaryData") or {}
    if isinstance(data.get(ref.key), str):
        return AttestationDocument(text=data[ref.key])
    if isinstance(binary.get(ref.key), str):
        try:
            return AttestationDocument(text=base64.b64decode(binary[ref.key]).decode("utf-8"))
        except (binascii.Error, UnicodeDecodeError):
            return AttestationDocument(text="")  # not an envelope: the verdict says so
    return AttestationDocument(missing=f"ConfigMap {ref.name} has no key {ref.key}")


async def observe(
    client: KubeApi,
    cache: CacheReader,
    mc: ModelCache,
    progress: dict[str, DownloadProgress] | None = None,
    *,
    attestation: bool = True,
) -> Observed:
    """Everything :func:`~kthena_py.plan.modelcache.plan_cache` and ``plan_deletion`` need about ``mc``.

    ``attestation=False`` skips the attestation read (a deletion does not need it).
    """
    jobs = cache.owned_by(JOBS, mc.uid) if mc.uid else []
    pods: list[KubeObject] = []
    if jobs:
        listed = await client.list(PODS, mc.namespace, label_selector=f"{MODEL_CACHE_NAME}={label_value(mc.name)}")
        pods = list(listed.items)
    claim_name = uses_claim(mc)
    claim = cache.get(PERSISTENT_VOLUME_CLAIMS, claim_name, mc.namespace) if claim_name else None
    nodes = cache.list(NODES) if mc.spec.storage.node_local is not None else []
    users = naming_modelservings(cache, mc.namespace, mc.name)
    views = tuple(sorted((job_view(j, pods) for j in jobs), key=lambda v: v.name))
    retiring = claim_name is not None and may_retire(views)  # retire: superseded copies (see .retirement)
    return Observed(
        jobs=views,
        claim=claim_view(claim) if claim is not None else None,
        nodes=tuple(node_view(n) for n in nodes),
        requested=bool(users),
        in_use_by=users,
        progress=progress or {},
        attestation=await read_attestation(client, mc) if attestation else None,
        mounts=cached_mounts(cache, mc.namespace, claim_name) if retiring and claim_name else (),
        rollouts=rollouts([o for o in cache.list(MODELSERVINGS, mc.namespace) if name_of(o) in users])
        if retiring
        else (),
    )
