"""Early writeback: start writing a partial's new bytes to disk while the download goes on.

A verified file is ``fsync``-ed before it is renamed into place (the marker must never name bytes that a
crash could lose). Left alone, the kernel keeps a fresh download's pages dirty in memory until that fsync,
which then writes the whole file while the run waits. Asking for writeback of each written range as it
grows overlaps the disk with the network, and the final fsync finds little left to do.

Guarantees:

* nothing is loaded at import: the system call is looked up (``ctypes``, in the process's own symbols) the first
  time a file needs it, on the background thread, so the downloader's start-up does not wait for it;
* :func:`start_writeback` never fails: on Linux it is ``sync_file_range(fd, offset, length,
  SYNC_FILE_RANGE_WRITE)``, elsewhere (or when the call is refused, e.g. by a filesystem without it) it does
  nothing. Durability does not depend on it: it only moves disk work earlier;
* the call can still block on a busy device queue, so :class:`Flusher` makes it on one background thread
  shared by all files, never on the thread that reads the network; :meth:`Flusher.drain` waits for the
  requests of one file, and the writer calls it before it fsyncs or closes the descriptor (so no request ever
  names a closed or reused descriptor).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

SYNC_FILE_RANGE_WRITE = 2
# Written bytes between two writeback requests of one file.
STEP = 32 * 1024 * 1024

_Call = Callable[[int, int, int, int], int]


@functools.cache
def _sync_file_range() -> _Call | None:
    """The C library's ``sync_file_range`` (looked up once), or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        # The C library is already loaded into the interpreter: look the symbol up there (no library search).
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    call: _Call = function
    return call


def available() -> bool:
    """Whether early writeback is done on this system (else :func:`start_writeback` is a no-op)."""
    return _sync_file_range() is not None


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from ``offset`` to disk; do not wait."""
    call = _sync_file_range()
    if call is not None and length > 0:
        call(fd, offset, length, SYNC_FILE_RANGE_WRITE)


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _shared_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kthena-writeback")
        return _executor


class Flusher:
    """Early writeback of one file's descriptor, requested every :data:`STEP` bytes (see the module docstring)."""

    def __init__(self, fd: int, offset: int) -> None:
        self._fd = fd
        self._requested = offset
        self._pending: list[Future[None]] = []

    def wrote(self, size: int) -> None:
        """The file now holds ``size`` bytes: request writeback of the new range once it is a step long."""
        if size - self._requested < STEP:
            return
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(
            _shared_executor().submit(start_writeback, self._fd, self._requested, size - self._requested)
        )
        self._requested = size

    def restart(self) -> None:
        """The file was truncated to 0."""
        self.drain()
        self._requested = 0

    def drain(self) -> None:
        """Wait until no request for this descriptor is queued or running."""
        for future in self._pending:
            future.result()
        self._pending = []
