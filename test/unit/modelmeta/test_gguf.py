"""The GGUF header parser on files from the independent test writer: every value type, arrays, both versions,
refusals with their offsets, the caps, and the fields the status shows."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest

from kthena_py.modelmeta import gguf
from kthena_py.modelmeta.gguf import (
    FILE_TYPES,
    KEPT_ARRAY_LENGTH,
    GGUFError,
    SkippedArray,
    ValueType,
    gguf_info,
    quantization_from_file_name,
    quantization_name,
    read_header,
)
from kthena_py.testing.artifacts import gguf as writer
from kthena_py.testing.artifacts.gguf import Array, Typed, gguf_bytes, llama_like


def _parse(data: bytes) -> gguf.GGUFHeader:
    return read_header(io.BytesIO(data))


EVERY_TYPE: list[tuple[str, Any, Any]] = [
    ("u8", Typed(writer.UINT8, 255), 255),
    ("i8", Typed(writer.INT8, -128), -128),
    ("u16", Typed(writer.UINT16, 65535), 65535),
    ("i16", Typed(writer.INT16, -32768), -32768),
    ("u32", Typed(writer.UINT32, 2**32 - 1), 2**32 - 1),
    ("i32", Typed(writer.INT32, -(2**31)), -(2**31)),
    ("u64", Typed(writer.UINT64, 2**64 - 1), 2**64 - 1),
    ("i64", Typed(writer.INT64, -(2**63)), -(2**63)),
    ("f32", Typed(writer.FLOAT32, 1.5), 1.5),
    ("f64", Typed(writer.FLOAT64, 0.1), 0.1),
    ("true", Typed(writer.BOOL, True), True),
    ("false", Typed(writer.BOOL, False), False),
    ("str", "héllo wörld", "héllo wörld"),
    ("empty-str", "", ""),
    ("arr-u8", Array(writer.UINT8, [1, 2, 3]), [1, 2, 3]),
    ("arr-i64", Array(writer.INT64, [-1, 2**40]), [-1, 2**40]),
    ("arr-f64", Array(writer.FLOAT64, [0.25, -2.0]), [0.25, -2.0]),
    ("arr-bool", Array(writer.BOOL, [True, False]), [True, False]),
    ("arr-str", Array(writer.STRING, ["a", "", "ccc"]), ["a", "", "ccc"]),
    ("arr-empty", Array(writer.INT32, []), []),
    (
        "arr-nested",
        Array(writer.ARRAY, [Array(writer.UINT16, [7, 8]), Array(writer.STRING, ["x"]), Array(writer.INT8, [])]),
        [[7, 8], ["x"], []],
    ),
    (
        "arr-deep",
        Array(writer.ARRAY, [Array(writer.ARRAY, [Array(writer.ARRAY, [Array(writer.UINT8, [9])])])]),
        [[[[9]]]],
    ),
]


@pytest.mark.parametrize("version", [2, 3])
def test_every_value_type_and_array_reads_back(version: int) -> None:
    data = gguf_bytes([(key, value) for key, value, _ in EVERY_TYPE], version=version, tensor_count=7)
    header = _parse(data)
    assert header.version == version and header.tensor_count == 7 and header.size == len(data)
    assert dict(header.metadata) == {key: expected for key, _, expected in EVERY_TYPE}
    assert list(header.metadata) == [key for key, _, _ in EVERY_TYPE]


def test_the_parser_stops_at_the_end_of_the_metadata() -> None:
    data = llama_like(trailer=b"\xff" * 4096)
    header = _parse(data)
    assert header.size == len(data) - 4096


def test_long_arrays_are_walked_but_kept_as_type_and_length() -> None:
    long_strings = Array(writer.STRING, [f"tok{i}" for i in range(KEPT_ARRAY_LENGTH + 1)])
    long_floats = Array(writer.FLOAT32, [1.0] * 1000)
    long_nested = Array(writer.ARRAY, [Array(writer.INT16, [1, 2, 3]), Array(writer.INT16, [])] * 50)
    just_kept = Array(writer.UINT8, list(range(KEPT_ARRAY_LENGTH)))
    data = gguf_bytes(
        [("s", long_strings), ("f", long_floats), ("n", long_nested), ("k", just_kept), ("after", "still read")]
    )
    meta = _parse(data).metadata
    assert meta["s"] == SkippedArray(ValueType.STRING, KEPT_ARRAY_LENGTH + 1)
    assert meta["f"] == SkippedArray(ValueType.FLOAT32, 1000)
    assert meta["n"] == SkippedArray(ValueType.ARRAY, 100)
    assert meta["k"] == list(range(KEPT_ARRAY_LENGTH))
    assert meta["after"] == "still read"


def _error(data: bytes) -> GGUFError:
    with pytest.raises(GGUFError) as caught:
        _parse(data)
    return caught.value


def _u32(value: int) -> bytes:
    return struct.pack("<I", value)


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


HEADER = b"GGUF" + _u32(3) + _u64(0)


@pytest.mark.parametrize(
    ("data", "words", "offset"),
    [
        (b"", "truncated: magic", 0),
        (b"GGML" + _u32(3), "not a GGUF file", 0),
        (b"GGUF" + _u32(1) + _u32(0) + _u32(0), "v1", 4),
        (b"GGUF" + struct.pack(">I", 3) + _u64(0) + _u64(0), "big-endian GGUF v3", 4),
        (b"GGUF" + _u32(4) + _u64(0) + _u64(0), "unsupported GGUF version 4", 4),
        (b"GGUF" + _u32(3) + _u64(2**40) + _u64(0), "tensor count", 8),
        (HEADER + _u64(gguf.MAX_KV_COUNT + 1), "key/value count", 16),
        (HEADER + _u64(2), "truncated: 2 key/values needs 26 bytes, 0 left", 24),
        (HEADER + _u64(1) + _u64(gguf.MAX_KEY_BYTES + 1) + b"k" * 5, "key #0 of 65536 bytes is over", 24),
        (HEADER + _u64(1) + _u64(1) + b"k" + _u32(13), "unknown value type 13", 33),
        (HEADER + _u64(1) + _u64(1) + b"k" + _u32(8) + _u64(2**63), "over the 1048576-byte cap", 37),
        (HEADER + _u64(1) + _u64(1) + b"k" + _u32(8) + _u64(100) + b"abc", "truncated: 'k' needs 100 bytes", 45),
        (HEADER + _u64(1) + _u64(1) + b"k" + _u32(9) + _u32(0) + _u64(2**62), "elements is over the", 41),
        (
            HEADER + _u64(1) + _u64(1) + b"k" + _u32(9) + _u32(6) + _u64(1000) + b"\0" * 8,
            "truncated: 'k' of 1000 elements needs 4000 bytes",
            49,
        ),
        (HEADER + _u64(1) + _u64(1) + b"k" + _u32(9) + _u32(42) + _u64(0), "unknown value type 42", 37),
    ],
)
def test_bad_headers_are_refused_with_their_offset(data: bytes, words: str, offset: int) -> None:
    error = _error(data)
    assert words in str(error)
    assert error.offset == offset
    assert f"(at byte {offset})" in str(error)


def test_duplicate_keys_are_refused() -> None:
    error = _error(gguf_bytes([("a", 1), ("a", 2)]))
    assert "duplicate key 'a'" in str(error)


def test_nesting_deeper_than_the_cap_is_refused() -> None:
    value: Any = Array(writer.UINT8, [1])
    for _ in range(gguf.MAX_NESTING):
        value = Array(writer.ARRAY, [value])
    assert "nested deeper" in str(_error(gguf_bytes([("deep", value)])))


def test_the_byte_cap_bounds_what_is_read() -> None:
    data = gguf_bytes([("a", "x" * 1000), ("b", "y" * 1000)])
    assert _parse(data).metadata["b"] == "y" * 1000
    with pytest.raises(GGUFError, match="over the 1500-byte metadata cap"):
        read_header(io.BytesIO(data), max_bytes=1500)


class _Unseekable(io.RawIOBase):
    """A stream that cannot tell its size (a pipe) and records every read size."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.sizes: list[int] = []

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.sizes.append(size)
        return self._data.read(size)


def test_an_unseekable_stream_is_read_the_same_and_a_lying_length_is_truncation() -> None:
    data = llama_like(vocabulary=300)
    stream = _Unseekable(data)
    assert read_header(stream).metadata == _parse(data).metadata
    lying = HEADER + _u64(1) + _u64(1) + b"k" + _u32(8) + _u64(gguf.MAX_STRING_BYTES) + b"short"
    stream = _Unseekable(lying)
    with pytest.raises(GGUFError, match="truncated"):
        read_header(stream)
    assert max(stream.sizes) <= gguf.MAX_STRING_BYTES


@pytest.mark.parametrize(
    ("file_type", "name"),
    [
        (0, "F32"),
        (1, "F16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (7, "Q8_0"),
        (8, "Q5_0"),
        (9, "Q5_1"),
        (10, "Q2_K"),
        (11, "Q3_K_S"),
        (12, "Q3_K_M"),
        (13, "Q3_K_L"),
        (14, "Q4_K_S"),
        (15, "Q4_K_M"),
        (16, "Q5_K_S"),
        (17, "Q5_K_M"),
        (18, "Q6_K"),
        (19, "IQ2_XXS"),
        (20, "IQ2_XS"),
        (21, "Q2_K_S"),
        (22, "IQ3_XS"),
        (23, "IQ3_XXS"),
        (24, "IQ1_S"),
        (25, "IQ4_NL"),
        (26, "IQ3_S"),
        (27, "IQ3_M"),
        (28, "IQ2_S"),
        (29, "IQ2_M"),
        (30, "IQ4_XS"),
        (31, "IQ1_M"),
        (32, "BF16"),
        (36, "TQ1_0"),
        (37, "TQ2_0"),
        (38, "MXFP4_MOE"),
        (1024 + 15, "Q4_K_M"),
        (5, "FTYPE_5"),
        (6, "FTYPE_6"),
        (999, "FTYPE_999"),
    ],
)
def test_quantization_names_follow_llama_cpp_numbering(file_type: int, name: str) -> None:
    assert quantization_name(file_type) == name


def test_every_named_file_type_has_a_distinct_name() -> None:
    assert len(set(FILE_TYPES.values())) == len(FILE_TYPES)


@pytest.mark.parametrize(
    ("file_name", "quantization"),
    [
        ("model-Q4_K_M.gguf", "Q4_K_M"),
        ("Meta-Llama-3-8B-Instruct.Q8_0.gguf", "Q8_0"),
        ("qwen2.5-7b-instruct-q5_k_s-00001-of-00002.gguf", "Q5_K_S"),
        ("subdir/tinyllama-1.1b-chat-v1.0.IQ4_XS.gguf", "IQ4_XS"),
        ("gemma-2b-it-bf16.gguf", "BF16"),
        ("phi-3-mini-4k-instruct-f16.gguf", "F16"),
        ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
        ("model.gguf", None),
        ("llama-q4_k_mx.gguf", None),
        ("selff16.gguf", None),
    ],
)
def test_quantization_from_the_file_name(file_name: str, quantization: str | None) -> None:
    assert quantization_from_file_name(file_name) == quantization


def test_info_reads_the_llama_fields() -> None:
    data = llama_like(
        architecture="qwen2",
        name="Qwen2 Tiny",
        license="mit",
        context_length=32768,
        embedding_length=896,
        block_count=24,
        head_count=14,
        head_count_kv=2,
        key_length=64,
        value_length=64,
        file_type=18,
        tensor_count=290,
        version=2,
    )
    info = gguf_info(_parse(data), "qwen2-Q8_0.gguf")
    assert info.to_json() == {
        "fileVersion": 2,
        "architecture": "qwen2",
        "modelName": "Qwen2 Tiny",
        "license": "mit",
        "contextLength": 32768,
        "embeddingSize": 896,
        "layerCount": 24,
        "headCount": 14,
        "headCountKV": 2,
        "keyLength": 64,
        "valueLength": 64,
        "quantization": "Q6_K",  # the header wins over the file name
        "tensorCount": 290,
    }


def test_info_falls_back_to_the_file_name_and_leaves_out_what_is_not_a_scalar_count() -> None:
    data = llama_like(
        file_type=None,
        name=None,
        license=None,
        head_count=Array(writer.UINT32, [32] * 4),
        head_count_kv=Typed(writer.INT32, -1),
        extra={"llama.context_length_extra": 1},
    )
    info = gguf_info(_parse(data), "tiny-Q4_K_M.gguf")
    assert info.quantization == "Q4_K_M"
    assert info.head_count is None and info.head_count_kv is None
    assert info.model_name is None and info.license is None
    assert info.context_length == 4096
    assert gguf_info(_parse(data)).quantization is None


def test_info_of_a_header_without_an_architecture_has_no_per_architecture_fields() -> None:
    data = gguf_bytes([("llama.context_length", 4096), ("general.architecture", Typed(writer.UINT8, 1))])
    info = gguf_info(_parse(data))
    assert info.architecture is None and info.context_length is None
    assert info.to_json() == {"fileVersion": 3, "tensorCount": 0}


def test_info_strings_are_cut_and_stripped() -> None:
    info = gguf_info(_parse(gguf_bytes([("general.name", "  " + "n" * 500 + " ")])))
    assert info.model_name == "n" * gguf.MAX_INFO_TEXT


def test_kept_elements_are_bounded_in_all_even_for_nested_small_arrays() -> None:
    small = Array(writer.BOOL, [True] * KEPT_ARRAY_LENGTH)
    nested = Array(writer.ARRAY, [Array(writer.ARRAY, [small] * KEPT_ARRAY_LENGTH)] * KEPT_ARRAY_LENGTH)
    header = _parse(gguf_bytes([("many", nested), ("after", small)]))

    def kept(value: Any) -> int:
        return len(value) + sum(kept(v) for v in value if isinstance(v, list)) if isinstance(value, list) else 0

    total = sum(kept(v) for v in header.metadata.values())
    assert gguf.MAX_KEPT_ELEMENTS - KEPT_ARRAY_LENGTH <= total <= gguf.MAX_KEPT_ELEMENTS
    inner = header.metadata["many"]
    assert isinstance(inner, list) and any(isinstance(v, SkippedArray) for v in inner)
    assert header.metadata["after"] == SkippedArray(ValueType.BOOL, KEPT_ARRAY_LENGTH)  # the budget is spent


def _long_array_of(*inner: bytes) -> bytes:
    """A key 'k' holding an array (longer than kept) of raw encoded inner arrays, padded with empty ones."""
    empty = struct.pack("<IQ", writer.UINT8, 0)
    elements = list(inner) + [empty] * (KEPT_ARRAY_LENGTH + 1 - len(inner))
    body = struct.pack("<IQ", writer.ARRAY, len(elements)) + b"".join(elements)
    return HEADER + _u64(1) + _u64(1) + b"k" + _u32(writer.ARRAY) + body


def test_skipped_arrays_of_arrays_get_the_same_checks() -> None:
    assert _parse(_long_array_of()).metadata["k"] == SkippedArray(ValueType.ARRAY, KEPT_ARRAY_LENGTH + 1)
    first = 24 + 8 + 1 + 4 + 12  # where the first inner array starts
    unknown = _error(_long_array_of(struct.pack("<IQ", 77, 0)))
    assert "unknown value type 77" in str(unknown) and unknown.offset == first
    too_long = _error(_long_array_of(struct.pack("<IQ", writer.UINT8, gguf.MAX_ARRAY_LENGTH + 1)))
    assert "elements is over the" in str(too_long) and too_long.offset == first + 4
    lying = _error(_long_array_of(struct.pack("<IQ", writer.UINT64, 1000)))
    assert "truncated" in str(lying)
    deep: bytes = struct.pack("<IQ", writer.UINT8, 0)
    for _ in range(gguf.MAX_NESTING - 1):
        deep = struct.pack("<IQ", writer.ARRAY, 1) + deep
    assert "nested deeper" in str(_error(_long_array_of(deep)))
    ok = struct.pack("<IQ", writer.UINT8, 0)
    for _ in range(gguf.MAX_NESTING - 2):
        ok = struct.pack("<IQ", writer.ARRAY, 1) + ok
    assert isinstance(_parse(_long_array_of(ok)).metadata["k"], SkippedArray)
