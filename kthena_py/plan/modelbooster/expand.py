"""The expander: one ModelBooster in, its ModelServing, ModelServer and ModelRoute (and opt-in ModelCache) out.

Guarantees: pure and deterministic (no I/O, no clock; the same booster and images give the same objects);
the controller and ``kthena-py render`` both call :func:`expand`. Errors carry Kthena's messages. An
unsupported backend type (Kthena's Go constants ``SGLang``, ``MindIE``, ``MindIEDisaggregated``, which the CRD
enum blocks) is reported before anything is rendered. The prefetch opt-in (:mod:`~.prefetch`) adds a ModelCache
and gates the ModelServing on it; when it cannot be honoured, the children are those of a booster without it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelbooster import ModelBooster

from .modelserving import build_modelserving
from .networking import build_modelroute, build_modelserver, served_model_name
from .prefetch import OFF, PrefetchDecision, plan_prefetch
from .types import Images

__all__ = ["SUPPORTED_BACKEND_TYPES", "Children", "expand", "unsupported_backend_type"]

SUPPORTED_BACKEND_TYPES = ("vLLM", "vLLMDisaggregated")


@dataclass(frozen=True)
class Children:
    """The objects of one booster, as they are applied (plain JSON dicts), and its prefetch decision."""

    modelserving: dict[str, Any]
    modelserver: dict[str, Any]
    modelroute: dict[str, Any]
    prefetch: PrefetchDecision = OFF
    """The opt-in ModelCache (``prefetch.cache``), or why the booster keeps its per-pod downloader."""

    @property
    def modelcache(self) -> dict[str, Any] | None:
        """The ModelCache to apply (``None``: no opt-in, or one that cannot be honoured)."""
        return self.prefetch.cache

    def all(self) -> list[dict[str, Any]]:
        """ModelServing, ModelServer, ModelRoute: the order Kthena's controller writes them in."""
        return [self.modelserving, self.modelserver, self.modelroute]


def unsupported_backend_type(obj: Mapping[str, Any]) -> str | None:
    """Kthena's message for a raw booster whose ``spec.backend.type`` is not ``vLLM``/``vLLMDisaggregated``.

    Reads the raw object, so a type the models reject (a stored object from an older CRD) still gets
    Kthena's ``not support model backend type: <t>`` instead of a schema error.
    """
    backend = ((obj.get("spec") or {}).get("backend")) or {}
    kind = backend.get("type") if isinstance(backend, Mapping) else None
    if isinstance(kind, str) and kind not in SUPPORTED_BACKEND_TYPES:
        return f"not support model backend type: {kind}"
    return None


def expand(booster: ModelBooster, images: Images | None = None, *, model_cache_served: bool = True) -> Children:
    """Render the children of ``booster``.

    Args:
        booster: A parsed booster with ``metadata.name``, ``namespace`` and ``uid``.
        images: Downloader and runtime images (Kthena's defaults when ``None``).
        model_cache_served: The ModelCache CRD is installed (else the prefetch opt-in falls back).

    Raises:
        ExpandError: The booster cannot be expanded (Kthena's message).
    """
    images = images or Images()
    served = served_model_name(booster)
    prefetch = plan_prefetch(booster, cache_served=model_cache_served)
    modelserving = build_modelserving(booster, images, served, prefetch.name)
    if prefetch.cache is not None:
        prefetch = PrefetchDecision(prefetch.requested, _unshared(prefetch.cache), prefetch.problem)
    return Children(
        _unshared(modelserving),
        _unshared(build_modelserver(booster)),
        _unshared(build_modelroute(booster)),
        prefetch,
    )


def _unshared(obj: dict[str, Any]) -> dict[str, Any]:
    # The templates share pieces (the downloader, env lists, the booster's own dicts); the output must not,
    # so that a caller may change one part without changing another (a deep copy would keep the sharing).
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    return copied
