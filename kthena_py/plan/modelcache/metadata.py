"""Model metadata from a download result into the API's models, and its one-line summary (pure, tolerant).

* :func:`gguf_of` and :func:`model_config_of` read the result's ``gguf`` / ``modelConfig`` objects (written by the
  downloader from :mod:`kthena_py.modelmeta`) field by field: a field of the wrong type, a negative or
  non-whole count, an empty string is left out; an object with nothing usable, or no object, gives ``None``.
  They never raise. Strings are cut to :data:`MAX_TEXT` characters.
* :func:`describe_model` is the short text ``kthena-py status`` shows for a cache: architecture, context length
  and quantization from the GGUF header, else the config's architecture and context length
  (``"llama, 4096 ctx, Q4_K_M"``, ``"LlamaForCausalLM, 8192 ctx, bfloat16"``); empty when nothing is known.
* :func:`model_labels` gives the labels of the ``kthena_modelcache_model_info`` gauge.
* :func:`metadata_status` gives the ``status.gguf`` / ``status.modelConfig`` entries (:data:`STATUS_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import GGUFMetadata, ModelConfigMetadata

__all__ = [
    "MAX_TEXT",
    "STATUS_KEYS",
    "describe_model",
    "gguf_of",
    "metadata_status",
    "model_config_of",
    "model_labels",
]

MAX_TEXT = 128
_MAX_COUNT = (1 << 53) - 1

_GGUF_COUNTS = {
    "fileVersion": "file_version",
    "contextLength": "context_length",
    "embeddingSize": "embedding_size",
    "layerCount": "layer_count",
    "headCount": "head_count",
    "headCountKV": "head_count_kv",
    "keyLength": "key_length",
    "valueLength": "value_length",
    "tensorCount": "tensor_count",
}
_GGUF_TEXTS = {
    "architecture": "architecture",
    "modelName": "model_name",
    "license": "license",
    "quantization": "quantization",
}


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if 0 <= number <= _MAX_COUNT else None


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:MAX_TEXT]


def _fields(data: Mapping[str, Any], counts: Mapping[str, str], texts: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, attr in counts.items():
        if (number := _count(data.get(key))) is not None:
            found[attr] = number
    for key, attr in texts.items():
        if (text := _text(data.get(key))) is not None:
            found[attr] = text
    return found


def gguf_of(data: Any) -> GGUFMetadata | None:
    """The ``gguf`` object of a result as the status's model, or ``None`` (see the module docstring)."""
    if not isinstance(data, Mapping):
        return None
    found = _fields(data, _GGUF_COUNTS, _GGUF_TEXTS)
    return GGUFMetadata(**found) if found else None


def model_config_of(data: Any) -> ModelConfigMetadata | None:
    """The ``modelConfig`` object of a result as the status's model, or ``None`` (see the module docstring)."""
    if not isinstance(data, Mapping):
        return None
    found = _fields(
        data,
        {"contextLength": "context_length"},
        {"architecture": "architecture", "modelType": "model_type", "torchDtype": "torch_dtype"},
    )
    return ModelConfigMetadata(**found) if found else None


def describe_model(gguf: GGUFMetadata | None, config: ModelConfigMetadata | None) -> str:
    """What the model is, in a few words (see the module docstring)."""
    parts: list[str] = []
    if gguf is not None and (gguf.architecture or gguf.context_length or gguf.quantization):
        parts.append(gguf.architecture or "")
        if gguf.context_length:
            parts.append(f"{gguf.context_length} ctx")
        parts.append(gguf.quantization or "")
    elif config is not None:
        parts.append(config.architecture or config.model_type or "")
        if config.context_length:
            parts.append(f"{config.context_length} ctx")
        parts.append(config.torch_dtype or "")
    return ", ".join(p for p in parts if p)


STATUS_KEYS = ("gguf", "modelConfig")
"""The status fields the metadata fills (kept from the previous status of the same spec when the pod is gone)."""


def metadata_status(gguf: GGUFMetadata | None, config: ModelConfigMetadata | None) -> dict[str, Any]:
    """The ``status.gguf`` / ``status.modelConfig`` entries for a result's metadata (absent ones left out)."""
    status: dict[str, Any] = {}
    if gguf is not None:
        status["gguf"] = to_dict(gguf)
    if config is not None:
        status["modelConfig"] = to_dict(config)
    return status


def model_labels(status: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The ``kthena_modelcache_model_info`` labels of a status: architecture, quantization and context length.

    From ``gguf`` (its quantization), else from ``modelConfig`` (its dtype stands for the quantization); a value
    not known is ``""``; ``None`` when the status has neither.
    """
    gguf, config = gguf_of(status.get("gguf")), model_config_of(status.get("modelConfig"))
    if gguf is not None:
        return gguf.architecture or "", gguf.quantization or "", str(gguf.context_length or "")
    if config is not None:
        architecture = config.architecture or config.model_type or ""
        return architecture, config.torch_dtype or "", str(config.context_length or "")
    return None
