"""``pvc://CLAIM/PATH`` and absolute paths: copy local files, hashing while copying.

Guarantees: ``pvc://`` keeps Kthena's rule (the path is ``/`` + the rest and must be an existing directory,
where the claim is mounted); an absolute path may be a file or a directory. Directories are walked without
following symbolic links to directories; our own bookkeeping files (marker, state, lock, partials) in a source
directory are not copied. A file's identity is its size and modification time, so a partial copy resumes
only if the source file did not change.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import BinaryIO

from ..plan import RemoteFile, is_safe_name
from ..result import DownloadError, Reason
from .base import Listing, Stream

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

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """Read from ``offset``."""
        try:
            handle = await asyncio.to_thread(open, file.locator, "rb")
        except OSError as exc:
            raise DownloadError(Reason.SOURCE_NOT_FOUND, f"{file.locator}: {exc.strerror}") from None
        handle.seek(offset)
        return Stream(offset, self._blocks(handle))

    async def _blocks(self, handle: BinaryIO) -> AsyncGenerator[bytes, None]:
        try:
            while block := await asyncio.to_thread(handle.read, BLOCK):
                yield block
        finally:
            handle.close()

    async def close(self) -> None:
        """Nothing to release."""
