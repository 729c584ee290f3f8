"""What every source adapter provides: a listing and a byte stream from an offset.

Guarantees asked of an adapter:

* :meth:`Source.list` makes the only metadata requests; it returns every file with a stable ``identity``
  (ETag, commit + blob id, size + mtime), so a partial is resumed only against the same remote version;
* :meth:`Source.open` streams one file from ``offset``. If the source cannot serve a range it starts from 0 and
  says so in :attr:`Stream.offset`; the caller then restarts the hash. It raises
  :class:`~kthena_py.download.result.DownloadError` with ``SourceNotFound``/``AccessDenied`` for answers a retry
  cannot fix and :class:`TransientError` for those it may.

An adapter whose client blocks (plain sockets, files) may also be a :class:`BlockingSource`: the transfer
layer then runs each file in one worker thread that reads straight into a preallocated buffer (see
:mod:`kthena_py.download.transfer`). :meth:`BlockingSource.open_blocking` keeps the same offset rule and the
same errors as :meth:`Source.open`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kthena_py.sourceid import SourceIdentity

from ..plan import RemoteFile


class TransientError(Exception):
    """A failure worth retrying from where the partial ends (connection reset, 5xx, timeout)."""


@dataclass
class Stream:
    """An open byte stream of one file, starting at ``offset``."""

    offset: int
    chunks: AsyncGenerator[bytes, None]


@dataclass(frozen=True)
class Listing:
    """A source's files, the revision it resolved (commit sha for hubs, else ``None``), the source's identity.

    ``identity`` (:mod:`kthena_py.sourceid`) is what the manager's revalidation compares with the source later;
    ``None`` for sources that are not remote (local, ``pvc://``) or whose adapter cannot tell.
    """

    files: tuple[RemoteFile, ...]
    revision: str | None = None
    identity: SourceIdentity | None = None


class Source(Protocol):
    """A source adapter."""

    async def list(self) -> Listing:
        """List the files (one metadata pass)."""
        ...

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """Stream ``file`` from ``offset`` (or from 0, see :class:`Stream`)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class Body(Protocol):
    """An open, blocking byte stream of one file, starting at ``offset`` (used from one worker thread)."""

    offset: int

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` (fully, unless the file ends first); the byte count, 0 at the end.

        Raises:
            TransientError: The connection failed or timed out.
        """
        ...

    def abort(self) -> None:
        """Make a ``readinto`` blocked in another thread return soon (the run is being cancelled)."""
        ...

    def close(self) -> None:
        """Release the connection or file."""
        ...


@runtime_checkable
class BlockingSource(Protocol):
    """A source that can also hand out blocking bodies (called in a worker thread)."""

    def open_blocking(self, file: RemoteFile, offset: int) -> Body:
        """Open ``file`` from ``offset`` (or from 0, see :class:`Body`), blocking."""
        ...


def body_stream(body: Body, block: int) -> Stream:
    """``body`` as an asynchronous :class:`Stream` (each read in a worker thread), for :meth:`Source.open`."""

    async def chunks() -> AsyncGenerator[bytes, None]:
        try:
            while True:
                buffer = bytearray(block)
                count = await asyncio.to_thread(body.readinto, memoryview(buffer))
                if not count:
                    return
                yield bytes(buffer[:count]) if count < block else bytes(buffer)
        finally:
            body.close()

    return Stream(body.offset, chunks())
