"""Early writeback: start writing a partial's new bytes to disk while the download goes on.

A verified file is ``fsync``-ed before it is renamed into place (the marker must never name bytes that a
crash could lose). Left alone, the kernel keeps a fresh download's pages dirty in memory until that fsync,
which then writes the whole file while the run waits. Asking for writeback of each written range as it
grows overlaps the disk with the network, and the final fsync finds little left to do.

Guarantees: :func:`start_writeback` never waits for the disk and never fails: on Linux it is
``sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)``, elsewhere (or when the call is refused, e.g.
by a filesystem without it) it does nothing. Durability does not depend on it: it only moves disk work earlier.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

SYNC_FILE_RANGE_WRITE = 2

_Call = Callable[[int, int, int, int], int]


def _load() -> _Call | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    call: _Call = function
    return call


_SYNC_FILE_RANGE = _load()


def available() -> bool:
    """Whether early writeback is done on this system (else :func:`start_writeback` is a no-op)."""
    return _SYNC_FILE_RANGE is not None


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from ``offset`` to disk; do not wait."""
    if _SYNC_FILE_RANGE is not None and length > 0:
        _SYNC_FILE_RANGE(fd, offset, length, SYNC_FILE_RANGE_WRITE)
