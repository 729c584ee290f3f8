"""Which model sources are remote, and how to reach them (pure).

The same prefixes as the downloader's ``--source`` (:mod:`kthena_py.download.sources.spec`): ``http(s)://`` is one
file; ``hf://ORG/REPO`` and a bare ``ORG/REPO`` (or a single name) are Hugging Face; ``s3://`` and ``obs://``
are S3-compatible (bucket and key prefix); ``ms://`` is ModelScope. ``pvc://`` and absolute paths are not remote:
:func:`remote_source` returns ``None`` for them and for anything it cannot parse (such a source has nothing to
revalidate; the downloader reports what is wrong with it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["REMOTE_KINDS", "RemoteKind", "RemoteSource", "remote_source"]

RemoteKind = Literal["http", "hf", "s3", "ms"]
REMOTE_KINDS: tuple[RemoteKind, ...] = get_args(RemoteKind)
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class RemoteSource:
    """A remote source: its kind, the URL / repo id / bucket, and the key prefix (S3)."""

    kind: RemoteKind
    location: str
    prefix: str = ""
    scheme: str = ""


def remote_source(source: str) -> RemoteSource | None:
    """The remote source ``source`` names, or ``None`` (local, ``pvc://``, or not a source at all)."""
    text = source.strip()
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower() if sep else ""
    if scheme in ("http", "https"):
        return RemoteSource("http", text, scheme=scheme)
    if scheme in ("s3", "obs"):
        bucket, _, prefix = rest.partition("/")
        return RemoteSource("s3", bucket, prefix, scheme) if bucket else None
    if scheme in ("hf", "ms"):
        repo = rest.strip("/")
        return RemoteSource("hf" if scheme == "hf" else "ms", repo, scheme=scheme) if _REPO_ID.match(repo) else None
    if sep or text.startswith("/") or not _REPO_ID.match(text):
        return None
    return RemoteSource("hf", text)
