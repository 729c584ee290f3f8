"""LoRA adapters in the activator: the names that route to them, the body rewrite, and why none is served.

Guarantees:

* A ModelServing's adapters (its ``serving.kthena-py.io/lora-adapters`` annotation, read tolerantly by
  :func:`~kthena_py.plan.adapters.desired.adapters_of`) are reached by two names: the adapter's own name, sent to
  the engine unchanged, and KubeAI's ``<model>_<adapter>`` for each model name of the ModelServing, whose body
  ``model`` is rewritten to the adapter's name before forwarding (the engine knows the adapter by that name).
  The directory (:mod:`.directory`) decides clashes (a model name always wins).
* A request for an adapter goes only to the Ready entry pods labelled ``adapter.kthena-py.io/<adapter>`` with the
  digest of the source the ModelServing asks for now (a pod still carrying an older source of the same name is not
  used); :func:`adapter_requirement` is that label pair.
* :func:`rewrite_model` changes only ``model`` in a JSON object body and keeps every other member (order included).
* :func:`adapter_reason` says how many Ready entry pods exist, how many have the adapter loaded with another
  source, and that the adapter reconciler loads it; it never raises.
* Pure: no I/O, no clock; inputs are not changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from kthena_py.plan.activator.backends import entry_backends
from kthena_py.plan.adapters.desired import adapter_label

__all__ = ["adapter_reason", "adapter_requirement", "kubeai_name", "rewrite_model"]


def kubeai_name(model: str, adapter: str) -> str:
    """KubeAI's name for ``adapter`` of ``model``: ``<model>_<adapter>``."""
    return f"{model}_{adapter}"


def adapter_requirement(adapter: str, digest: str) -> tuple[str, str]:
    """The pod label (key, value) a backend must carry to serve ``adapter`` loaded from the source of ``digest``."""
    return adapter_label(adapter), digest


def rewrite_model(body: bytes, model: str) -> bytes:
    """``body`` (a JSON object) with its ``model`` set to ``model``; anything else is returned unchanged."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body
    if not isinstance(parsed, dict):
        return body
    parsed["model"] = model
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()


def adapter_reason(pods: Iterable[Mapping[str, Any]], port: int, adapter: str, digest: str) -> str:
    """Why no pod serves ``adapter`` (loaded from the source of ``digest``) among ``pods``."""
    pod_list = list(pods)
    ready = entry_backends(pod_list, port)
    if not ready:
        return f"adapter {adapter!r}: no entry pod is Ready to load it"
    key = adapter_label(adapter)
    by_name = {str(_dict(p.get("metadata")).get("name") or ""): p for p in pod_list}
    stale = sum(
        1
        for backend in ready
        if _dict(_dict(by_name.get(backend.pod, {}).get("metadata")).get("labels")).get(key) not in (None, digest)
    )
    count = len(ready)
    text = f"adapter {adapter!r} is loaded on none of the {count} Ready entry pod{'s' if count != 1 else ''}"
    if stale:
        text += f" ({stale} ha{'ve' if stale != 1 else 's'} another source of it loaded)"
    return text + "; the adapter reconciler loads it"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
