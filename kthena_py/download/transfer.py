"""One file: stream into ``NAME.partial`` while hashing, verify, rename.

Guarantees:

* the journal records the partial (with the remote identity) before its first byte is written, so a killed
  run's partial is resumed by the next run only against the same remote version;
* a resumed partial's prefix is re-hashed locally, then the source is asked for the rest; when it serves the
  whole file instead, the partial, the hash and the progress restart from 0;
* a :class:`~.sources.base.BlockingSource` (http, hf, local) is read by one worker thread per file, of the
  ``executor`` the run sizes to ``--max-workers``: the thread reads into one preallocated, page-aligned buffer
  (:func:`buffer_size`), hashes it and writes it (with direct I/O when the filesystem allows it, see
  :class:`~.verify.PartialWriter`), with the GIL released in each of the three (no chunk objects,
  no event-loop hop per chunk); cancelling the file stops the thread at its next read (the socket is shut
  down) and waits for it, so the partial is never written after the transfer returns;
* other sources stream chunks to the event loop, which batches them (:data:`BATCH` bytes) for a worker thread
  to hash and write while the next batch is read (one batch in flight: order is kept; no chunk is copied);
* a transient failure (connection reset, 5xx, short read) is retried from where the partial ends, at most
  :data:`ATTEMPTS` times; a digest mismatch is never retried: the partial (and any old file at the final
  path) is removed and ``IntegrityCheckFailed`` raised;
* the final path appears only by ``rename`` of a verified partial.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import mmap
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor

import structlog

from .plan import PARTIAL_SUFFIX, Expectation, JournalEntry, RemoteFile, check_digest
from .progress import Progress
from .result import DownloadError, FileEntry, Reason
from .sources.base import BlockingSource, Body, Source, TransientError
from .verify import PartialWriter, hash_file

ATTEMPTS = 4
# Bytes handed to the writer thread at once on the streaming path: few thread hops, and the socket keeps
# filling meanwhile.
BATCH = 1024 * 1024
# The blocking path's read buffer (one per file in flight, page-aligned), by file size. Small files: 256 KiB,
# which stays in the CPU's L2 cache between the read, the hash and the write. Files of LARGE_FILE bytes and
# more (model shards): 4 MiB, whose full blocks are written with direct I/O (see verify.PartialWriter), where
# each write costs a fixed overhead plus a wait for the disk: measured on loopback with 4 x 512 MiB, 4 MiB used
# about 1.9 CPU-seconds against 3.0 for 256 KiB, and was faster than 1, 2 or 8 MiB. A larger buffer also means
# the partial (and the progress) grows in larger steps, so small files keep the small one.
BUFFER = 256 * 1024
LARGE_BUFFER = 4 * 1024 * 1024
LARGE_FILE = 64 * 1024 * 1024


def buffer_size(file_size: int | None) -> int:
    """The read buffer for a file of ``file_size`` bytes (``None``: unknown)."""
    return LARGE_BUFFER if file_size is not None and file_size >= LARGE_FILE else BUFFER


BACKOFF = (0.5, 1.0, 2.0)
log = structlog.get_logger("kthena_py.download")

Journal = Callable[[JournalEntry | str], None]


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _rename_into_place(partial: str, final: str) -> None:
    os.replace(partial, final)
    fd = os.open(os.path.dirname(final), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def _with_retries(file: RemoteFile, writer: PartialWriter, attempt: Callable[[], Awaitable[None]]) -> None:
    for number in range(ATTEMPTS):
        if file.size is not None and writer.size == file.size:
            return
        try:
            await attempt()
            if file.size is not None and writer.size != file.size:
                raise TransientError(f"{file.name}: got {writer.size} of {file.size} bytes")
            return
        except TransientError as exc:
            if number + 1 >= ATTEMPTS:
                raise DownloadError(Reason.DOWNLOAD_FAILED, f"{exc} (gave up after {ATTEMPTS} attempts)") from None
            log.warning("retrying", file=file.name, error=str(exc), offset=writer.size, attempt=number + 1)
            await asyncio.sleep(BACKOFF[min(number, len(BACKOFF) - 1)])


async def _stream_once(source: Source, file: RemoteFile, writer: PartialWriter, progress: Progress) -> None:
    stream = await source.open(file, writer.size)
    if stream.offset != writer.size:
        progress.add_bytes(-writer.size)
        await asyncio.to_thread(writer.restart)
    pending: asyncio.Future[None] | None = None
    batch: list[bytes] = []
    batched = 0
    try:
        async for chunk in stream.chunks:
            batch.append(chunk)
            batched += len(chunk)
            progress.add_bytes(len(chunk))
            if batched < BATCH:
                continue
            if pending is not None:
                await pending
            pending = asyncio.ensure_future(asyncio.to_thread(writer.write_batch, batch))
            batch, batched = [], 0
        if pending is not None:
            await pending
            pending = None
        if batch:
            await asyncio.to_thread(writer.write_batch, batch)
    finally:
        if pending is not None:
            with contextlib.suppress(BaseException):
                await pending
        with contextlib.suppress(Exception):
            await stream.chunks.aclose()


class _ThreadedFile:
    """One file read by a worker thread: the state that thread shares with the event loop."""

    def __init__(
        self, source: BlockingSource, file: RemoteFile, writer: PartialWriter, progress: Progress, direct_io: bool
    ) -> None:
        self._source = source
        self._file = file
        self._writer = writer
        self._progress = progress
        # An anonymous mapping starts on a page boundary, as direct I/O needs (see verify.PartialWriter).
        self._buffer = memoryview(mmap.mmap(-1, buffer_size(file.size)))
        if direct_io:
            writer.use_direct_io()
        self._stop = threading.Event()
        self._body: Body | None = None
        self._lock = threading.Lock()

    def attempt(self) -> None:
        """One GET from where the partial ends, read to its end (in the worker thread)."""
        body = self._source.open_blocking(self._file, self._writer.size)
        with self._lock:
            self._body = body
        try:
            writer, progress, buffer = self._writer, self._progress, self._buffer
            if body.offset != writer.size:
                progress.add_bytes(-writer.size)
                writer.restart()
            while not self._stop.is_set():
                count = body.readinto(buffer)
                if not count:
                    return
                writer.write(buffer[:count])
                progress.add_bytes(count)
        finally:
            with self._lock:
                self._body = None
            body.close()

    def stop(self) -> None:
        """Make the thread stop at its next read (from the event loop)."""
        self._stop.set()
        with self._lock:
            if self._body is not None:
                self._body.abort()


async def _threaded_once(threaded: _ThreadedFile, executor: Executor | None) -> None:
    future = asyncio.get_running_loop().run_in_executor(executor, threaded.attempt)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        threaded.stop()
        with contextlib.suppress(BaseException):
            await future
        raise


async def fetch_file(
    source: Source,
    file: RemoteFile,
    offset: int,
    out: str,
    wanted: Sequence[Expectation],
    progress: Progress,
    journal: Journal,
    executor: Executor | None = None,
    direct_io: bool = False,
) -> FileEntry:
    """Fetch ``file`` into ``out`` from ``offset`` of its partial, verify it and move it into place.

    ``direct_io``: the blocking path may write full blocks with direct I/O (the caller decided the filesystem
    suits it, see :mod:`.filesystems`).
    """
    final = os.path.join(out, file.name)
    partial = final + PARTIAL_SUFFIX
    if offset == 0:
        _unlink(partial)
    journal(JournalEntry(file.name, file.identity, complete=False))
    writer = await asyncio.to_thread(PartialWriter, partial, offset)
    progress.add_bytes(offset)
    if offset:
        log.info("resuming", file=file.name, offset=offset)
    attempt: Callable[[], Awaitable[None]]
    if isinstance(source, BlockingSource):
        threaded = _ThreadedFile(source, file, writer, progress, direct_io)
        attempt = functools.partial(_threaded_once, threaded, executor)
    else:
        attempt = functools.partial(_stream_once, source, file, writer, progress)
    try:
        await _with_retries(file, writer, attempt)
        digest = await asyncio.to_thread(writer.finish)
    finally:
        writer.close()
    mismatch = check_digest(file.name, digest, wanted)
    if mismatch is not None:
        _unlink(partial)
        _unlink(final)
        journal(file.name)
        raise DownloadError(Reason.INTEGRITY_CHECK_FAILED, mismatch)
    await asyncio.to_thread(_rename_into_place, partial, final)
    entry = FileEntry(file.name, writer.size, digest)
    journal(JournalEntry(file.name, file.identity, complete=True, size=writer.size, sha256=digest))
    return entry


async def verify_local(file: RemoteFile, out: str, wanted: Sequence[Expectation]) -> FileEntry | None:
    """Hash a final file already in place; its entry when it satisfies ``wanted``, else ``None`` (and it is removed)."""
    final = os.path.join(out, file.name)
    digest, size = await asyncio.to_thread(hash_file, final)
    if check_digest(file.name, digest, wanted) is None:
        return FileEntry(file.name, size, digest)
    _unlink(final)
    return None
