"""Parse a ``--source`` string into what kind of source it is (pure).

Kthena's prefixes keep their meaning: ``s3://`` and ``obs://`` (S3-compatible), ``pvc://claim/path`` (the path
is ``/`` + the rest, normalised, and must be a directory), ``ms://`` (ModelScope) and, for anything else,
Hugging Face. We narrow the last rule: ``hf://org/repo`` and a bare ``org/repo`` (or a legacy single name) are
Hugging Face; ``http(s)://`` is one file over HTTP; an absolute path is a local file or directory; any other
string is an unsupported source, reported as such rather than sent to the hub.
"""

from __future__ import annotations

import enum
import posixpath
import re
from dataclasses import dataclass

from ..result import DownloadError, Reason


class Kind(enum.StrEnum):
    """The kinds of sources."""

    HF = "hf"
    S3 = "s3"
    HTTP = "http"
    LOCAL = "local"
    MODELSCOPE = "ms"


@dataclass(frozen=True)
class SourceSpec:
    """A parsed source.

    ``location`` is: the repo id (hf, ms), the bucket (s3), the URL (http) or the absolute path (local);
    ``prefix`` is the key prefix for s3. ``pvc`` marks a local path that came from ``pvc://`` (a directory).
    """

    kind: Kind
    location: str
    prefix: str = ""
    scheme: str = ""
    pvc: bool = False


_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


def parse_source(source: str) -> SourceSpec:
    """Parse ``source``.

    Raises:
        DownloadError: ``UnsupportedSource`` for an unknown scheme or form, ``InvalidArguments`` for a known
            scheme with an unusable rest.
    """
    text = source.strip()
    if not text:
        raise DownloadError(Reason.INVALID_ARGUMENTS, "--source is empty")
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower() if sep else ""
    if scheme in ("s3", "obs"):
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise DownloadError(
                Reason.INVALID_ARGUMENTS, f"{scheme}:// source needs a bucket: {scheme}://BUCKET/PREFIX"
            )
        return SourceSpec(Kind.S3, bucket, prefix=prefix, scheme=scheme)
    if scheme in ("http", "https"):
        return SourceSpec(Kind.HTTP, text, scheme=scheme)
    if scheme == "pvc":
        if not rest.strip("/"):
            raise DownloadError(Reason.INVALID_ARGUMENTS, "pvc:// source needs a path: pvc://CLAIM/PATH")
        return SourceSpec(Kind.LOCAL, posixpath.normpath("/" + rest.lstrip("/")), scheme=scheme, pvc=True)
    if scheme in ("hf", "ms"):
        repo = rest.strip("/")
        if not _REPO_ID.match(repo):
            raise DownloadError(Reason.INVALID_ARGUMENTS, f"{scheme}:// source needs a repo id: {scheme}://ORG/REPO")
        return SourceSpec(Kind.HF if scheme == "hf" else Kind.MODELSCOPE, repo, scheme=scheme)
    if sep:
        raise DownloadError(
            Reason.UNSUPPORTED_SOURCE,
            f"unsupported source scheme {scheme}://: use hf://, s3://, obs://, http(s)://, pvc://, ms://, "
            "an absolute path or ORG/REPO",
        )
    if text.startswith("/"):
        return SourceSpec(Kind.LOCAL, posixpath.normpath(text))
    if _REPO_ID.match(text):
        return SourceSpec(Kind.HF, text)
    raise DownloadError(
        Reason.UNSUPPORTED_SOURCE,
        "unsupported source: not a URL, an absolute path or a Hugging Face ORG/REPO",
    )
