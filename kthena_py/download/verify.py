"""Streaming sha256: hash the bytes as they are written, and re-hash a partial's prefix to resume.

Guarantees: a file's digest is computed from exactly the bytes written to its partial, in order, once; a
resumed file's digest covers the re-hashed prefix then the new bytes, so it equals the digest of the whole
file. ``hashlib`` releases the GIL on large buffers, so :meth:`PartialWriter.write` is meant to run in a
worker thread while the event loop reads the next chunk.
"""

from __future__ import annotations

import hashlib
import os
from typing import BinaryIO

READ_CHUNK = 4 * 1024 * 1024


class PartialWriter:
    """Appends to ``NAME.partial`` and keeps the running sha256 of the whole file."""

    def __init__(self, path: str, offset: int) -> None:
        """Open ``path`` and hash its first ``offset`` bytes (the prefix of an earlier run); drop the rest."""
        self.path = path
        self._hash = hashlib.sha256()
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._file: BinaryIO = open(path, "r+b" if offset and os.path.exists(path) else "wb")  # noqa: SIM115
        if offset:
            remaining = offset
            while remaining:
                block = self._file.read(min(READ_CHUNK, remaining))
                if not block:
                    raise OSError(f"partial {path} is shorter than {offset} bytes")
                self._hash.update(block)
                remaining -= len(block)
            self._file.truncate(offset)
        self.size = offset

    def restart(self) -> None:
        """Start over from byte 0 (the source could not serve a range)."""
        self._file.seek(0)
        self._file.truncate(0)
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes | bytearray | memoryview) -> None:
        """Hash and append ``chunk``."""
        self._hash.update(chunk)
        self._file.write(chunk)
        self.size += len(chunk)

    def finish(self) -> str:
        """Flush to disk, close, and return the hex digest."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return self._hash.hexdigest()

    def close(self) -> None:
        """Close without syncing (the partial stays for a later resume)."""
        if not self._file.closed:
            self._file.close()


def hash_file(path: str) -> tuple[str, int]:
    """The sha256 and size of a local file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(READ_CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size
