"""Direct I/O in the partial writer: which writes bypass the page cache, and that the bytes, digest and resume are
the same either way (also when the filesystem refuses ``O_DIRECT``)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import mmap
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download import verify
from kthena_py.download.verify import DIRECT_ALIGN, PartialWriter, direct_eligible

BLOCK = 4 * DIRECT_ALIGN


@pytest.mark.parametrize(
    ("offset", "length", "eligible"),
    [
        (0, 4096, True),
        (0, 4 * 1024 * 1024, True),
        (8192, 4096, True),
        (0, 0, False),
        (0, 1000, False),
        (0, 4097, False),
        (100, 4096, False),
        (4096, 8191, False),
    ],
)
def test_direct_eligible(offset: int, length: int, eligible: bool) -> None:
    assert direct_eligible(offset, length) is eligible


@given(st.integers(0, 2**40), st.integers(0, 2**24), st.sampled_from([512, 4096]))
def test_direct_eligible_means_both_aligned(offset: int, length: int, align: int) -> None:
    assert direct_eligible(offset, length, align) == (length > 0 and offset % align == 0 == length % align)


def _aligned(data: bytes) -> memoryview:
    buffer = mmap.mmap(-1, len(data))
    buffer.write(data)
    return memoryview(buffer)


class _Recorder:
    """Wraps ``os.write`` in the writer's module: records (offset, length, direct) of each write that succeeded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, refuse_direct: bool = False) -> None:
        self.writes: list[tuple[int, int, bool]] = []
        self.refused = 0
        real_write = os.write

        def write(fd: int, data: memoryview) -> int:
            direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
            if direct and refuse_direct:
                self.refused += 1
                raise OSError(errno.EINVAL, "direct I/O refused")
            offset = os.lseek(fd, 0, os.SEEK_CUR)
            count = real_write(fd, data)
            self.writes.append((offset, count, direct))
            return count

        monkeypatch.setattr(verify.os, "write", write)


def _write_blocks(writer: PartialWriter, data: bytes, block: int) -> None:
    for start in range(0, len(data), block):
        writer.write(_aligned(data[start : start + block]))


def test_aligned_blocks_bypass_the_page_cache_and_the_tail_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    data = os.urandom(3 * BLOCK + 1000)
    writer = PartialWriter(str(tmp_path / "f.partial"), 0)
    writer.use_direct_io()
    _write_blocks(writer, data, BLOCK)
    digest = writer.finish()
    assert recorder.writes == [
        (0, BLOCK, True),
        (BLOCK, BLOCK, True),
        (2 * BLOCK, BLOCK, True),
        (3 * BLOCK, 1000, False),
    ]
    assert (tmp_path / "f.partial").read_bytes() == data
    assert digest == hashlib.sha256(data).hexdigest()


def test_without_use_direct_io_everything_is_buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder(monkeypatch)
    data = os.urandom(2 * BLOCK)
    writer = PartialWriter(str(tmp_path / "f.partial"), 0)
    _write_blocks(writer, data, BLOCK)
    assert writer.finish() == hashlib.sha256(data).hexdigest()
    assert [direct for *_, direct in recorder.writes] == [False, False]


def test_a_resume_from_an_odd_offset_writes_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(2 * BLOCK)
    path = tmp_path / "f.partial"
    path.write_bytes(data[:777] + b"garbage after the offset")
    recorder = _Recorder(monkeypatch)
    writer = PartialWriter(str(path), 777)
    writer.use_direct_io()
    writer.write(_aligned(data[777 : 777 + BLOCK]))
    writer.write(_aligned(data[777 + BLOCK :]))
    assert writer.finish() == hashlib.sha256(data).hexdigest()
    assert path.read_bytes() == data
    assert [direct for *_, direct in recorder.writes] == [False, False]


def test_a_filesystem_that_refuses_direct_io_gets_every_byte_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch, refuse_direct=True)
    data = os.urandom(3 * BLOCK)
    writer = PartialWriter(str(tmp_path / "f.partial"), 0)
    writer.use_direct_io()
    _write_blocks(writer, data, BLOCK)
    assert writer.finish() == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f.partial").read_bytes() == data
    assert recorder.refused == 1  # tried once, then never again for this file
    assert [direct for *_, direct in recorder.writes] == [False, False, False]


def test_a_restart_after_direct_writes_starts_over(tmp_path: Path) -> None:
    first, second = os.urandom(2 * BLOCK), os.urandom(BLOCK + 5)
    writer = PartialWriter(str(tmp_path / "f.partial"), 0)
    writer.use_direct_io()
    _write_blocks(writer, first, BLOCK)
    writer.restart()
    _write_blocks(writer, second, BLOCK)
    assert writer.finish() == hashlib.sha256(second).hexdigest()
    assert (tmp_path / "f.partial").read_bytes() == second
