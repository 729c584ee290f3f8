"""Where a container's paths live on the host: the mount table and the one rewrite the harness does.

A mini-kubelet container is a local process, so it sees the host's file system, not its pod's volumes. Instead of
a mount namespace, each volumeMount becomes a :class:`Mount` (the container path and the host directory standing in
for it) and :meth:`MountTable.map_value` rewrites strings that name a mounted path:

* a value equal to a mount path, or starting with it followed by ``/``, is rewritten to the host path (longest
  mount path first, so ``/data/models`` wins over ``/data``); other values are returned unchanged;
* an ``--option=value`` or ``NAME=value`` argument has its value part rewritten the same way.

Paths inside other strings (a ``python -c`` script, a shell command line, ``:``-separated lists) are not rewritten:
pass them as separate arguments or environment variables. ``readOnly`` is recorded, never enforced.

Everything here is pure (no I/O).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mount", "MountTable", "host_path_for"]


@dataclass(frozen=True)
class Mount:
    """One container path backed by a host path.

    Attributes:
        path: The absolute path the container asks for (a volumeMount's ``mountPath``, normalised).
        host: The host file or directory standing in for it.
        read_only: The mount's ``readOnly`` (informational: not enforced).
    """

    path: str
    host: Path
    read_only: bool = False


def host_path_for(root: Path, path: str) -> Path:
    """The host directory standing in for an absolute node path (a ``hostPath`` or a PV's path) under ``root``.

    Args:
        root: The harness's root directory for node paths.
        path: The node path (``..`` components cannot climb out of ``root``).

    Returns:
        ``root`` joined with the normalised path.
    """
    normal = posixpath.normpath("/" + path).lstrip("/")
    return root / normal if normal else root


class MountTable:
    """The mounts of one container, and the rewrite of values that name their paths.

    Args:
        mounts: The mounts; a later mount at the same path replaces an earlier one.
    """

    def __init__(self, mounts: Iterable[Mount] = ()) -> None:
        by_path: dict[str, Mount] = {}
        for mount in mounts:
            path = posixpath.normpath(mount.path)
            by_path[path] = Mount(path, mount.host, mount.read_only)
        # Longest path first: the most specific mount wins.
        self.mounts: tuple[Mount, ...] = tuple(sorted(by_path.values(), key=lambda m: (-len(m.path), m.path)))

    def map_path(self, value: str) -> str | None:
        """Rewrite one path.

        Args:
            value: A string that may be a container path.

        Returns:
            The host path, or None when ``value`` is not under any mount.
        """
        if not value.startswith("/"):
            return None
        for mount in self.mounts:
            if value == mount.path:
                return str(mount.host)
            prefix = mount.path if mount.path.endswith("/") else mount.path + "/"
            if value.startswith(prefix):
                return str(mount.host / value[len(prefix) :])
        return None

    def map_value(self, value: str) -> str:
        """Rewrite a value (an argument or an environment variable) that names a mounted path.

        Args:
            value: The value.

        Returns:
            The rewritten value, or ``value`` itself when it names no mounted path.
        """
        mapped = self.map_path(value)
        if mapped is not None:
            return mapped
        key, sep, rest = value.partition("=")
        if sep and key and "/" not in key:
            mapped = self.map_path(rest)
            if mapped is not None:
                return f"{key}={mapped}"
        return value
