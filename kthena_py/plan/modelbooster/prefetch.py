"""The booster's opt-in ModelCache: whether it applies, the ModelCache to render, or why it cannot be rendered.

A booster annotated :data:`~kthena_py.vocab.labels.BOOSTER_PREFETCH` ``"true"`` stages its weights once in a child
ModelCache instead of a downloader init container in every pod; :func:`plan_prefetch` decides, purely from the
booster, which of the two it gets.

Guarantees:

* **Opt-in only**: without the annotation (any value other than ``"true"``) the result is :data:`OFF` and the
  expansion is byte for byte what it was before the opt-in existed.
* **Storage from ``cacheURI``**: ``pvc://CLAIM`` gives ``persistentVolumeClaim CLAIM``; ``hostpath://DIR`` gives
  ``nodeLocal DIR`` on the nodes :data:`~kthena_py.vocab.labels.BOOSTER_PREFETCH_NODE_SELECTOR` names
  (``key=value,...``; default every Linux node, since a booster's pods may land on any of them). The cache stages
  the model in ``<storage>/<md5 of modelURI>``: the directory the per-pod downloader fills, so both find the
  same files.
* **Credentials from where Kthena's downloader gets them**: ``backend.envFrom`` as one ``secretRef`` (no
  ``prefix``) becomes ``sourceSecretRef``. What a ModelCache cannot carry is refused rather than dropped: a
  ``configMapRef``, a prefix, several sources, or a literal downloader variable in ``backend.env`` (``ENDPOINT``,
  ``HF_ENDPOINT``, ``MS_TOKEN``, ``MS_REVISION``; a cache takes endpoints and tokens only from its Secret).
* The download Job tolerates what the booster's workers tolerate (``placement.tolerations``, the workers' lists
  in order, duplicates dropped), so it can run on the tainted accelerator nodes the pods run on (for a
  node-local cache, each node it stages onto).
* **Refusals fall back**: an empty ``cacheURI``, a ``pvc://`` ``modelURI`` (the model is on the claim already),
  the cases above, an unreadable node selector, and anything the ModelCache schema rejects give a
  :class:`PrefetchDecision` with ``problem`` set and no cache: the booster keeps Kthena's per-pod downloader. So
  does a cluster without the ModelCache CRD (the caller says whether it is served: ``cache_served``).
* The cache is named ``<booster>-<backend>`` (the ModelServing's name, in another kind), carries the five
  booster labels and the booster's controller reference, and asks for ``prefetch: true``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from kthena_py.api.modelbooster import ModelBooster
from kthena_py.api.modelcache import (
    MODEL_CACHE_API_VERSION,
    MODEL_CACHE_GROUP,
    MODEL_CACHE_KIND,
    MODEL_CACHE_PLURAL,
    ModelCache,
)
from kthena_py.vocab.labels import BOOSTER_PREFETCH, BOOSTER_PREFETCH_NODE_SELECTOR, NODE_OS

from . import naming
from .storage import DOWNLOADER_ENV, cache_path

__all__ = ["DEFAULT_NODE_SELECTOR", "OFF", "PrefetchDecision", "cache_name", "parse_node_selector", "plan_prefetch"]

DEFAULT_NODE_SELECTOR = {NODE_OS: "linux"}
"""Where a node-local cache of a booster is staged when the booster does not say: every Linux node."""


@dataclass(frozen=True)
class PrefetchDecision:
    """The booster's prefetch decision.

    ``requested`` without ``problem``: ``cache`` is the ModelCache to apply and the ModelServing is gated on it.
    ``requested`` with ``problem``: no cache, the per-pod downloader stays, ``problem`` says why.
    """

    requested: bool = False
    cache: dict[str, Any] | None = None
    problem: str | None = None

    @property
    def name(self) -> str | None:
        """The ModelCache's name when one is rendered."""
        return None if self.cache is None else str(self.cache["metadata"]["name"])


OFF = PrefetchDecision()
"""No opt-in: no cache, no gate, the per-pod downloader."""


def cache_name(booster: ModelBooster) -> str:
    """``<booster>-<backend>``: one cache per backend, named like the backend's ModelServing."""
    return naming.modelserving_name(booster)


def parse_node_selector(raw: str) -> dict[str, str]:
    """Parse ``key=value,key2=value2`` (spaces around items ignored).

    Raises:
        ValueError: An item without ``=`` or with an empty key, or no item at all.
    """
    selector: dict[str, str] = {}
    for item in raw.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{BOOSTER_PREFETCH_NODE_SELECTOR}: {item.strip()!r} is not key=value")
        selector[key.strip()] = value.strip()
    return selector


def _storage(booster: ModelBooster, annotations: dict[str, str]) -> dict[str, Any] | str:
    uri = booster.spec.backend.cache_uri or ""
    if not uri:
        return "cacheURI is empty (an emptyDir per pod): a ModelCache needs a claim or a node-local path"
    path = cache_path(uri)
    if uri.startswith("pvc://"):
        claim = path.strip("/")
        if not claim or "/" in claim:
            return f"cacheURI {uri} does not name one claim (pvc://CLAIM)"
        return {"persistentVolumeClaim": {"claimName": claim}}
    if uri.startswith("hostpath://"):
        if path == "/":
            return f"cacheURI {uri} has no host path"
        raw = annotations.get(BOOSTER_PREFETCH_NODE_SELECTOR)
        try:
            selector = dict(DEFAULT_NODE_SELECTOR) if raw is None else parse_node_selector(raw)
        except ValueError as exc:
            return str(exc)
        return {"nodeLocal": {"path": path, "nodeSelector": selector}}
    return f"cacheURI {uri} has no ModelCache storage (only pvc:// and hostpath:// do)"


def _secret(booster: ModelBooster) -> str | tuple[str] | None:
    """The Secret of ``envFrom`` (``None``: none), or ``(problem,)`` when ``envFrom`` cannot be a sourceSecretRef."""
    backend = booster.spec.backend
    literal = [e.get("name") for e in backend.env or [] if e.get("name") in DOWNLOADER_ENV and e.get("value")]
    if literal:
        names = ", ".join(str(n) for n in literal)
        return (f"backend.env sets {names} for the downloader: a ModelCache reads them only from a Secret",)
    sources = list(backend.env_from or [])
    if not sources:
        return None
    ref = sources[0].get("secretRef") if len(sources) == 1 else None
    if not isinstance(ref, dict) or not ref.get("name") or sources[0].get("prefix"):
        return ("backend.envFrom must be exactly one secretRef without prefix to become the cache's sourceSecretRef",)
    return str(ref["name"])


def _tolerations(booster: ModelBooster) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for worker in booster.spec.backend.workers:
        for toleration in worker.tolerations or []:
            if toleration not in found:
                found.append(dict(toleration))
    return found


def plan_prefetch(booster: ModelBooster, *, cache_served: bool = True) -> PrefetchDecision:
    """Decide whether ``booster`` gets a child ModelCache, and render it (see the module docstring).

    ``cache_served``: the ModelCache CRD is installed and Established.
    """
    annotations = booster.annotations
    if annotations.get(BOOSTER_PREFETCH) != "true":
        return OFF
    if not cache_served:
        crd = f"{MODEL_CACHE_PLURAL}.{MODEL_CACHE_GROUP}"
        return PrefetchDecision(True, problem=f"the ModelCache CRD ({crd}) is not installed")
    backend = booster.spec.backend
    if backend.model_uri.startswith("pvc://"):
        return PrefetchDecision(
            True, problem=f"modelURI {backend.model_uri} is on a claim already: nothing to prefetch"
        )
    storage = _storage(booster, annotations)
    if isinstance(storage, str):
        return PrefetchDecision(True, problem=storage)
    secret = _secret(booster)
    if isinstance(secret, tuple):
        return PrefetchDecision(True, problem=secret[0])
    spec: dict[str, Any] = {"source": backend.model_uri, "storage": storage, "prefetch": True}
    if secret is not None:
        spec["sourceSecretRef"] = {"name": secret}
    tolerations = _tolerations(booster)
    if tolerations:
        spec["placement"] = {"tolerations": tolerations}
    body: dict[str, Any] = {
        "apiVersion": MODEL_CACHE_API_VERSION,
        "kind": MODEL_CACHE_KIND,
        "metadata": {
            "name": cache_name(booster),
            "namespace": booster.namespace,
            "labels": naming.booster_labels(booster, backend.name, naming.revision(spec)),
            "ownerReferences": [naming.owner_reference(booster)],
        },
        "spec": spec,
    }
    try:
        ModelCache.model_validate(body)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return PrefetchDecision(True, problem=f"the ModelCache would be invalid: {where}: {first['msg']}")
    return PrefetchDecision(True, cache=body)
