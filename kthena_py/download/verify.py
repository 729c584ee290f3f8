"""Streaming sha256: hash the bytes as they are written, and re-hash a partial's prefix to resume.

Guarantees: a file's digest is computed from exactly the bytes written to its partial, in order, once; a
resumed file's digest covers the re-hashed prefix then the new bytes, so it equals the digest of the whole
file. ``hashlib`` and ``os.write`` release the GIL on large buffers, so :meth:`PartialWriter.write` and
:meth:`PartialWriter.write_batch` are meant to run in a worker thread. As the partial grows, its new ranges are
handed to the early writeback of :mod:`.writeback`, so :meth:`PartialWriter.finish` (which fsyncs) finds little
left to write.
"""

from __future__ import annotations

import hashlib
import os

from .writeback import Flusher

READ_CHUNK = 4 * 1024 * 1024
_IOV_GROUP = 512  # below every platform's IOV_MAX


class PartialWriter:
    """Appends to ``NAME.partial`` and keeps the running sha256 of the whole file.

    The file is unbuffered: one system call per batch, and no copy of the bytes.
    """

    def __init__(self, path: str, offset: int) -> None:
        """Open ``path`` and hash its first ``offset`` bytes (the prefix of an earlier run); drop the rest."""
        self.path = path
        self._hash = hashlib.sha256()
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | (0 if offset else os.O_TRUNC)
        self._fd = os.open(path, flags, 0o644)
        self._closed = False
        if offset:
            remaining = offset
            while remaining:
                block = os.read(self._fd, min(READ_CHUNK, remaining))
                if not block:
                    os.close(self._fd)
                    raise OSError(f"partial {path} is shorter than {offset} bytes")
                self._hash.update(block)
                remaining -= len(block)
            os.ftruncate(self._fd, offset)
        os.lseek(self._fd, offset, os.SEEK_SET)
        self.size = offset
        self._flusher = Flusher(self._fd, offset)

    def restart(self) -> None:
        """Start over from byte 0 (the source could not serve a range)."""
        self._flusher.restart()
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, data: memoryview) -> None:
        """Hash and append ``data`` (a view of the caller's buffer, which it may reuse once this returns)."""
        self._hash.update(data)
        view = data
        while view:
            view = view[os.write(self._fd, view) :]
        self.size += len(data)
        self._flusher.wrote(self.size)

    def write_batch(self, chunks: list[bytes]) -> None:
        """Hash and append ``chunks`` in order."""
        for chunk in chunks:
            self._hash.update(chunk)
        for i in range(0, len(chunks), _IOV_GROUP):
            group = chunks[i : i + _IOV_GROUP]
            total = sum(len(c) for c in group)
            written = os.writev(self._fd, group)
            if written < total:  # a short write: finish it plainly
                view = memoryview(b"".join(group))[written:]
                while view:
                    view = view[os.write(self._fd, view) :]
            self.size += total
        self._flusher.wrote(self.size)

    def finish(self) -> str:
        """Flush to disk, close, and return the hex digest."""
        self._flusher.drain()
        os.fsync(self._fd)
        self.close()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Close without syncing (the partial stays for a later resume)."""
        if not self._closed:
            self._closed = True
            self._flusher.drain()
            os.close(self._fd)


def hash_file(path: str) -> tuple[str, int]:
    """The sha256 and size of a local file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(READ_CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size
