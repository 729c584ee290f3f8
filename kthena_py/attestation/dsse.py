"""DSSE envelopes: parsing, the pre-authentication encoding (PAE), and signing (pure).

An envelope is JSON ``{"payloadType": str, "payload": base64, "signatures": [{"keyid": str, "sig": base64}]}``
(the Dead Simple Signing Envelope). Guarantees:

* :func:`parse_envelope` accepts standard and URL-safe base64, with or without padding, and raises
  :class:`EnvelopeError` with a short message (never the payload) for anything else: not JSON, not an object,
  a missing or mistyped field, undecodable base64, no signatures.
* :func:`pae` is exactly ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` with the lengths in ASCII
  decimal (byte lengths; the type is UTF-8): the bytes a signature covers, so a signature never covers the
  payload alone and the payload type cannot be swapped.
* :func:`sign_envelope` signs ``pae(type, payload)`` with each given signer and renders the envelope with
  standard base64 (the signers live in :mod:`.keys`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Envelope", "EnvelopeError", "Signature", "decode_base64", "pae", "parse_envelope", "sign_envelope"]


class EnvelopeError(ValueError):
    """The text is not a well-formed DSSE envelope (the message says which part)."""


@dataclass(frozen=True)
class Signature:
    """One signature of an envelope: the key id it names (``""`` when none) and the signature bytes."""

    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    """A parsed envelope: the payload type, the decoded payload, and the signatures."""

    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]


def decode_base64(text: str) -> bytes:
    """Decode standard or URL-safe base64, padding optional.

    Raises:
        ValueError: ``text`` is not base64.
    """
    cleaned = "".join(text.split())
    if "-" in cleaned or "_" in cleaned:
        cleaned = cleaned.replace("-", "+").replace("_", "/")
    cleaned += "=" * (-len(cleaned) % 4)
    try:
        return base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64") from exc


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE pre-authentication encoding of ``payload`` under ``payload_type``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _signature(index: int, entry: Any) -> Signature:
    if not isinstance(entry, dict):
        raise EnvelopeError(f"signatures[{index}] is not an object")
    keyid = entry.get("keyid", "")
    if keyid is None:
        keyid = ""
    if not isinstance(keyid, str):
        raise EnvelopeError(f"signatures[{index}].keyid is not a string")
    sig = entry.get("sig")
    if not isinstance(sig, str) or not sig:
        raise EnvelopeError(f"signatures[{index}].sig is missing or not a string")
    try:
        return Signature(keyid, decode_base64(sig))
    except ValueError:
        raise EnvelopeError(f"signatures[{index}].sig is not base64") from None


def parse_envelope(text: str | bytes) -> Envelope:
    """Parse a DSSE envelope (see the module docstring).

    Raises:
        EnvelopeError: It is not one.
    """
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise EnvelopeError("the document is not JSON") from None
    if not isinstance(data, dict):
        raise EnvelopeError("the document is not a JSON object")
    payload_type = data.get("payloadType")
    if not isinstance(payload_type, str) or not payload_type:
        raise EnvelopeError("payloadType is missing or not a string")
    payload_text = data.get("payload")
    if not isinstance(payload_text, str):
        raise EnvelopeError("payload is missing or not a string")
    try:
        payload = decode_base64(payload_text)
    except ValueError:
        raise EnvelopeError("payload is not base64") from None
    entries = data.get("signatures")
    if not isinstance(entries, list):
        raise EnvelopeError("signatures is missing or not a list")
    if not entries:
        raise EnvelopeError("the envelope carries no signature")
    return Envelope(payload_type, payload, tuple(_signature(i, e) for i, e in enumerate(entries)))


Signer = Callable[[bytes], bytes]
"""Signs a message (the PAE bytes) and returns the signature."""


def sign_envelope(payload_type: str, payload: bytes, signers: Sequence[tuple[str, Signer]]) -> dict[str, Any]:
    """An envelope (as JSON data) with one signature per ``(keyid, signer)`` over ``pae(payload_type, payload)``."""
    message = pae(payload_type, payload)
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": keyid, "sig": base64.b64encode(signer(message)).decode("ascii")} for keyid, signer in signers
        ],
    }
