"""A GGUF header parser: the key/value metadata of a GGUF v2/v3 file, from a binary stream (pure).

Layout (little-endian): ``GGUF`` magic, ``uint32`` version, ``uint64`` tensor count, ``uint64`` key/value count,
then that many pairs: a string key (``uint64`` length + UTF-8 bytes), a ``uint32`` value type and the value --
``uint8``..``int64``, ``float32``/``float64``, ``bool`` (one byte), string, or array (``uint32`` element type,
``uint64`` length, elements; arrays of arrays are allowed). Tensor infos follow; they are not read.

Guarantees of :func:`read_header`:

* it returns a :class:`GGUFHeader` or raises :class:`GGUFError` (with the byte offset), never another
  exception, for any byte sequence -- truncated, hostile or random;
* it reads at most :data:`MAX_METADATA_BYTES` from the stream and never allocates by a declared length before
  checking it: a string longer than :data:`MAX_STRING_BYTES` (keys: :data:`MAX_KEY_BYTES`), an array longer
  than :data:`MAX_ARRAY_LENGTH`, more than :data:`MAX_KV_COUNT` pairs, arrays nested deeper than
  :data:`MAX_NESTING`, or any count whose smallest possible encoding is longer than what is left of the stream
  (when the stream can tell its size) or of the byte cap is refused before anything is read for it;
* arrays longer than :data:`KEPT_ARRAY_LENGTH` (a tokenizer's vocabulary), and any array once
  :data:`MAX_KEPT_ELEMENTS` elements are kept in all, are walked and checked but kept only as a
  :class:`SkippedArray`, so what is kept stays small whatever the header holds (no list of millions of
  one-byte booleans, nested or not);
* every loop step consumes at least one byte, so the work is bounded by the byte cap: no input hangs it.

GGUF v1 (32-bit counts) and big-endian files are refused with a clear message.

:func:`gguf_info` picks the fields the ModelCache status shows (:class:`GGUFInfo`), naming the quantization from
``general.file_type`` with llama.cpp's ``llama_ftype`` numbering (:func:`quantization_name`), or, when the file
does not say, from a quantization tag in the file name (``model-Q4_K_M.gguf``).
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any, TypeAlias

__all__ = [
    "FILE_TYPES",
    "KEPT_ARRAY_LENGTH",
    "MAX_ARRAY_LENGTH",
    "MAX_KEPT_ELEMENTS",
    "MAX_KEY_BYTES",
    "MAX_KV_COUNT",
    "MAX_METADATA_BYTES",
    "MAX_NESTING",
    "MAX_STRING_BYTES",
    "MAX_TENSOR_COUNT",
    "GGUFError",
    "GGUFHeader",
    "GGUFInfo",
    "SkippedArray",
    "Value",
    "ValueType",
    "gguf_info",
    "quantization_from_file_name",
    "quantization_name",
    "read_header",
]

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)

MAX_METADATA_BYTES = 64 << 20
"""Bytes read at most (header and all key/values): a large tokenizer vocabulary needs well under 16 MiB."""
MAX_STRING_BYTES = 1 << 20
"""The longest string value (a chat template is a few KiB)."""
MAX_KEY_BYTES = 65_535
"""The longest key (the GGUF specification's own limit)."""
MAX_ARRAY_LENGTH = 1 << 24
"""The longest array (vocabularies and merge lists have a few hundred thousand entries)."""
MAX_KV_COUNT = 1 << 16
"""The most key/value pairs (real files have a few dozen)."""
MAX_NESTING = 4
"""The deepest array nesting (an array of arrays is depth 2)."""
MAX_TENSOR_COUNT = 1 << 24
"""The largest tensor count believed (real files have at most some thousands)."""
KEPT_ARRAY_LENGTH = 64
"""Arrays up to this length are kept with their values; longer ones become a :class:`SkippedArray`."""
MAX_KEPT_ELEMENTS = 1 << 14
"""Array elements kept in all (nested arrays included); arrays past this budget become :class:`SkippedArray`."""
MAX_INFO_TEXT = 128
"""Strings in a :class:`GGUFInfo` are cut to this many characters (the status stays compact)."""

_SKIP_CHUNK = 1 << 20
_JSON_SAFE_INT = (1 << 53) - 1
_GUESSED = 1024
"""llama.cpp's ``LLAMA_FTYPE_GUESSED`` flag."""


class ValueType(enum.IntEnum):
    """GGUF value types (``gguf_type``)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_SCALARS: dict[ValueType, struct.Struct] = {
    ValueType.UINT8: struct.Struct("<B"),
    ValueType.INT8: struct.Struct("<b"),
    ValueType.UINT16: struct.Struct("<H"),
    ValueType.INT16: struct.Struct("<h"),
    ValueType.UINT32: struct.Struct("<I"),
    ValueType.INT32: struct.Struct("<i"),
    ValueType.FLOAT32: struct.Struct("<f"),
    ValueType.BOOL: struct.Struct("<B"),
    ValueType.UINT64: struct.Struct("<Q"),
    ValueType.INT64: struct.Struct("<q"),
    ValueType.FLOAT64: struct.Struct("<d"),
}
_U32 = struct.Struct("<I")
_ARRAY_HEAD = struct.Struct("<IQ")
_TYPES = {kind.value: kind for kind in ValueType}
_U64 = struct.Struct("<Q")
_MIN_SIZE: dict[ValueType, int] = {
    **{t: s.size for t, s in _SCALARS.items()},
    ValueType.STRING: 8,
    ValueType.ARRAY: 12,
}
"""The smallest encoding of one value of each type (a string: its length; an array: its type and length)."""


@dataclass(frozen=True)
class SkippedArray:
    """An array longer than :data:`KEPT_ARRAY_LENGTH`: checked, but only its type and length kept."""

    element_type: ValueType
    length: int


Value: TypeAlias = "int | float | bool | str | list[Value] | SkippedArray"


class GGUFError(ValueError):
    """The stream is not a GGUF header this parser accepts; ``offset`` is where the problem was found."""

    def __init__(self, problem: str, offset: int) -> None:
        super().__init__(f"{problem} (at byte {offset})")
        self.problem = problem
        self.offset = offset


@dataclass(frozen=True)
class GGUFHeader:
    """A parsed GGUF header: version, tensor count and the metadata key/values (in file order)."""

    version: int
    tensor_count: int
    metadata: Mapping[str, Value]
    size: int
    """Bytes read: the offset just past the last key/value."""


class _Reader:
    """Reads exact byte counts from a stream, checking each against the byte cap and the stream's end."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        self._stream = stream
        self._cap = cap
        self.offset = 0
        self.kept = 0
        self._available = _available(stream)

    def check(self, size: int, what: str) -> None:
        """Refuse ``size`` more bytes when the cap or the stream's end (when known) does not hold them."""
        if self.offset + size > self._cap:
            raise GGUFError(f"{what} needs {size} bytes: over the {self._cap}-byte metadata cap", self.offset)
        if self._available is not None and size > self._available - self.offset:
            left = max(0, self._available - self.offset)
            raise GGUFError(f"truncated: {what} needs {size} bytes, {left} left", self.offset)

    def read(self, size: int, what: str) -> bytes:
        self.check(size, what)
        try:
            data = self._stream.read(size) or b""
        except (OSError, ValueError) as exc:
            raise GGUFError(f"cannot read {what}: {exc}", self.offset) from None
        if len(data) != size:
            raise GGUFError(f"truncated: {what} needs {size} bytes, {len(data)} left", self.offset)
        self.offset += size
        return data

    def skip(self, size: int, what: str) -> None:
        self.check(size, what)
        while size > 0:
            step = min(size, _SKIP_CHUNK)
            self.read(step, what)
            size -= step

    def u32(self, what: str) -> int:
        value: int = _U32.unpack(self.read(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = _U64.unpack(self.read(8, what))[0]
        return value


def _available(stream: IO[bytes]) -> int | None:
    """The stream's length from its current position (``None`` when it cannot seek)."""
    try:
        if not stream.seekable():
            return None
        start = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(start)
    except (OSError, ValueError):
        return None
    return max(0, end - start)


def _value_type(reader: _Reader, what: str) -> ValueType:
    at = reader.offset
    code = reader.u32(what)
    try:
        return ValueType(code)
    except ValueError:
        raise GGUFError(f"unknown value type {code} for {what}", at) from None


def _string(reader: _Reader, limit: int, what: str) -> str:
    at = reader.offset
    length = reader.u64(f"{what} length")
    if length > limit:
        raise GGUFError(f"{what} of {length} bytes is over the {limit}-byte cap", at)
    return reader.read(length, what).decode("utf-8", errors="replace")


def _skip_strings(reader: _Reader, count: int, what: str) -> None:
    label = f"{what} element"
    length_label = f"{label} length"  # built once: a vocabulary has some hundred thousand strings
    for _ in range(count):
        at = reader.offset
        length = reader.u64(length_label)
        if length > MAX_STRING_BYTES:
            raise GGUFError(f"{label} of {length} bytes is over the {MAX_STRING_BYTES}-byte cap", at)
        if length:
            reader.skip(length, label)


def _value(reader: _Reader, kind: ValueType, what: str, depth: int) -> Value:
    if kind is ValueType.STRING:
        return _string(reader, MAX_STRING_BYTES, what)
    if kind is ValueType.ARRAY:
        return _array(reader, what, depth + 1)
    raw = _SCALARS[kind]
    value: int | float = raw.unpack(reader.read(raw.size, what))[0]
    return bool(value) if kind is ValueType.BOOL else value


def _array_start(reader: _Reader, what: str, depth: int) -> tuple[ValueType, int]:
    """Read an array's element type and length, refusing them before anything is read for the elements."""
    at = reader.offset
    if depth > MAX_NESTING:
        raise GGUFError(f"{what}: arrays nested deeper than {MAX_NESTING}", at)
    kind = _value_type(reader, f"{what} element type")
    length_at = reader.offset
    length = reader.u64(f"{what} length")
    if length > MAX_ARRAY_LENGTH:
        raise GGUFError(f"{what} of {length} elements is over the {MAX_ARRAY_LENGTH}-element cap", length_at)
    reader.check(length * _MIN_SIZE[kind], f"{what} of {length} elements")
    return kind, length


def _array(reader: _Reader, what: str, depth: int) -> list[Value] | SkippedArray:
    kind, length = _array_start(reader, what, depth)
    if length <= KEPT_ARRAY_LENGTH and reader.kept + length <= MAX_KEPT_ELEMENTS:
        reader.kept += length
        return [_value(reader, kind, f"{what}[{i}]", depth) for i in range(length)]
    _skip_elements(reader, kind, length, what, depth)
    return SkippedArray(kind, length)


def _skip_elements(reader: _Reader, kind: ValueType, length: int, what: str, depth: int) -> None:
    if kind in _SCALARS:
        reader.skip(length * _SCALARS[kind].size, what)
    elif kind is ValueType.STRING:
        _skip_strings(reader, length, what)
    else:
        _skip_arrays(reader, length, what, depth + 1)


def _skip_arrays(reader: _Reader, count: int, what: str, depth: int) -> None:
    """Walk ``count`` arrays at nesting ``depth``: the same checks as :func:`_array_start`, labels built once."""
    label = f"{what} element"
    if count and depth > MAX_NESTING:
        raise GGUFError(f"{label}: arrays nested deeper than {MAX_NESTING}", reader.offset)
    for _ in range(count):
        at = reader.offset
        code, length = _ARRAY_HEAD.unpack(reader.read(_ARRAY_HEAD.size, label))
        kind = _TYPES.get(code)
        if kind is None:
            raise GGUFError(f"unknown value type {code} for {label} element type", at)
        if length > MAX_ARRAY_LENGTH:
            raise GGUFError(f"{label} of {length} elements is over the {MAX_ARRAY_LENGTH}-element cap", at + 4)
        if length:
            reader.check(length * _MIN_SIZE[kind], f"{label} of {length} elements")
            _skip_elements(reader, kind, length, label, depth)


def read_header(stream: IO[bytes], *, max_bytes: int = MAX_METADATA_BYTES) -> GGUFHeader:
    """Parse the GGUF header at the stream's position (see the module docstring for the guarantees).

    Raises:
        GGUFError: Not GGUF, an unsupported version, truncated, or over a cap.
    """
    reader = _Reader(stream, max_bytes)
    magic = reader.read(4, "magic")
    if magic != MAGIC:
        raise GGUFError(f"not a GGUF file (magic {magic!r})", 0)
    version = reader.u32("version")
    if version == 1:
        raise GGUFError("GGUF v1 (32-bit counts) is not supported; convert the file to v3", 4)
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped in SUPPORTED_VERSIONS:
            raise GGUFError(f"big-endian GGUF v{swapped} is not supported", 4)
        raise GGUFError(f"unsupported GGUF version {version}", 4)
    tensor_count = reader.u64("tensor count")
    if tensor_count > MAX_TENSOR_COUNT:
        raise GGUFError(f"tensor count {tensor_count} is over the {MAX_TENSOR_COUNT} cap", 8)
    kv_count = reader.u64("key/value count")
    if kv_count > MAX_KV_COUNT:
        raise GGUFError(f"key/value count {kv_count} is over the {MAX_KV_COUNT} cap", 16)
    reader.check(kv_count * (8 + 4 + 1), f"{kv_count} key/values")
    metadata: dict[str, Value] = {}
    for index in range(kv_count):
        at = reader.offset
        key = _string(reader, MAX_KEY_BYTES, f"key #{index}")
        if key in metadata:
            raise GGUFError(f"duplicate key {key[:80]!r}", at)
        kind = _value_type(reader, f"type of {key[:80]!r}")
        metadata[key] = _value(reader, kind, repr(key[:80]), 0)
    return GGUFHeader(version=version, tensor_count=tensor_count, metadata=metadata, size=reader.offset)


# -- the fields the status shows ---------------------------------------------------------------------------------

FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    4: "Q4_1_SOME_F16",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    33: "Q4_0_4_4",
    34: "Q4_0_4_8",
    35: "Q4_0_8_8",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}
"""``general.file_type`` (llama.cpp's ``llama_ftype``, ``LLAMA_FTYPE_MOSTLY_`` dropped; 0 is ``ALL_F32``) to the
quantization's name. 4 to 6 and 33 to 35 are no longer written by llama.cpp but appear in older files."""

_NAME_TAGS = sorted({*FILE_TYPES.values(), "MXFP4"}, key=len, reverse=True)
_NAME_TAG = re.compile(r"(?:^|[-._])(" + "|".join(map(re.escape, _NAME_TAGS)) + r")(?=[-._]|$)", re.IGNORECASE)


def quantization_name(file_type: int) -> str:
    """The name of a ``general.file_type`` (``15`` -> ``"Q4_K_M"``); unknown numbers give ``"FTYPE_<n>"``.

    llama.cpp's "guessed" flag (1024) is ignored: the name is the same.
    """
    base = file_type & ~_GUESSED if file_type >= _GUESSED else file_type
    return FILE_TYPES.get(base, f"FTYPE_{file_type}")


def quantization_from_file_name(name: str) -> str | None:
    """The quantization tag in a file name (``"Llama-3-8B-Q4_K_M.gguf"`` -> ``"Q4_K_M"``), the last one if several.

    A tag counts only between separators (``-``, ``_``, ``.`` or the ends), so ``"f16"`` inside a word does not.
    """
    stem = name.rsplit("/", 1)[-1]
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    matches = _NAME_TAG.findall(stem)
    return matches[-1].upper() if matches else None


@dataclass(frozen=True)
class GGUFInfo:
    """The fields of a GGUF header the ModelCache status shows (``status.gguf``); ``None``: not given."""

    file_version: int | None = None
    architecture: str | None = None
    model_name: str | None = None
    license: str | None = None
    context_length: int | None = None
    embedding_size: int | None = None
    layer_count: int | None = None
    head_count: int | None = None
    head_count_kv: int | None = None
    key_length: int | None = None
    value_length: int | None = None
    quantization: str | None = None
    tensor_count: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON of the status (``headCountKV``), ``None`` fields left out."""
        return {key: getattr(self, attr) for attr, key in _JSON_KEYS.items() if getattr(self, attr) is not None}


_JSON_KEYS = {
    "file_version": "fileVersion",
    "architecture": "architecture",
    "model_name": "modelName",
    "license": "license",
    "context_length": "contextLength",
    "embedding_size": "embeddingSize",
    "layer_count": "layerCount",
    "head_count": "headCount",
    "head_count_kv": "headCountKV",
    "key_length": "keyLength",
    "value_length": "valueLength",
    "quantization": "quantization",
    "tensor_count": "tensorCount",
}


def _text(value: Value | None) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value[:MAX_INFO_TEXT] if value else None


def _count(value: Value | None) -> int | None:
    """A non-negative whole number that any JSON reader keeps exact; arrays, floats and bools are not counts."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= _JSON_SAFE_INT else None


def gguf_info(header: GGUFHeader, file_name: str | None = None) -> GGUFInfo:
    """The status fields of a header; ``file_name`` names the quantization when ``general.file_type`` is absent."""
    meta = header.metadata
    arch = _text(meta.get("general.architecture"))

    def arch_count(suffix: str) -> int | None:
        return _count(meta.get(f"{arch}.{suffix}")) if arch else None

    file_type = _count(meta.get("general.file_type"))
    if file_type is not None:
        quantization: str | None = quantization_name(file_type)
    else:
        quantization = quantization_from_file_name(file_name) if file_name else None
    return GGUFInfo(
        file_version=header.version,
        architecture=arch,
        model_name=_text(meta.get("general.name")),
        license=_text(meta.get("general.license")),
        context_length=arch_count("context_length"),
        embedding_size=arch_count("embedding_length"),
        layer_count=arch_count("block_count"),
        head_count=arch_count("attention.head_count"),
        head_count_kv=arch_count("attention.head_count_kv"),
        key_length=arch_count("attention.key_length"),
        value_length=arch_count("attention.value_length"),
        quantization=quantization,
        tensor_count=header.tensor_count,
    )
