"""One file: stream into ``NAME.partial`` while hashing, verify, rename.

Guarantees:

* the journal records the partial (with the remote identity) before its first byte is written, so a killed
  run's partial is resumed by the next run only against the same remote version;
* a resumed partial's prefix is re-hashed locally, then the source is asked for the rest; when it serves the
  whole file instead, the partial and the hash restart from 0;
* chunks are batched (:data:`BATCH` bytes) and each batch is hashed and written in a worker thread while the
  event loop reads the next one (one batch in flight: order is kept; no chunk is copied);
* a transient failure (connection reset, 5xx, short read) is retried from where the partial ends, at most
  :data:`ATTEMPTS` times; a digest mismatch is never retried: the partial (and any old file at the final
  path) is removed and ``IntegrityCheckFailed`` raised;
* the final path appears only by ``rename`` of a verified partial.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence

import structlog

from .plan import PARTIAL_SUFFIX, Expectation, JournalEntry, RemoteFile, check_digest
from .progress import Progress
from .result import DownloadError, FileEntry, Reason
from .sources.base import Source, TransientError
from .verify import PartialWriter, hash_file

ATTEMPTS = 4
# Bytes handed to the writer thread at once: few thread hops, and the socket keeps filling meanwhile.
BATCH = 1024 * 1024
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


async def _stream_into(source: Source, file: RemoteFile, writer: PartialWriter, progress: Progress) -> None:
    for attempt in range(ATTEMPTS):
        if file.size is not None and writer.size == file.size:
            return
        try:
            stream = await source.open(file, writer.size)
            if stream.offset != writer.size:
                progress.bytes_done -= writer.size
                await asyncio.to_thread(writer.restart)
            pending: asyncio.Future[None] | None = None
            batch: list[bytes] = []
            batched = 0
            try:
                async for chunk in stream.chunks:
                    batch.append(chunk)
                    batched += len(chunk)
                    progress.bytes_done += len(chunk)
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
            if file.size is not None and writer.size != file.size:
                raise TransientError(f"{file.name}: got {writer.size} of {file.size} bytes")
            return
        except TransientError as exc:
            if attempt + 1 >= ATTEMPTS:
                raise DownloadError(Reason.DOWNLOAD_FAILED, f"{exc} (gave up after {ATTEMPTS} attempts)") from None
            log.warning("retrying", file=file.name, error=str(exc), offset=writer.size, attempt=attempt + 1)
            await asyncio.sleep(BACKOFF[min(attempt, len(BACKOFF) - 1)])


async def fetch_file(
    source: Source,
    file: RemoteFile,
    offset: int,
    out: str,
    wanted: Sequence[Expectation],
    progress: Progress,
    journal: Journal,
) -> FileEntry:
    """Fetch ``file`` into ``out`` from ``offset`` of its partial, verify it and move it into place."""
    final = os.path.join(out, file.name)
    partial = final + PARTIAL_SUFFIX
    if offset == 0:
        _unlink(partial)
    journal(JournalEntry(file.name, file.identity, complete=False))
    writer = await asyncio.to_thread(PartialWriter, partial, offset)
    progress.bytes_done += offset
    if offset:
        log.info("resuming", file=file.name, offset=offset)
    try:
        await _stream_into(source, file, writer, progress)
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
