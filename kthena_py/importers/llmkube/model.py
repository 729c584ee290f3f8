"""LLMKube Model -> ModelCache: what to stage, how to check it, where the download runs and where it lands.

Guarantees:

* One ModelCache per Model, same name and namespace, ``prefetch`` always written (LLMKube's default is to stage
  when a service needs the weights, kthena_py's is to stage at once; the import keeps LLMKube's behaviour).
* :func:`staging_source` decides the cache's ``source`` and ``files`` (pure): sources the downloader cannot
  fetch (``file://``, absolute paths, ``oci://``) are refused with the field named, never guessed.
* Every field present in the Model appears once in the report, under its row of
  :data:`~kthena_py.importers.llmkube.model_table.MODEL_TABLE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kthena_py.importers.context import ImportContext, ImportDocument
from kthena_py.importers.documents import (
    boolean,
    integer,
    mapping,
    object_list,
    report_fields,
    string,
    string_list,
    string_map,
)
from kthena_py.importers.llmkube.common import emitted_metadata
from kthena_py.importers.llmkube.model_table import MODEL_TABLE
from kthena_py.importers.report import ImportFailure, ReportLine

__all__ = ["DEFAULT_CACHE_SIZE", "MODELCACHE_API_VERSION", "staging_source", "translate_model"]

MODELCACHE_API_VERSION = "serving.kthena-py.io/v1alpha1"
DEFAULT_CACHE_SIZE = "100Gi"
"""The claim a cache creates when the Model names none: LLMKube's shared cache has no per-model size to copy."""

_FETCHED = ("http://", "https://", "hf://", "s3://", "pvc://")
_UNFETCHABLE = ("file://", "oci://")


def _relative(source: str, entry: str) -> str:
    prefix = source.rstrip("/") + "/"
    return entry[len(prefix) :] if entry.startswith(prefix) else entry


def staging_source(source: str | None, files: Sequence[str]) -> tuple[str, list[str]] | str:
    """The cache's ``(source, files)`` for a Model's ``source`` and ``files``, or why there is none.

    Absolute URLs among ``files`` that lie under ``source`` become paths relative to it; without a source, the
    files' common URL directory becomes the source. Returns an error message (for ``spec.source``) when the
    source cannot be downloaded by a Job or no common source exists.
    """
    if source is not None:
        if source.startswith(_UNFETCHABLE) or source.startswith("/"):
            return f"source {source!r} is read in place by LLMKube; stage it on a claim and use pvc://claim/path"
        entries = [_relative(source, entry) for entry in files]
        stray = [entry for entry in entries if "://" in entry]
        if stray:
            return f"file {stray[0]!r} is not under the source {source!r}"
        return source, entries
    if not files:
        return "no source and no files: nothing to stage"
    if not all(entry.startswith(_FETCHED) for entry in files):
        return "no source, and not every file is an absolute URL"
    directories = {entry.rsplit("/", 1)[0] for entry in files}
    if len(directories) != 1:
        return "no source, and the files' URLs do not share one directory: split the Model per directory"
    common = directories.pop()
    return common, [_relative(common, entry) for entry in files]


def _storage(doc: ImportDocument) -> dict[str, Any]:
    claim = string(doc, "spec.modelCache.claimName")
    if claim:
        return {"persistentVolumeClaim": {"claimName": claim}}
    template: dict[str, Any] = {"size": DEFAULT_CACHE_SIZE, "accessModes": ["ReadWriteMany"]}
    storage_class = string(doc, "spec.modelCache.storageClassName")
    if storage_class:
        template["storageClassName"] = storage_class
    return {"volumeClaimTemplate": template}


def _placement(doc: ImportDocument) -> dict[str, Any]:
    placement: dict[str, Any] = {}
    node_selector = string_map(doc, "spec.prefetchNodeSelector")
    if node_selector:
        placement["nodeSelector"] = node_selector
    tolerations = object_list(doc, "spec.prefetchTolerations")
    if tolerations:
        placement["tolerations"] = [dict(item) for item in tolerations]
    affinity = mapping(doc, "spec.prefetchAffinity")
    if affinity:
        placement["affinity"] = dict(affinity)
    return placement


def _cache_spec(doc: ImportDocument) -> dict[str, Any]:
    files = list(string_list(doc, "spec.files") or [])
    mmproj = string(doc, "spec.mmproj")
    if mmproj:
        files.append(mmproj)
    staged = staging_source(string(doc, "spec.source"), files)
    if isinstance(staged, str):
        raise ImportFailure(doc.index, doc.source, "spec.source", staged)
    source, entries = staged
    spec: dict[str, Any] = {"source": source}
    if entries:
        spec["files"] = entries
    sha256 = string(doc, "spec.sha256")
    if sha256:
        spec["sha256"] = sha256.lower()
    file_sha = string_map(doc, "spec.fileSha256")
    if file_sha:
        spec["fileSHA256"] = {_relative(source, key): value.lower() for key, value in file_sha.items()}
    secret = string(doc, "spec.sourceSecretRef.name")
    if secret:
        spec["sourceSecretRef"] = {"name": secret}
    spec["storage"] = _storage(doc)
    placement = _placement(doc)
    if placement:
        spec["placement"] = placement
    prefetch = boolean(doc, "spec.prefetch")
    alias = boolean(doc, "spec.modelCache.prefetch")
    spec["prefetch"] = bool(prefetch) or bool(alias)
    workers = integer(doc, "spec.downloadConcurrency")
    if workers is not None:
        spec["maxWorkers"] = workers
    refresh = string(doc, "spec.refreshPolicy")
    if refresh:
        spec["refreshPolicy"] = refresh
    config_map = string(doc, "spec.attestation.configMapKeyRef.name")
    key = string(doc, "spec.attestation.configMapKeyRef.key")
    if config_map or key:
        if not (config_map and key):
            path = "spec.attestation.configMapKeyRef." + ("key" if config_map else "name")
            raise ImportFailure(doc.index, doc.source, path, "the attestation needs both a ConfigMap name and key")
        spec["attestation"] = {"configMapKeyRef": {"name": config_map, "key": key}}
    return spec


def translate_model(doc: ImportDocument, context: ImportContext) -> tuple[list[dict[str, Any]], list[ReportLine]]:
    """The ModelCache of an LLMKube Model, and the report on every field present."""
    lines = report_fields(doc, MODEL_TABLE)
    cache = {
        "apiVersion": MODELCACHE_API_VERSION,
        "kind": "ModelCache",
        "metadata": emitted_metadata(doc),
        "spec": _cache_spec(doc),
    }
    return [cache], lines
