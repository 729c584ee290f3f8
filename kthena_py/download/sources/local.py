"""``pvc://CLAIM/PATH`` and absolute paths: copy local files, hashing while copying.

Guarantees: ``pvc://`` keeps Kthena's rule (the path is ``/`` + the rest and must be an existing directory,
where the claim is mounted); an absolute path may be a file or a directory. Directories are walked without
following symbolic links to directories; our own bookkeeping files (marker, state, lock, partials) in a source
directory are not copied. A file's identity is its size and modification time, so a partial copy resumes
only if the source file did not change. Files are read by the transfer's worker threads straight into their
buffers (a :class:`~.base.BlockingSource`).
"""

from __future__ import annotations

import asyncio
import io
import os

from ..plan import RemoteFile, is_safe_name
from ..result import DownloadError, Reason
from .base import Listing, Stream, body_stream

BLOCK = 4 * 1024 * 1024


def _entry(root: str, path: str) -> RemoteFile:
    st = os.stat(path)
    name = os.path.relpath(path, root).replace(os.sep, "/")
    return RemoteFile(name, st.st_size, None, f"stat:{st.st_size}:{st.st_mtime_ns}", path)


def walk(path: str, *, directory_required: bool) -> list[RemoteFile]:
    """The files under ``path`` (or ``path`` itself when it is a file)."""
    if not os.path.exists(path):
        hint = (
            " (for pvc://, the claim must be mounted at /CLAIM and PATH be a directory in it)"
            if directory_required
            else ""
        )
        raise DownloadError(Reason.SOURCE_NOT_FOUND, f"{path}: no such file or directory{hint}")
    if os.path.isfile(path):
        if directory_required:
            raise DownloadError(
                Reason.INVALID_ARGUMENTS, f"{path}: a pvc:// source must be a directory (the model directory)"
            )
        return [_entry(os.path.dirname(path), path)]
    files: list[RemoteFile] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for filename in sorted(filenames):
            full = os.path.join(dirpath, filename)
            if not os.path.isfile(full):
                continue
            entry = _entry(path, full)
            if is_safe_name(entry.name):
                files.append(entry)
    return files


class FileBody:
    """A local file from ``offset`` (see :class:`~.base.Body`)."""

    def __init__(self, handle: io.FileIO, offset: int) -> None:
        self.offset = offset
        self._handle = handle

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` from the file; 0 at its end."""
        filled = 0
        while filled < len(buffer):
            count = self._handle.readinto(buffer[filled:])
            if not count:
                break
            filled += count
        return filled

    def abort(self) -> None:
        """Nothing to interrupt: a local read does not wait for a peer."""

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


class LocalSource:
    """Files on a mounted volume or local disk."""

    def __init__(self, path: str, *, pvc: bool, out: str) -> None:
        self._path = path
        self._pvc = pvc
        if os.path.realpath(path) == os.path.realpath(out):
            raise DownloadError(Reason.INVALID_ARGUMENTS, f"{path}: the source is the output directory")

    async def list(self) -> Listing:
        """Walk the path."""
        files = await asyncio.to_thread(walk, self._path, directory_required=self._pvc)
        return Listing(tuple(files))

    def open_blocking(self, file: RemoteFile, offset: int) -> FileBody:
        """Open the file at ``offset``."""
        try:
            handle = io.FileIO(file.locator, "r")
        except OSError as exc:
            raise DownloadError(Reason.SOURCE_NOT_FOUND, f"{file.locator}: {exc.strerror}") from None
        handle.seek(offset)
        return FileBody(handle, offset)

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """Read from ``offset``, as an asynchronous stream."""
        return body_stream(await asyncio.to_thread(self.open_blocking, file, offset), BLOCK)

    async def close(self) -> None:
        """Nothing to release."""
