"""The output directory's bookkeeping on disk: lock, marker, journal and what files are there.

Guarantees:

* :class:`DirLock` holds an exclusive ``flock`` on ``<out>/.lock`` for the run; a second process on the same
  directory waits for it (and then finds the marker). The lock file is never deleted (deleting a flock file
  lets two processes hold "the" lock);
* :func:`write_atomic` writes to a temporary name, fsyncs, renames over the target and fsyncs the directory:
  a reader sees the old content or the new, never a torn one. The marker and the journal use it;
* the journal ``<out>/.kthena-state.json`` records, per file, the remote identity of a started partial and
  the size and digest of a verified file, so a later run resumes or skips with no network request.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Mapping

from .marker import MARKER_NAME, STATE_NAME, Marker, decode
from .plan import LOCK_NAME, PARTIAL_SUFFIX, JournalEntry, LocalFacts


class DirLock:
    """The directory's exclusive lock; :meth:`acquire` blocks (call it from a worker thread)."""

    def __init__(self, out: str) -> None:
        self._path = os.path.join(out, LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Wait for and take the lock."""
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def try_lock(out: str) -> bool:
    """Whether the lock is free right now (for tests and diagnostics)."""
    fd = os.open(os.path.join(out, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (see the module docstring)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kthena-tmp-")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the marker from serving pods running as other users
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def read_marker(out: str) -> Marker | None:
    """The directory's completion marker, or ``None``."""
    try:
        with open(os.path.join(out, MARKER_NAME), encoding="utf-8") as handle:
            return decode(handle.read())
    except OSError:
        return None


def remove_marker(out: str) -> None:
    """Remove the marker (before anything in the directory changes)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(out, MARKER_NAME))
        _fsync_dir(out)


def marker_files_present(out: str, marker: Marker) -> bool:
    """Whether every file the marker lists is there with its recorded size (``stat`` only)."""
    for entry in marker.files:
        try:
            if os.stat(os.path.join(out, entry.name)).st_size != entry.size:
                return False
        except OSError:
            return False
    return True


def read_journal(out: str) -> dict[str, JournalEntry]:
    """The journal's entries by file name (empty when absent or unreadable)."""
    try:
        with open(os.path.join(out, STATE_NAME), encoding="utf-8") as handle:
            doc = json.load(handle)
        return {
            name: JournalEntry(name, str(e["identity"]), bool(e["complete"]), e.get("size"), e.get("sha256"))
            for name, e in doc["files"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def write_journal(out: str, entries: Mapping[str, JournalEntry]) -> None:
    """Replace the journal atomically."""
    doc = {
        "files": {
            e.name: {"identity": e.identity, "complete": e.complete, "size": e.size, "sha256": e.sha256}
            for e in sorted(entries.values(), key=lambda e: e.name)
        }
    }
    write_atomic(os.path.join(out, STATE_NAME), json.dumps(doc, indent=1, sort_keys=True))


def local_facts(out: str, names: list[str]) -> dict[str, LocalFacts]:
    """Sizes of each name's final file and partial."""

    def size(path: str) -> int | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size if not os.path.isdir(path) else None

    return {
        name: LocalFacts(size(os.path.join(out, name)), size(os.path.join(out, name + PARTIAL_SUFFIX)))
        for name in names
    }
