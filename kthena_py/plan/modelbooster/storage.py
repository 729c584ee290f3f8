"""Where a booster's model lives in its pods: the cache volume, its mount path, the model path, the downloader.

Guarantees (modelbooster.md section 4.2, with one deliberate fix):

* The volume is named ``<backend>-weights``: an ``emptyDir`` for an empty ``cacheURI``, the claim of
  ``pvc://CLAIM`` or a ``hostPath`` (``DirectoryOrCreate``) for ``hostpath://PATH``; anything else is Kthena's
  error.
* The cache path is the URI's host and path, ``/``-trimmed and ``/``-prefixed (``pvc:///c`` and ``pvc://c//``
  give ``/c``). An empty ``cacheURI`` mounts the ``emptyDir`` at :data:`EMPTY_CACHE_PATH` (Kthena mounts it at
  ``""``, which no API server accepts).
* The model path is ``<cache path>/<md5 of modelURI>``; the downloader init container writes it.
* The downloader gets only ``ENDPOINT``, ``HF_ENDPOINT``, ``MS_TOKEN`` and ``MS_REVISION`` from
  ``backend.env`` (literal, non-empty values), and ``backend.envFrom`` whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelbooster import ModelBackend, ModelBooster

from .errors import ExpandError

__all__ = [
    "DOWNLOADER_ENV",
    "EMPTY_CACHE_PATH",
    "Cache",
    "cache_of",
    "cache_path",
    "downloader_container",
    "env_literal",
    "model_path",
]

EMPTY_CACHE_PATH = "/cache"
DOWNLOADER_ENV = ("ENDPOINT", "HF_ENDPOINT", "MS_TOKEN", "MS_REVISION")
"""The ``backend.env`` variables Kthena passes to its downloader (literal values only)."""


@dataclass(frozen=True)
class Cache:
    """The cache volume of a backend and where it is mounted."""

    volume: dict[str, Any]
    path: str

    @property
    def mount(self) -> dict[str, Any]:
        """The volumeMount of the cache volume."""
        return {"name": self.volume["name"], "mountPath": self.path}


def cache_path(cache_uri: str) -> str:
    """The mount path of a ``cacheURI`` (``""`` for an empty one), e.g. ``hostpath://tmp/c`` -> ``/tmp/c``."""
    if not cache_uri:
        return ""
    _, _, rest = cache_uri.partition("://")
    return "/" + rest.strip("/")


def cache_of(backend: ModelBackend) -> Cache:
    """The cache volume and path of ``backend``.

    Raises:
        ExpandError: A ``cacheURI`` without a claim or path, or with another scheme.
    """
    uri = backend.cache_uri or ""
    name = f"{backend.name}-weights"
    if not uri:
        return Cache({"name": name, "emptyDir": {}}, EMPTY_CACHE_PATH)
    path = cache_path(uri)
    if uri.startswith("pvc://"):
        claim = uri[len("pvc://") :].strip("/")
        if not claim:
            raise ExpandError(f'invalid cacheURI "{uri}": must include a PVC claim name')
        return Cache({"name": name, "persistentVolumeClaim": {"claimName": claim}}, path)
    if uri.startswith("hostpath://"):
        if path == "/":
            raise ExpandError(f'invalid cacheURI "{uri}": must include a host path')
        return Cache({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}, path)
    raise ExpandError(f"not support prefix in CacheURI: {uri}")


def model_path(cache: str, model_uri: str) -> str:
    """``<cache>/<md5 hex of modelURI>``: where the downloader puts the model and the engine reads it."""
    return f"{cache}/{hashlib.md5(model_uri.encode()).hexdigest()}"


def env_literal(env: list[dict[str, Any]] | None, name: str) -> str | None:
    """The literal ``value`` of the first ``env`` entry called ``name`` (``None`` when absent or ``valueFrom``)."""
    for entry in env or []:
        if entry.get("name") == name:
            value = entry.get("value")
            return value if isinstance(value, str) else None
    return None


def downloader_container(booster: ModelBooster, image: str, cache: Cache) -> dict[str, Any]:
    """The ``<booster>-model-downloader`` init container that fills the model path."""
    backend = booster.spec.backend
    env = [{"name": name, "value": value} for name in DOWNLOADER_ENV if (value := env_literal(backend.env, name))]
    container: dict[str, Any] = {
        "name": f"{booster.name}-model-downloader",
        "image": image,
        "args": ["--source", backend.model_uri, "--output-dir", model_path(cache.path, backend.model_uri)],
    }
    if env:
        container["env"] = env
    if backend.env_from:
        container["envFrom"] = list(backend.env_from)
    container["volumeMounts"] = [cache.mount]
    return container
