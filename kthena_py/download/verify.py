"""Streaming sha256: hash the bytes as they are written, and re-hash a partial's prefix to resume.

Guarantees: a file's digest is computed from exactly the bytes written to its partial, in order, once; a
resumed file's digest covers the re-hashed prefix then the new bytes, so it equals the digest of the whole
file. ``hashlib`` and ``os.write`` release the GIL on large buffers, so :meth:`PartialWriter.write` and
:meth:`PartialWriter.write_batch` are meant to run in a worker thread. As the partial grows, its new ranges are
handed to the early writeback of :mod:`.writeback`, so :meth:`PartialWriter.finish` (which fsyncs) finds little
left to write.

Direct I/O (:meth:`PartialWriter.use_direct_io`, for a caller whose buffer is page-aligned): each write whose file
offset and length are multiples of :data:`DIRECT_ALIGN` goes to the disk with ``O_DIRECT``, from the caller's
buffer, skipping the page cache; any other write (a file's last block, a resume from an odd offset, a short
write) goes through the page cache as usual. On this kind of machine, copying a download into fresh page-cache
pages cost more CPU than hashing it (measured: about 2 of 6.5 CPU-seconds for 2 GiB), and the pages had to be
written back before the fsync anyway. A filesystem or file that refuses ``O_DIRECT`` (``EINVAL``, e.g. tmpfs)
makes the writer fall back to the page cache for the rest of the file; the bytes written, the digest and the
fsync before :meth:`PartialWriter.finish` returns are the same either way.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os

from .writeback import Flusher

READ_CHUNK = 4 * 1024 * 1024
_IOV_GROUP = 512  # below every platform's IOV_MAX
# Offsets and lengths of direct writes are multiples of this (the page size: every block device's logical
# block size divides it).
DIRECT_ALIGN = 4096
_O_DIRECT: int = getattr(os, "O_DIRECT", 0)


def direct_eligible(offset: int, length: int, align: int = DIRECT_ALIGN) -> bool:
    """Whether a write of ``length`` bytes at ``offset`` may bypass the page cache (both aligned, not empty)."""
    return length > 0 and offset % align == 0 and length % align == 0


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
        self._direct_wanted = False
        self._direct_on = False

    def use_direct_io(self) -> None:
        """Write aligned blocks with ``O_DIRECT`` from now on (the caller's buffers start on a page boundary)."""
        self._direct_wanted = _O_DIRECT != 0

    def _set_direct(self, on: bool) -> None:
        if on == self._direct_on:
            return
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, (flags | _O_DIRECT) if on else (flags & ~_O_DIRECT))
        self._direct_on = on

    def _give_up_direct(self) -> None:
        self._direct_wanted = False
        self._set_direct(False)

    def _write_all(self, data: memoryview) -> None:
        if self._direct_wanted:
            try:
                self._set_direct(direct_eligible(self.size, len(data)))
            except OSError:  # the file refuses O_DIRECT: the page cache from now on
                self._give_up_direct()
        view = data
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError as exc:
                if exc.errno != errno.EINVAL or not self._direct_on:
                    raise
                self._give_up_direct()  # refused before any byte was written: write it buffered
                continue
            view = view[written:]
            if view and self._direct_on:
                self._set_direct(False)  # a short direct write: the rest is unaligned

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
        self._write_all(data)
        self.size += len(data)
        self._flusher.wrote(self.size)

    def write_batch(self, chunks: list[bytes]) -> None:
        """Hash and append ``chunks`` in order."""
        for chunk in chunks:
            self._hash.update(chunk)
        if self._direct_on:
            self._set_direct(False)
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
