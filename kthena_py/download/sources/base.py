"""What every source adapter provides: a listing and a byte stream from an offset.

Guarantees asked of an adapter:

* :meth:`Source.list` makes the only metadata requests; it returns every file with a stable ``identity``
  (ETag, commit + blob id, size + mtime), so a partial is resumed only against the same remote version;
* :meth:`Source.open` streams one file from ``offset``. If the source cannot serve a range it starts from 0 and
  says so in :attr:`Stream.offset`; the caller then restarts the hash. It raises
  :class:`~kthena_py.download.result.DownloadError` with ``SourceNotFound``/``AccessDenied`` for answers a retry
  cannot fix and :class:`TransientError` for those it may.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

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
    """A source's files, and the revision it resolved (commit sha for hubs, else ``None``)."""

    files: tuple[RemoteFile, ...]
    revision: str | None = None


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
