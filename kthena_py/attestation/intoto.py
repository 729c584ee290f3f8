"""in-toto Statements: the payload of an attestation envelope (pure).

A Statement is JSON ``{"_type": ..., "subject": [{"name": str, "digest": {"sha256": hex}}], "predicateType": ...,
"predicate": ...}``. Guarantees:

* :func:`parse_statement` accepts only the envelope payload type :data:`PAYLOAD_TYPE` and the statement types
  :data:`STATEMENT_V1` and :data:`STATEMENT_V01`; it keeps the subjects that carry a sha256 digest (lower-cased,
  64 hex digits), and raises :class:`~.dsse.EnvelopeError` when none does or the document is malformed.
* :func:`make_statement` renders a v1 Statement over files (sorted by name) with a stable key order, so the
  same files give the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .dsse import EnvelopeError

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_V01",
    "STATEMENT_V1",
    "Statement",
    "Subject",
    "make_statement",
    "parse_statement",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""The DSSE payload type of an in-toto Statement."""
STATEMENT_V1 = "https://in-toto.io/Statement/v1"
STATEMENT_V01 = "https://in-toto.io/Statement/v0.1"
PREDICATE_TYPE = "https://kthena-py.io/ModelCache/v1"
"""The predicate type ``kthena-py attest sign`` writes (the verifier reads only the subjects)."""

_SHA256 = re.compile(r"^[a-f0-9]{64}$")


@dataclass(frozen=True)
class Subject:
    """A statement's subject: a name (may be empty) and its sha256 digest (lower-case hex)."""

    name: str
    sha256: str


@dataclass(frozen=True)
class Statement:
    """A parsed statement: its type and the subjects that carry a sha256 digest."""

    type: str
    subjects: tuple[Subject, ...]


def _subject(index: int, entry: Any) -> Subject | None:
    if not isinstance(entry, dict):
        raise EnvelopeError(f"subject[{index}] is not an object")
    name = entry.get("name", "")
    if not isinstance(name, str):
        raise EnvelopeError(f"subject[{index}].name is not a string")
    digest = entry.get("digest")
    if not isinstance(digest, dict):
        raise EnvelopeError(f"subject[{index}].digest is not an object")
    value = digest.get("sha256")
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.match(value.lower()):
        raise EnvelopeError(f"subject[{index}].digest.sha256 is not 64 hex digits")
    return Subject(name, value.lower())


def parse_statement(payload_type: str, payload: bytes) -> Statement:
    """Parse the in-toto Statement an envelope carries (see the module docstring).

    Raises:
        EnvelopeError: Wrong payload type, not a Statement, or no sha256 subject.
    """
    if payload_type != PAYLOAD_TYPE:
        raise EnvelopeError(f"payloadType is {payload_type[:80]!r}, not {PAYLOAD_TYPE!r}")
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise EnvelopeError("the payload is not JSON") from None
    if not isinstance(data, dict):
        raise EnvelopeError("the payload is not a JSON object")
    kind = data.get("_type")
    if kind not in (STATEMENT_V1, STATEMENT_V01):
        raise EnvelopeError(f"_type is not {STATEMENT_V1!r} or {STATEMENT_V01!r}")
    entries = data.get("subject")
    if not isinstance(entries, list) or not entries:
        raise EnvelopeError("the statement has no subject list")
    subjects = tuple(s for s in (_subject(i, e) for i, e in enumerate(entries)) if s is not None)
    if not subjects:
        raise EnvelopeError("no subject carries a sha256 digest")
    return Statement(str(kind), subjects)


def make_statement(files: Mapping[str, str], predicate: Mapping[str, Any] | None = None) -> bytes:
    """A v1 Statement whose subjects are ``files`` (name -> sha256), as compact JSON bytes."""
    document = {
        "_type": STATEMENT_V1,
        "subject": [{"name": name, "digest": {"sha256": files[name].lower()}} for name in sorted(files)],
        "predicateType": PREDICATE_TYPE,
        "predicate": dict(predicate or {}),
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=False).encode("utf-8")
