"""The completion marker ``<out>/.kthena-complete``: a manifest of a verified download (pure encode/decode).

Guarantees:

* the marker names the source sanitized (no credentials), the revision asked for and the one resolved, the
  request that produced it (file selection, expected digests), every file with size and sha256, and the
  source's identity when known (``sourceIdentity``, optional: markers without it stay readable);
* :func:`satisfies` says whether a marker answers a request: same sanitized source, same requested revision,
  same selection and same expected digests. The caller then only checks that the files still have their sizes
  (a ``stat``, no network);
* :func:`decode` returns ``None`` for anything unreadable, so a damaged marker means "not complete", never a
  crash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.sourceid import SourceIdentity

from .result import FileEntry

MARKER_NAME = ".kthena-complete"
STATE_NAME = ".kthena-state.json"
VERSION = 1


@dataclass(frozen=True)
class RequestKey:
    """What a request asks for, as far as the marker is concerned."""

    source: str
    revision: str | None
    files: tuple[str, ...]
    sha256: str | None
    file_sha256: tuple[tuple[str, str], ...]

    @staticmethod
    def of(
        source: str, revision: str | None, files: tuple[str, ...], sha256: str | None, file_sha256: Mapping[str, str]
    ) -> RequestKey:
        """Build a key, normalising the order of the selection and the digests."""
        return RequestKey(source, revision, tuple(sorted(set(files))), sha256, tuple(sorted(file_sha256.items())))


@dataclass(frozen=True)
class Marker:
    """A completion manifest."""

    request: RequestKey
    resolved_revision: str | None
    files: tuple[FileEntry, ...]
    completed_at: str
    identity: SourceIdentity | None = None
    """The identity of the staged source content (reported again by a run that finds the marker)."""

    @property
    def total_size(self) -> int:
        """The sum of the file sizes."""
        return sum(f.size for f in self.files)


def encode(marker: Marker) -> str:
    """The marker as JSON text."""
    doc: dict[str, Any] = {
        "version": VERSION,
        "source": marker.request.source,
        "revision": {"requested": marker.request.revision, "resolved": marker.resolved_revision},
        "request": {
            "files": list(marker.request.files),
            "sha256": marker.request.sha256,
            "fileSha256": dict(marker.request.file_sha256),
        },
        "files": [f.to_json() for f in marker.files],
        "totalSize": marker.total_size,
        "completedAt": marker.completed_at,
    }
    if marker.identity is not None:
        doc["sourceIdentity"] = marker.identity.to_json()
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def decode(text: str) -> Marker | None:
    """The marker in ``text``, or ``None`` when it is not a marker of this version."""
    try:
        doc = json.loads(text)
        if doc.get("version") != VERSION:
            return None
        request = doc["request"]
        key = RequestKey.of(
            str(doc["source"]),
            doc["revision"]["requested"],
            tuple(str(n) for n in request["files"]),
            request["sha256"],
            {str(k): str(v) for k, v in request["fileSha256"].items()},
        )
        files = tuple(FileEntry(str(f["name"]), int(f["size"]), str(f["sha256"])) for f in doc["files"])
        identity = SourceIdentity.from_json(doc.get("sourceIdentity"))
        return Marker(key, doc["revision"]["resolved"], files, str(doc["completedAt"]), identity)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def satisfies(marker: Marker, request: RequestKey) -> bool:
    """Whether ``marker`` records a completed download of exactly ``request``."""
    return marker.request == request
