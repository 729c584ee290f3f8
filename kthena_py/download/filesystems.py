"""Which filesystem a download writes to, and whether its large files may bypass the page cache.

Direct I/O (``O_DIRECT``) saves the CPU of copying every byte into page-cache pages, which on a local disk costs
more than hashing them. On a network or clustered filesystem (NFS, CephFS, Lustre, GlusterFS, a FUSE mount: the
usual backing of a ``ReadWriteMany`` model cache) a direct write is synchronous with the server and can be much
slower than a buffered one, so the default policy (``auto``) allows it only on local block filesystems.

Guarantees:

* :func:`parse_mountinfo`, :func:`filesystem_of` and :func:`direct_io_allowed` are pure (the mount table and the
  path are passed in); an unreadable line is skipped, never raised;
* :func:`output_filesystem` reads ``/proc/self/mountinfo`` once and answers ``None`` when it cannot be read (not
  Linux, no procfs): ``auto`` then means buffered writes, the safe choice;
* the policy changes only how bytes reach the disk: the bytes, the digest and the fsync before a file's rename
  are the same whatever it decides.
"""

from __future__ import annotations

import os
from typing import Literal

__all__ = [
    "DIRECT_IO_MODES",
    "LOCAL_BLOCK_FILESYSTEMS",
    "DirectIO",
    "direct_io_allowed",
    "filesystem_of",
    "output_filesystem",
    "parse_mountinfo",
]

DirectIO = Literal["auto", "on", "off"]
DIRECT_IO_MODES: tuple[DirectIO, ...] = ("auto", "on", "off")
LOCAL_BLOCK_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs"})
"""Filesystems on a local block device, where a direct write goes straight to the disk's queue."""
MOUNTINFO = "/proc/self/mountinfo"


def _unescape(field: str) -> str:
    # The kernel writes space, tab, newline and backslash in mount points as octal escapes (\040 ...).
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """``(mount point, filesystem type)`` of every line of a ``/proc/<pid>/mountinfo`` text, in order."""
    mounts: list[tuple[str, str]] = []
    for line in text.splitlines():
        fields = line.split(" ")
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if sep < 5 or sep + 1 >= len(fields):
            continue
        mounts.append((_unescape(fields[4]), fields[sep + 1]))
    return mounts


def _contains(mount_point: str, path: str) -> bool:
    if mount_point == "/":
        return path.startswith("/")
    return path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def filesystem_of(path: str, mounts: list[tuple[str, str]]) -> str | None:
    """The type of the filesystem holding the absolute, resolved ``path``: the deepest mount containing it.

    Of two mounts on one point, the later (the one on top) wins.
    """
    best: tuple[int, str] | None = None
    for mount_point, fstype in mounts:
        if _contains(mount_point, path) and (best is None or len(mount_point) >= best[0]):
            best = (len(mount_point), fstype)
    return None if best is None else best[1]


def direct_io_allowed(mode: DirectIO, fstype: str | None) -> bool:
    """Whether large files are written with direct I/O.

    ``on``: always (where the file accepts it); ``off``: never; ``auto``: only on :data:`LOCAL_BLOCK_FILESYSTEMS`.
    """
    if mode == "on":
        return True
    if mode == "off":
        return False
    return fstype in LOCAL_BLOCK_FILESYSTEMS


def output_filesystem(path: str) -> str | None:
    """The filesystem type of the directory ``path`` (or its nearest existing parent); ``None`` if unknown."""
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as f:
            mounts = parse_mountinfo(f.read())
    except OSError:
        return None
    return filesystem_of(os.path.realpath(path), mounts)
