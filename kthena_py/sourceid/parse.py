"""Source identities from metadata answers: an HTTP HEAD, a hub revision, an S3 HeadObject or listing (pure).

Guarantees (each function takes decoded data, never raises on a malformed answer, and gives ``None`` when the
answer identifies nothing):

* :func:`from_http_headers`: ``ETag``, ``Content-Length`` (digits only), ``Last-Modified``; header names in any
  case;
* :func:`from_hub_revision`: the hub's ``GET /api/models/REPO/revision/REV?blobs=true`` answer: the commit
  (``sha``) is the ETag, the length is the sum of the files' sizes (an LFS file counts its LFS size) when every
  file has one;
* :func:`from_s3_head`: HeadObject's ``ETag``, ``ContentLength``, ``LastModified`` (a datetime is written as
  UTC ``YYYY-MM-DDTHH:MM:SSZ``, so the downloader and the manager spell it alike);
* :func:`from_s3_listing`: the objects under a prefix (``Key``, ``ETag``, ``Size``; "directory" keys ending in
  ``/`` skipped, as the downloader skips them): the ETag is ``sha256:`` + :func:`listing_digest` of the sorted
  ``(key, etag, size)`` triples and the length their sum, so any added, removed, renamed or changed object
  changes it and the listing's order never does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .identity import SourceIdentity

__all__ = ["from_http_headers", "from_hub_revision", "from_s3_head", "from_s3_listing", "listing_digest"]


def _none_if_empty(identity: SourceIdentity) -> SourceIdentity | None:
    return None if identity.empty else identity


def _size(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def from_http_headers(headers: Mapping[str, str]) -> SourceIdentity | None:
    """The identity in a HEAD answer's headers."""
    lowered = {str(k).lower(): v for k, v in headers.items()}
    etag = lowered.get("etag")
    modified = lowered.get("last-modified")
    return _none_if_empty(
        SourceIdentity(
            etag=etag if isinstance(etag, str) else None,
            content_length=_size(lowered.get("content-length")),
            last_modified=modified if isinstance(modified, str) else None,
        )
    )


def _sibling_size(sibling: Any) -> int | None:
    if not isinstance(sibling, Mapping):
        return None
    lfs = sibling.get("lfs")
    if isinstance(lfs, Mapping) and lfs:
        return _size(lfs.get("size"))
    return _size(sibling.get("size"))


def from_hub_revision(data: Any) -> SourceIdentity | None:
    """The identity in a hub revision answer (its decoded JSON)."""
    if not isinstance(data, Mapping):
        return None
    sha = data.get("sha")
    siblings = data.get("siblings")
    total: int | None = None
    if isinstance(siblings, list):
        sizes = [_sibling_size(s) for s in siblings]
        if all(s is not None for s in sizes):
            total = sum(s for s in sizes if s is not None)
    return _none_if_empty(SourceIdentity(etag=sha if isinstance(sha, str) else None, content_length=total))


def _modified(value: Any) -> str | None:
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value if isinstance(value, str) and value else None


def from_s3_head(head: Mapping[str, Any]) -> SourceIdentity | None:
    """The identity in a HeadObject answer."""
    etag = head.get("ETag")
    return _none_if_empty(
        SourceIdentity(
            etag=etag if isinstance(etag, str) else None,
            content_length=_size(head.get("ContentLength")),
            last_modified=_modified(head.get("LastModified")),
        )
    )


def listing_digest(entries: Iterable[tuple[str, str, int]]) -> str:
    """The sha256 (hex) of the sorted ``(key, etag, size)`` triples."""
    digest = hashlib.sha256()
    for key, etag, size in sorted(entries):
        digest.update(f"{len(key)}:{key}\x00{len(etag)}:{etag}\x00{size}\n".encode())
    return digest.hexdigest()


def from_s3_listing(objects: Iterable[Mapping[str, Any]]) -> SourceIdentity | None:
    """The identity of the objects under a prefix (ListObjectsV2 ``Contents`` entries, all pages)."""
    entries: list[tuple[str, str, int]] = []
    for obj in objects:
        key, etag, size = obj.get("Key"), obj.get("ETag"), _size(obj.get("Size"))
        if not isinstance(key, str) or key.endswith("/") or size is None:
            continue
        entries.append((key, etag if isinstance(etag, str) else "", size))
    if not entries:
        return None
    return SourceIdentity(etag=f"sha256:{listing_digest(entries)}", content_length=sum(e[2] for e in entries))
