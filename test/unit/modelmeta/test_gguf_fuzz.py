"""The GGUF parser on hostile input: random bytes, every truncation of a valid file, byte flips, and lying counts
and lengths. The only outcomes are a header or a GGUFError; reads never ask for more than the caps allow."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kthena_py.modelmeta import gguf
from kthena_py.modelmeta.gguf import GGUFError, GGUFHeader, read_header
from kthena_py.testing.artifacts import gguf as writer
from kthena_py.testing.artifacts.gguf import Array, gguf_bytes, llama_like

VALID = llama_like(
    vocabulary=80,
    extra={"nested": Array(writer.ARRAY, [Array(writer.STRING, ["a", "bc"]), Array(writer.FLOAT64, [1.0])])},
)
WALKED = gguf_bytes(
    [
        (
            "nested",
            Array(
                writer.ARRAY, [Array(writer.STRING, ["ab", ""]), Array(writer.ARRAY, [Array(writer.INT16, [1])])] * 40
            ),
        ),
        ("tokens", Array(writer.STRING, [f"t{i}" for i in range(100)])),
        ("after", 7),
    ]
)
"""Long arrays (walked, not kept), so byte flips land in the skipping code too."""
LARGEST_READ = max(gguf.MAX_STRING_BYTES, gguf.MAX_KEY_BYTES, 1 << 20)
"""No single read may ask for more (1 MiB is the chunk long arrays are skipped in)."""


class _Recording(io.RawIOBase):
    """A stream over ``data`` that records the size of every read; ``seekable`` chooses whether it knows its end."""

    def __init__(self, data: bytes, *, seekable: bool) -> None:
        self._data = io.BytesIO(data)
        self._seekable = seekable
        self.largest = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def seek(self, offset: int, whence: int = 0) -> int:
        if not self._seekable:
            raise OSError("not seekable")
        return self._data.seek(offset, whence)

    def tell(self) -> int:
        return self._data.tell()

    def read(self, size: int = -1) -> bytes:
        assert size >= 0, "the parser never reads to the end"
        self.largest = max(self.largest, size)
        return self._data.read(size)


def _outcome(data: bytes, *, seekable: bool = True) -> GGUFHeader | GGUFError:
    stream = _Recording(data, seekable=seekable)
    try:
        header = read_header(stream)  # any other exception fails the test
    except GGUFError as error:
        assert 0 <= error.offset <= len(data)
        assert str(error).endswith(f"(at byte {error.offset})")
        result: GGUFHeader | GGUFError = error
    else:
        assert header.size <= len(data)
        result = header
    assert stream.largest <= LARGEST_READ
    return result


@pytest.mark.parametrize("seekable", [True, False])
def test_every_truncation_of_a_valid_file_is_a_clear_error(seekable: bool) -> None:
    assert isinstance(_outcome(VALID, seekable=seekable), GGUFHeader)
    for end in range(len(VALID)):
        outcome = _outcome(VALID[:end], seekable=seekable)
        assert isinstance(outcome, GGUFError), end
        assert "truncated" in outcome.problem or end < 8, (end, outcome)


@given(st.binary(max_size=512), st.booleans())
def test_random_bytes_give_a_header_or_a_clear_error(data: bytes, seekable: bool) -> None:
    _outcome(data, seekable=seekable)


@given(st.binary(max_size=512), st.sampled_from([2, 3]), st.booleans())
def test_random_bodies_after_a_valid_preamble_give_a_header_or_a_clear_error(
    body: bytes, version: int, seekable: bool
) -> None:
    _outcome(b"GGUF" + struct.pack("<I", version) + body, seekable=seekable)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_byte_flips_in_a_valid_file_give_a_header_or_a_clear_error(flips: list[tuple[int, int]]) -> None:
    data = bytearray(VALID)
    for index, value in flips:
        data[index] = value
    _outcome(bytes(data))
    _outcome(bytes(data), seekable=False)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(WALKED) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_byte_flips_in_walked_arrays_give_a_header_or_a_clear_error(flips: list[tuple[int, int]]) -> None:
    data = bytearray(WALKED)
    for index, value in flips:
        data[index] = value
    _outcome(bytes(data))
    _outcome(bytes(data), seekable=False)


def test_every_truncation_of_walked_arrays_is_a_clear_error() -> None:
    assert isinstance(_outcome(WALKED), GGUFHeader)
    for end in range(len(WALKED)):
        assert isinstance(_outcome(WALKED[:end], seekable=end % 2 == 0), GGUFError), end


COUNTS = st.one_of(
    st.integers(0, 2**64 - 1),
    st.sampled_from([2**64 - 1, 2**63, 2**32, gguf.MAX_ARRAY_LENGTH, gguf.MAX_STRING_BYTES + 1, 2**24 + 1]),
)


@given(kv=COUNTS, tensors=COUNTS, seekable=st.booleans())
@example(kv=2**64 - 1, tensors=0, seekable=False)
def test_lying_counts_are_refused_before_anything_is_read_for_them(kv: int, tensors: int, seekable: bool) -> None:
    data = b"GGUF" + struct.pack("<IQQ", 3, tensors, kv) + gguf_bytes([("a", 1)])[24:]
    outcome = _outcome(data, seekable=seekable)
    if isinstance(outcome, GGUFHeader):
        assert kv <= 1 and tensors <= gguf.MAX_TENSOR_COUNT


@given(
    length=COUNTS,
    element_type=st.integers(0, 15),
    where=st.sampled_from(["key", "string", "array"]),
    seekable=st.booleans(),
)
@example(length=gguf.MAX_ARRAY_LENGTH, element_type=9, where="array", seekable=False)
@example(length=gguf.MAX_STRING_BYTES, element_type=8, where="string", seekable=False)
def test_lying_lengths_are_refused_before_allocating(
    length: int, element_type: int, where: str, seekable: bool
) -> None:
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    if where == "key":
        data = head + struct.pack("<Q", length) + b"key"
    elif where == "string":
        data = head + struct.pack("<Q", 1) + b"k" + struct.pack("<IQ", 8, length) + b"abc"
    else:
        data = head + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, element_type, length) + b"\x01" * 16
    outcome = _outcome(data, seekable=seekable)
    if length > len(data):  # more than the whole input: never believed
        assert isinstance(outcome, GGUFError)
    if where == "key":  # no room for a value type after any key the input can hold
        assert isinstance(outcome, GGUFError)
