"""``--remove``: deciding whether a directory may be deleted (pure) and deleting it.

Guarantees:

* ``/`` is never removed, not even with ``--force``; neither is a path that is not absolute after resolution;
* without ``--force``, a directory is removed only when it looks like a download directory: it holds our
  completion marker, our state file, our lock or a ``*.partial`` file at its top level;
* a missing directory is success (cleanup is idempotent); a directory that is a mount point keeps existing
  (its contents are removed, the directory itself stays);
* symbolic links inside are removed, never followed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from .marker import MARKER_NAME, STATE_NAME
from .plan import LOCK_NAME, PARTIAL_SUFFIX
from .result import DownloadError, Reason


def refusal(path: str, top_level_names: Iterable[str], *, force: bool) -> str | None:
    """``None`` when ``path`` (resolved, absolute) may be removed, else why not."""
    if not path.startswith("/"):
        return f"refusing to remove {path!r}: not an absolute path"
    if path.rstrip("/") == "":
        return "refusing to remove /"
    if force:
        return None
    ours = {MARKER_NAME, STATE_NAME, LOCK_NAME}
    if any(name in ours or name.endswith(PARTIAL_SUFFIX) for name in top_level_names):
        return None
    return (
        f"refusing to remove {path}: it holds no download marker, state, lock or partial file "
        "(use --force to remove it anyway)"
    )


def remove_download_dir(path: str, *, force: bool) -> str:
    """Remove the download directory ``path``; returns what was done.

    Raises:
        DownloadError: ``RemoveRefused`` (see :func:`refusal`) or ``StorageUnavailable`` on an I/O error.
    """
    target = Path(os.path.abspath(os.path.expanduser(path)))
    if not target.exists() and not target.is_symlink():
        return f"{target} does not exist: nothing to remove"
    if target.is_symlink() or not target.is_dir():
        raise DownloadError(Reason.REMOVE_REFUSED, f"refusing to remove {target}: not a directory")
    resolved = str(target.resolve())
    reason = refusal(resolved, os.listdir(target), force=force)
    if reason:
        raise DownloadError(Reason.REMOVE_REFUSED, reason)
    try:
        for entry in os.scandir(target):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        if os.path.ismount(target):
            return f"emptied {target} (a mount point: the directory itself stays)"
        target.rmdir()
    except OSError as exc:
        raise DownloadError(Reason.STORAGE_UNAVAILABLE, f"cannot remove {target}: {exc.strerror}") from None
    return f"removed {target}"
