"""The outcome of a download: failure reasons, exit codes and the JSON result.

Guarantees:

* every failure carries one :class:`Reason`, and each reason has its own non-zero exit status (Kthena's
  downloader exits 1 on any error; ours does too for ``DownloadFailed``, the catch-all);
* :func:`render_result` gives the JSON the ModelCache controller reads from the pod's termination message:
  always at most :data:`RESULT_LIMIT` bytes (the kubelet's limit), dropping file entries from the end (and
  saying how many with ``filesOmitted``) and shortening the message when needed;
* model metadata (``gguf``, ``modelConfig``, or a short ``metadataError``: :attr:`Outcome.metadata`) is the
  first thing dropped when the result would not fit, before any file entry or the message;
* a successful result names the identity of the staged source content (``identity``: ``etag``,
  ``contentLength``, ``lastModified``, :mod:`kthena_py.sourceid`), bounded in size by that module;
* the result never holds a credential: the source is the sanitized one and the message is redacted by the
  caller.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from kthena_py.sourceid import SourceIdentity
from kthena_py.vocab import conditions

RESULT_LIMIT = 4096


class Reason(enum.StrEnum):
    """Why a download ended."""

    SUCCEEDED = "Succeeded"
    DOWNLOAD_FAILED = conditions.REASON_DOWNLOAD_FAILED
    INVALID_ARGUMENTS = "InvalidArguments"
    INTEGRITY_CHECK_FAILED = conditions.REASON_INTEGRITY_CHECK_FAILED
    UNSUPPORTED_SOURCE = "UnsupportedSource"
    SOURCE_NOT_FOUND = "SourceNotFound"
    ACCESS_DENIED = "AccessDenied"
    STORAGE_UNAVAILABLE = conditions.REASON_STORAGE_UNAVAILABLE
    REMOVE_REFUSED = "RemoveRefused"


EXIT_CODES: dict[Reason, int] = {
    Reason.SUCCEEDED: 0,
    Reason.DOWNLOAD_FAILED: 1,
    Reason.INVALID_ARGUMENTS: 2,
    Reason.INTEGRITY_CHECK_FAILED: 3,
    Reason.UNSUPPORTED_SOURCE: 4,
    Reason.SOURCE_NOT_FOUND: 5,
    Reason.ACCESS_DENIED: 6,
    Reason.STORAGE_UNAVAILABLE: 7,
    Reason.REMOVE_REFUSED: 8,
}


class DownloadError(Exception):
    """A failure with its reason; the message is for humans and must hold no credential."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class FileEntry:
    """One staged file: its path relative to the output directory, size and sha256."""

    name: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """The JSON form used by the marker and the result."""
        return {"name": self.name, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class Outcome:
    """What ``kthena-py download`` reports (the JSON result)."""

    reason: Reason
    message: str
    source: str
    path: str
    revision: str | None = None
    files: tuple[FileEntry, ...] = field(default_factory=tuple)
    cached: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    """Extra result keys describing the model (``gguf``, ``modelConfig``, ``metadataError``); dropped first."""
    identity: SourceIdentity | None = None
    """The identity of the source content staged (``identity`` in the JSON; absent for local sources)."""

    @property
    def succeeded(self) -> bool:
        """Whether the download succeeded."""
        return self.reason is Reason.SUCCEEDED

    @property
    def exit_code(self) -> int:
        """The process exit status for this outcome."""
        return EXIT_CODES[self.reason]


def _document(
    outcome: Outcome, files: tuple[FileEntry, ...], omitted: int, message: str, *, metadata: bool = False
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "phase": "Succeeded" if outcome.succeeded else "Failed",
        "reason": outcome.reason.value,
        "message": message,
        "source": outcome.source,
        "path": outcome.path,
        "revision": outcome.revision,
        "size": sum(f.size for f in outcome.files),
        "fileCount": len(outcome.files),
        "cached": outcome.cached,
        "files": [f.to_json() for f in files],
    }
    if omitted:
        doc["filesOmitted"] = omitted
    if metadata:
        doc.update(outcome.metadata)
    if outcome.identity is not None:
        doc["identity"] = outcome.identity.to_json()
    return doc


def _encode(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def render_result(outcome: Outcome, limit: int = RESULT_LIMIT) -> str:
    """The JSON result, at most ``limit`` bytes (UTF-8).

    The model metadata is dropped first; then files from the end until it fits (``filesOmitted`` says how many);
    then the message is cut. ``size`` and ``fileCount`` always describe every file.
    """
    message = outcome.message
    files = outcome.files
    if outcome.metadata:
        text = _encode(_document(outcome, files, 0, message, metadata=True))
        if len(text.encode()) <= limit:
            return text
    text = _encode(_document(outcome, files, 0, message))
    if len(text.encode()) <= limit:
        return text
    # Binary search the longest prefix of the file list that fits.
    lo, hi = 0, len(files)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        candidate = _encode(_document(outcome, files[:mid], len(files) - mid, message))
        if len(candidate.encode()) <= limit:
            lo = mid
        else:
            hi = mid - 1
    kept = files[:lo]
    text = _encode(_document(outcome, kept, len(files) - lo, message))
    while len(text.encode()) > limit and message:
        message = message[: max(0, len(message) - max(16, len(text.encode()) - limit))]
        text = _encode(_document(outcome, kept, len(files) - lo, message + "..."))
    return text
