"""The transfer's worker-thread path (``kthena_py.download.transfer`` with a ``BlockingSource``): a file read
into one buffer by a thread, hashed and written; retries from where the partial ends; a source that cannot
serve the range restarts the hash and the progress; a cancelled file stops its thread before the transfer
returns; the early writeback of ``kthena_py.download.writeback`` covers the file in order."""

from __future__ import annotations

import asyncio
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kthena_py.download import transfer, writeback
from kthena_py.download.credentials import HttpCredentials
from kthena_py.download.plan import PARTIAL_SUFFIX, Expectation, JournalEntry, RemoteFile
from kthena_py.download.progress import Progress
from kthena_py.download.result import DownloadError, Reason
from kthena_py.download.sources.base import Stream, TransientError
from kthena_py.download.sources.http import HttpSource
from kthena_py.download.verify import PartialWriter
from kthena_py.testing.artifacts import Artifact, ArtifactServer


class FlakyBody:
    """Serves ``data[offset:]``; raises a transient error after ``fail_after`` bytes (once per body)."""

    def __init__(self, data: bytes, offset: int, fail_after: int | None) -> None:
        self.offset = offset
        self._data = data
        self._position = offset
        self._fail_at = None if fail_after is None else offset + fail_after

    def readinto(self, buffer: memoryview) -> int:
        end = min(len(self._data), self._position + len(buffer))
        if self._fail_at is not None:
            if self._position >= self._fail_at:
                raise TransientError("connection reset")
            end = min(end, self._fail_at)
        count = end - self._position
        buffer[:count] = self._data[self._position : end]
        self._position = end
        return count

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeBlockingSource:
    """A blocking source over bytes in memory: the first ``failures`` bodies break mid-way; with
    ``ignore_range`` every body starts at 0 whatever offset was asked."""

    def __init__(self, data: bytes, *, failures: int = 0, fail_after: int = 0, ignore_range: bool = False) -> None:
        self.data = data
        self.opened: list[int] = []
        self._failures = failures
        self._fail_after = fail_after
        self._ignore_range = ignore_range

    def open_blocking(self, file: RemoteFile, offset: int) -> FlakyBody:
        self.opened.append(offset)
        failing = len(self.opened) <= self._failures
        start = 0 if self._ignore_range else offset
        return FlakyBody(self.data, start, self._fail_after if failing else None)

    async def list(self) -> object:
        raise AssertionError("not used")

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        raise AssertionError("the transfer must use open_blocking for a blocking source")

    async def close(self) -> None:
        pass


def remote(data: bytes, name: str = "m.bin") -> RemoteFile:
    return RemoteFile(name, len(data), None, "id-1", name)


def want(data: bytes) -> tuple[Expectation, ...]:
    return (Expectation("--sha256", hashlib.sha256(data).hexdigest()),)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "BACKOFF", (0.0,))


@pytest.mark.parametrize("large", [False, True])
async def test_retries_continue_from_where_the_partial_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool
) -> None:
    if large:  # the large-file buffer (and direct I/O for its full blocks), with a small large buffer
        monkeypatch.setattr(transfer, "LARGE_FILE", 1)
        monkeypatch.setattr(transfer, "LARGE_BUFFER", 2 * transfer.BUFFER)
    buffer = transfer.buffer_size(3 * transfer.BUFFER + 123)
    assert buffer == (2 if large else 1) * transfer.BUFFER
    data = os.urandom(3 * transfer.BUFFER + 123)
    source = FakeBlockingSource(data, failures=2, fail_after=transfer.BUFFER + 7)
    progress = Progress()
    journal: list[JournalEntry | str] = []
    entry = await transfer.fetch_file(
        source, remote(data), 0, str(tmp_path), want(data), progress, journal.append, direct_io=large
    )
    assert source.opened == [0, transfer.BUFFER + 7, 2 * (transfer.BUFFER + 7)]
    assert (tmp_path / "m.bin").read_bytes() == data
    assert entry.sha256 == hashlib.sha256(data).hexdigest() and entry.size == len(data)
    assert progress.bytes_done == len(data)
    assert not (tmp_path / ("m.bin" + PARTIAL_SUFFIX)).exists()


async def test_a_source_that_ignores_the_range_restarts_hash_and_progress(tmp_path: Path) -> None:
    data = os.urandom(2 * transfer.BUFFER + 5)
    partial = tmp_path / ("m.bin" + PARTIAL_SUFFIX)
    partial.write_bytes(data[:1000])
    source = FakeBlockingSource(data, ignore_range=True)
    progress = Progress()
    entry = await transfer.fetch_file(source, remote(data), 1000, str(tmp_path), want(data), progress, lambda _: None)
    assert source.opened == [1000]
    assert entry.sha256 == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "m.bin").read_bytes() == data and progress.bytes_done == len(data)


async def test_attempts_are_bounded(tmp_path: Path) -> None:
    data = os.urandom(100_000)
    source = FakeBlockingSource(data, failures=transfer.ATTEMPTS, fail_after=10)
    with pytest.raises(DownloadError) as caught:
        await transfer.fetch_file(source, remote(data), 0, str(tmp_path), want(data), Progress(), lambda _: None)
    assert caught.value.reason is Reason.DOWNLOAD_FAILED and len(source.opened) == transfer.ATTEMPTS
    assert not (tmp_path / "m.bin").exists()


async def test_a_wrong_digest_leaves_nothing_at_the_final_path(tmp_path: Path) -> None:
    data = os.urandom(50_000)
    wrong = (Expectation("--sha256", "0" * 64),)
    with pytest.raises(DownloadError) as caught:
        await transfer.fetch_file(
            FakeBlockingSource(data), remote(data), 0, str(tmp_path), wrong, Progress(), lambda _: None
        )
    assert caught.value.reason is Reason.INTEGRITY_CHECK_FAILED
    assert sorted(p.name for p in tmp_path.iterdir()) == []


async def test_over_http_in_the_given_executor(server: ArtifactServer, tmp_path: Path) -> None:
    data = os.urandom(3_000_000)
    server.add("/m.bin", Artifact(data))
    source = HttpSource(f"{server.url}/m.bin", HttpCredentials())
    listing = await source.list()
    progress = Progress()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-transfer") as executor:
        entry = await transfer.fetch_file(
            source, listing.files[0], 0, str(tmp_path), want(data), progress, lambda _: None, executor
        )
    assert (tmp_path / "m.bin").read_bytes() == data and entry.size == len(data)
    assert progress.bytes_done == len(data)


async def test_cancelling_a_file_stops_its_thread_before_returning(server: ArtifactServer, tmp_path: Path) -> None:
    data = os.urandom(4_000_000)
    server.add("/slow.bin", Artifact(data, throttle=400_000))
    source = HttpSource(f"{server.url}/slow.bin", HttpCredentials())
    listing = await source.list()
    progress = Progress()
    task = asyncio.ensure_future(
        transfer.fetch_file(source, listing.files[0], 0, str(tmp_path), want(data), progress, lambda _: None)
    )
    partial = tmp_path / ("slow.bin" + PARTIAL_SUFFIX)
    for _ in range(500):  # at most 10 s for the first bytes
        if partial.exists() and partial.stat().st_size > 0:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    size = partial.stat().st_size
    await asyncio.sleep(0.5)  # the thread is gone: nothing more is written after the transfer returned
    assert partial.stat().st_size == size < len(data)
    assert progress.bytes_done == size
    assert not (tmp_path / "slow.bin").exists()


def test_writeback_requests_cover_the_file_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, int, int]] = []

    def record(fd: int, offset: int, length: int, flags: int) -> int:
        calls.append((fd, offset, length, flags))
        return 0

    monkeypatch.setattr(writeback, "_sync_file_range", lambda: record)
    monkeypatch.setattr(writeback, "STEP", 1000)
    writer = PartialWriter(str(tmp_path / "p"), 0)
    block = memoryview(bytearray(os.urandom(600)))
    for _ in range(6):
        writer.write(block)
    digest = writer.finish()
    assert [(offset, length) for _, offset, length, _ in calls] == [(0, 1200), (1200, 1200), (2400, 1200)]
    assert {flags for *_, flags in calls} == {writeback.SYNC_FILE_RANGE_WRITE}
    assert digest == hashlib.sha256(bytes(block) * 6).hexdigest()


@pytest.mark.parametrize(
    ("size", "buffer"),
    [
        (None, transfer.BUFFER),
        (0, transfer.BUFFER),
        (transfer.LARGE_FILE - 1, transfer.BUFFER),
        (transfer.LARGE_FILE, transfer.LARGE_BUFFER),
        (2**40, transfer.LARGE_BUFFER),
    ],
)
def test_buffer_size(size: int | None, buffer: int) -> None:
    assert transfer.buffer_size(size) == buffer


def test_writeback_is_done_on_linux() -> None:
    assert writeback.available() is os.uname().sysname.startswith("Linux")
