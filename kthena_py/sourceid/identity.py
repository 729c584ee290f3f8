"""A source's identity: ETag (or the commit / listing digest), content length, last modification (pure).

Guarantees:

* :class:`SourceIdentity` is immutable and bounded: an ETag longer than :data:`MAX_ETAG` characters is cut
  (with a hash of the whole), so a hostile header can never push the downloader's result past its size limit;
* :meth:`SourceIdentity.to_json` is compact (absent parts are left out) and :meth:`SourceIdentity.from_json`
  reads it back tolerantly (``None`` for anything that is not one, negative or non-integer lengths dropped);
* :func:`same_content`: two identities name the same content when their ETags are equal; when either has no
  ETag, when their lengths and last-modified times (each compared only where both have it) agree and at least
  one of them was compared. Two identities with nothing in common to compare are *not* known to be the same
  (``None``: the caller reports that it cannot tell);
* :func:`identity_token` is 8 hex digits that depend only on the identity (the ETag when present, else length
  and last modification): the name of a re-staged directory and of its Jobs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_ETAG", "SourceIdentity", "identity_token", "same_content"]

MAX_ETAG = 256
"""The longest ETag kept as is."""
_TOKEN = 8


def _bounded(etag: str | None) -> str | None:
    if etag is None:
        return None
    etag = etag.strip()
    if not etag:
        return None
    if len(etag) <= MAX_ETAG:
        return etag
    digest = hashlib.sha256(etag.encode()).hexdigest()[:16]
    return f"{etag[: MAX_ETAG - 17]}~{digest}"


@dataclass(frozen=True)
class SourceIdentity:
    """What identifies a source's content (any part may be unknown)."""

    etag: str | None = None
    content_length: int | None = None
    last_modified: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "etag", _bounded(self.etag))
        if self.content_length is not None and self.content_length < 0:
            object.__setattr__(self, "content_length", None)
        if self.last_modified is not None and not self.last_modified.strip():
            object.__setattr__(self, "last_modified", None)

    @property
    def empty(self) -> bool:
        """Whether nothing is known."""
        return self.etag is None and self.content_length is None and self.last_modified is None

    def to_json(self) -> dict[str, Any]:
        """The compact JSON form (``etag``, ``contentLength``, ``lastModified``; absent parts left out)."""
        out: dict[str, Any] = {}
        if self.etag is not None:
            out["etag"] = self.etag
        if self.content_length is not None:
            out["contentLength"] = self.content_length
        if self.last_modified is not None:
            out["lastModified"] = self.last_modified
        return out

    @staticmethod
    def from_json(raw: Any) -> SourceIdentity | None:
        """Read :meth:`to_json` back (``None`` when ``raw`` is not one, or names nothing)."""
        if not isinstance(raw, dict):
            return None
        etag = raw.get("etag")
        length = raw.get("contentLength", raw.get("content_length"))
        modified = raw.get("lastModified", raw.get("last_modified"))
        found = SourceIdentity(
            etag=etag if isinstance(etag, str) else None,
            content_length=length if isinstance(length, int) and not isinstance(length, bool) else None,
            last_modified=modified if isinstance(modified, str) else None,
        )
        return None if found.empty else found

    def describe(self) -> str:
        """A short human form, e.g. ``etag "abc", 1.2 MB (1234 bytes), modified Tue, ...``."""
        parts = []
        if self.etag is not None:
            parts.append(f"etag {self.etag}")
        if self.content_length is not None:
            parts.append(f"{self.content_length} bytes")
        if self.last_modified is not None:
            parts.append(f"modified {self.last_modified}")
        return ", ".join(parts) or "unknown"


def same_content(a: SourceIdentity, b: SourceIdentity) -> bool | None:
    """Whether ``a`` and ``b`` name the same content (``None``: nothing to compare; see the module docstring)."""
    if a.etag is not None and b.etag is not None:
        return a.etag == b.etag
    compared = False
    if a.content_length is not None and b.content_length is not None:
        if a.content_length != b.content_length:
            return False
        compared = True
    if a.last_modified is not None and b.last_modified is not None:
        if a.last_modified != b.last_modified:
            return False
        compared = True
    return True if compared else None


def identity_token(identity: SourceIdentity) -> str:
    """Eight hex digits standing for ``identity`` (see the module docstring)."""
    key = (
        f"etag:{identity.etag}" if identity.etag is not None else f"{identity.content_length}|{identity.last_modified}"
    )
    return hashlib.sha256(key.encode()).hexdigest()[:_TOKEN]
