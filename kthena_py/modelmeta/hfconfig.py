"""What a Hugging Face ``config.json`` says about the model (pure, total).

:func:`config_info` takes the decoded JSON and returns a :class:`ConfigInfo`:

* ``architecture``: the first entry of ``architectures`` (``"LlamaForCausalLM"``);
* ``model_type``: ``model_type`` (``"llama"``);
* ``context_length``: the first of ``max_position_embeddings``, ``n_positions``, ``max_seq_len``,
  ``seq_length``, ``max_sequence_length`` that is a positive whole number; a multimodal config that keeps them
  in ``text_config`` is read there when the top level has none;
* ``torch_dtype``: ``torch_dtype`` (newer configs spell it ``dtype``; read when ``torch_dtype`` is absent).

It never raises: anything that is not a dict, and any field of the wrong type, gives ``None`` for that field.
Strings are cut to :data:`MAX_INFO_TEXT` characters so the status stays compact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CONTEXT_KEYS", "ConfigInfo", "config_info"]

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")
"""Where configs keep the context length, in the order they are tried."""
MAX_INFO_TEXT = 128
_JSON_SAFE_INT = (1 << 53) - 1


@dataclass(frozen=True)
class ConfigInfo:
    """The fields of a ``config.json`` the ModelCache status shows (``status.modelConfig``); ``None``: not given."""

    architecture: str | None = None
    model_type: str | None = None
    context_length: int | None = None
    torch_dtype: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON of the status, ``None`` fields left out."""
        values = {
            "architecture": self.architecture,
            "modelType": self.model_type,
            "contextLength": self.context_length,
            "torchDtype": self.torch_dtype,
        }
        return {key: value for key, value in values.items() if value is not None}

    @property
    def empty(self) -> bool:
        """Whether the config said nothing this reads."""
        return not self.to_json()


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:MAX_INFO_TEXT]


def _length(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if 0 < number <= _JSON_SAFE_INT else None


def _context_length(config: dict[Any, Any]) -> int | None:
    for key in CONTEXT_KEYS:
        found = _length(config.get(key))
        if found is not None:
            return found
    return None


def config_info(config: Any) -> ConfigInfo:
    """The status fields of a decoded ``config.json`` (see the module docstring); never raises."""
    if not isinstance(config, dict):
        return ConfigInfo()
    architectures = config.get("architectures")
    architecture = _text(architectures[0]) if isinstance(architectures, list) and architectures else None
    context = _context_length(config)
    text_config = config.get("text_config")
    if context is None and isinstance(text_config, dict):
        context = _context_length(text_config)
    dtype = config.get("torch_dtype") if "torch_dtype" in config else config.get("dtype")
    return ConfigInfo(
        architecture=architecture,
        model_type=_text(config.get("model_type")),
        context_length=context,
        torch_dtype=_text(dtype),
    )
