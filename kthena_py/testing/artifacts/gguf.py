"""Synthetic GGUF files for tests: any version, every value type, arrays (nested too), arbitrary key/values.

Written from the GGUF format (little-endian: ``GGUF``, ``uint32`` version, tensor and key/value counts --
``uint32`` in v1, ``uint64`` from v2 --, then typed key/values), not from :mod:`kthena_py.modelmeta`, so the
parser's tests check it against an independent encoder.

Plain Python values get a type the way converters write them: ``str`` a string, ``bool`` a bool, ``int`` a
``uint32`` when it fits (else ``int64``), ``float`` a ``float32``, a ``list`` an array typed by its first
element. :class:`Typed` and :class:`Array` choose the type explicitly (needed for an empty array).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ARRAY",
    "BOOL",
    "FLOAT32",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "STRING",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "Array",
    "Typed",
    "encode_value",
    "gguf_bytes",
    "llama_like",
]

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)

_FORMATS = {
    UINT8: "<B",
    INT8: "<b",
    UINT16: "<H",
    INT16: "<h",
    UINT32: "<I",
    INT32: "<i",
    FLOAT32: "<f",
    BOOL: "<?",
    UINT64: "<Q",
    INT64: "<q",
    FLOAT64: "<d",
}


@dataclass(frozen=True)
class Typed:
    """A value with an explicit GGUF type."""

    type: int
    value: Any


@dataclass(frozen=True)
class Array:
    """An array with an explicit element type (elements may be :class:`Typed`-free plain values or arrays)."""

    element_type: int
    values: Sequence[Any]


def _string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _type_of(value: Any) -> int:
    if isinstance(value, Typed):
        return value.type
    if isinstance(value, Array | list):
        return ARRAY
    if isinstance(value, str | bytes):
        return STRING
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return UINT32 if 0 <= value < 1 << 32 else INT64
    if isinstance(value, float):
        return FLOAT32
    raise TypeError(f"no GGUF type for {type(value).__name__}")


def _payload(kind: int, value: Any) -> bytes:
    if isinstance(value, Typed):
        value = value.value
    if kind == STRING:
        return _string(value)
    if kind == ARRAY:
        array = value if isinstance(value, Array) else Array(_type_of(value[0]) if value else UINT8, value)
        body = b"".join(_payload(array.element_type, v) for v in array.values)
        return struct.pack("<IQ", array.element_type, len(array.values)) + body
    return struct.pack(_FORMATS[kind], value)


def encode_value(value: Any) -> bytes:
    """The type code and encoding of one value (as it follows a key)."""
    kind = _type_of(value)
    return struct.pack("<I", kind) + _payload(kind, value)


def gguf_bytes(
    metadata: Mapping[str, Any] | Sequence[tuple[str, Any]],
    *,
    version: int = 3,
    tensor_count: int = 0,
    kv_count: int | None = None,
    trailer: bytes = b"",
) -> bytes:
    """A GGUF file: the header, the key/values in the given order, then ``trailer`` (stand-in tensor data).

    ``kv_count`` overrides the declared count (to write a lying header); a v1 file gets 32-bit counts.
    """
    items = list(metadata.items()) if isinstance(metadata, Mapping) else list(metadata)
    declared = len(items) if kv_count is None else kv_count
    counts = struct.pack("<II", tensor_count, declared) if version == 1 else struct.pack("<QQ", tensor_count, declared)
    body = b"".join(_string(key) + encode_value(value) for key, value in items)
    return b"GGUF" + struct.pack("<I", version) + counts + body + trailer


def llama_like(
    *,
    architecture: str = "llama",
    name: str | None = "Tiny Llama",
    license: str | None = "apache-2.0",
    context_length: int = 4096,
    embedding_length: int = 2048,
    block_count: int = 22,
    head_count: Any = 32,
    head_count_kv: Any = 4,
    key_length: int | None = None,
    value_length: int | None = None,
    file_type: int | None = 15,
    vocabulary: int = 100,
    tensor_count: int = 201,
    version: int = 3,
    extra: Mapping[str, Any] | None = None,
    trailer: bytes = b"",
) -> bytes:
    """A GGUF header shaped like a converted Llama model.

    Counts are ``uint32`` and the tokenizer has ``vocabulary`` tokens with scores and types, so the parser walks
    long arrays as it does in real files.
    """
    items: list[tuple[str, Any]] = [("general.architecture", architecture)]
    if name is not None:
        items.append(("general.name", name))
    if license is not None:
        items.append(("general.license", license))
    if file_type is not None:
        items.append(("general.file_type", file_type))
    items += [
        (f"{architecture}.context_length", context_length),
        (f"{architecture}.embedding_length", embedding_length),
        (f"{architecture}.block_count", block_count),
        (f"{architecture}.feed_forward_length", embedding_length * 4),
        (f"{architecture}.attention.head_count", head_count),
        (f"{architecture}.attention.head_count_kv", head_count_kv),
        (f"{architecture}.attention.layer_norm_rms_epsilon", 1e-5),
        (f"{architecture}.rope.freq_base", 10000.0),
    ]
    if key_length is not None:
        items.append((f"{architecture}.attention.key_length", key_length))
    if value_length is not None:
        items.append((f"{architecture}.attention.value_length", value_length))
    items += [
        ("tokenizer.ggml.model", "llama"),
        ("tokenizer.ggml.tokens", Array(STRING, [f"<t{i}>" for i in range(vocabulary)])),
        ("tokenizer.ggml.scores", Array(FLOAT32, [float(-i) for i in range(vocabulary)])),
        ("tokenizer.ggml.token_type", Array(INT32, [1] * vocabulary)),
        ("tokenizer.ggml.bos_token_id", 1),
        ("tokenizer.ggml.add_bos_token", True),
        ("general.quantization_version", 2),
    ]
    items += list((extra or {}).items())
    return gguf_bytes(items, version=version, tensor_count=tensor_count, trailer=trailer)
