"""Which local program stands in for a container (pure).

A container has no image to run here: :class:`CommandMapper` maps its ``command`` + ``args`` to an argv by the
program's base name (``kthena-py`` -> this interpreter's ``-m kthena_py``; ``python``/``python3`` -> this
interpreter, so the project's packages are importable; ``sh`` -> ``/bin/sh``). A container without ``command``
uses its image's entrypoint, which the mapper knows only from ``images`` (image name, tag and digest stripped ->
argv prefix). Anything else is unmappable: :meth:`CommandMapper.argv` returns None and the pod waits with
``ErrImagePull``. Any object with the same ``argv`` method can replace the mapper (:class:`ContainerRunner`).
"""

from __future__ import annotations

import posixpath
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["DEFAULT_PROGRAMS", "CommandMapper", "ContainerRunner", "LocalCommand", "image_name"]

DEFAULT_PROGRAMS: Mapping[str, Sequence[str]] = {
    "kthena-py": (sys.executable, "-m", "kthena_py"),
    "python": (sys.executable,),
    "python3": (sys.executable,),
    "sh": ("/bin/sh",),
}
"""The programs a container may name (by base name), and the argv prefix each becomes."""


@dataclass(frozen=True)
class LocalCommand:
    """The local process for a container.

    Attributes:
        program: The host program and its own leading arguments (host paths: never rewritten).
        args: The container's arguments (its command after the program, then its ``args``): ``$(VAR)`` is expanded
            and mounted paths are rewritten in these only.
    """

    program: tuple[str, ...]
    args: tuple[str, ...]


class ContainerRunner(Protocol):
    """Maps a container to a local process."""

    def argv(self, container: Mapping[str, Any]) -> LocalCommand | None:
        """The command for ``container``, or None if it cannot run here."""
        ...


def image_name(image: str) -> str:
    """An image reference without its tag and digest (``reg:5000/a/b:1@sha256:..`` -> ``reg:5000/a/b``).

    Args:
        image: The reference.

    Returns:
        The repository part.
    """
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


class CommandMapper:
    """The default :class:`ContainerRunner`.

    Args:
        programs: Program base name -> argv prefix (default :data:`DEFAULT_PROGRAMS`).
        images: Image repository (no tag) -> the entrypoint argv used when a container has no ``command``.
    """

    def __init__(
        self, programs: Mapping[str, Sequence[str]] | None = None, images: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.programs = dict(DEFAULT_PROGRAMS if programs is None else programs)
        self.images = {image_name(k): list(v) for k, v in (images or {}).items()}

    def argv(self, container: Mapping[str, Any]) -> LocalCommand | None:
        """Map ``container`` to a local command.

        Args:
            container: The container spec.

        Returns:
            The command, or None when neither its command's program nor its image is known.
        """
        command = [str(c) for c in container.get("command") or []]
        args = [str(a) for a in container.get("args") or []]
        if not command:
            entry = self.images.get(image_name(str(container.get("image") or "")))
            if entry is None:
                return None
            command = list(entry)
        program = self.programs.get(posixpath.basename(command[0]))
        if program is None:
            return None
        return LocalCommand(tuple(program), (*command[1:], *args))
