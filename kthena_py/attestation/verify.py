"""Verify an attestation envelope against the trusted keys and the staged files' digests (pure).

:func:`verify` decides, in this order (the first failure is the verdict):

1. The document is a DSSE envelope (:data:`REASON_INVALID_ENVELOPE` otherwise).
2. Its payload type is in-toto's (:data:`REASON_INVALID_ENVELOPE`).
3. Some signature counts: its key id names a trusted key that is not expired at ``now`` and the key verifies
   it over the PAE; a signature without a key id counts when any unexpired trusted key verifies it. When none
   counts the reason is the strongest found: :data:`REASON_SIGNATURE_INVALID` (a trusted, unexpired key did
   not verify its signature: a tampered payload or the wrong key), then :data:`REASON_KEY_EXPIRED`, then
   :data:`REASON_UNTRUSTED_KEY` (unknown key ids, or no trusted key at all).
4. The payload is an in-toto Statement with sha256 subjects (:data:`REASON_INVALID_ENVELOPE`): it is parsed
   only once a trusted key signed it.
5. Digests (:data:`REASON_DIGEST_MISMATCH`): every staged file's sha256 is a subject's; a subject that names
   the file (``./`` prefixes ignored) must carry exactly its digest; a one-file model's digest must be a
   subject's. Nothing staged to compare with is a mismatch too (the caller asks only once files are staged).

Messages name the key id, the file and both digests, never the payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kthena_py.vocab.conditions import (
    REASON_ATTESTATION_VERIFIED,
    REASON_DIGEST_MISMATCH,
    REASON_INVALID_ENVELOPE,
    REASON_KEY_EXPIRED,
    REASON_SIGNATURE_INVALID,
    REASON_UNTRUSTED_KEY,
)

from .dsse import Envelope, EnvelopeError, pae, parse_envelope
from .intoto import PAYLOAD_TYPE, Statement, parse_statement
from .keys import TrustedKeys

__all__ = ["Verdict", "verify"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`verify`: ``reason`` is a condition reason; ``key_id`` is the key that signed it."""

    ok: bool
    reason: str
    message: str
    key_id: str | None = None


def _signer(envelope: Envelope, keys: TrustedKeys, now: float) -> tuple[str | None, Verdict | None]:
    message = pae(envelope.payload_type, envelope.payload)
    invalid: list[str] = []
    expired: list[str] = []
    unknown: list[str] = []
    for signature in envelope.signatures:
        if signature.keyid:
            key = keys.get(signature.keyid)
            if key is None:
                unknown.append(signature.keyid)
            elif key.expired(now):
                expired.append(signature.keyid)
            elif key.verifies(message, signature.sig):
                return key.keyid, None
            else:
                invalid.append(signature.keyid)
            continue
        live = [k for k in keys if not k.expired(now)]
        match = next((k for k in live if k.verifies(message, signature.sig)), None)
        if match is not None:
            return match.keyid, None
        if live:
            invalid.append("(no key id)")
        elif len(keys):
            expired.append("(no key id)")
        else:
            unknown.append("(no key id)")
    if invalid:
        return None, Verdict(
            False, REASON_SIGNATURE_INVALID, f"the signature by key {', '.join(invalid)} does not verify"
        )
    if expired:
        return None, Verdict(False, REASON_KEY_EXPIRED, f"trusted key {', '.join(expired)} is past its notAfter")
    if not len(keys):
        return None, Verdict(False, REASON_UNTRUSTED_KEY, "the manager has no trusted keys (--model-attestation-keys)")
    return None, Verdict(False, REASON_UNTRUSTED_KEY, f"no trusted key has the key id {', '.join(unknown)}")


def _normal(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name


def _digests(statement: Statement, files: Mapping[str, str], one_file: str | None, keyid: str) -> Verdict:
    digests = {s.sha256 for s in statement.subjects}
    named: dict[str, set[str]] = {}
    for subject in statement.subjects:
        if subject.name:
            named.setdefault(_normal(subject.name), set()).add(subject.sha256)
    if not files and one_file is None:
        return Verdict(False, REASON_DIGEST_MISMATCH, "no staged file digest to compare with", keyid)
    for name in sorted(files):
        actual = files[name].lower()
        expected = named.get(_normal(name))
        if expected is not None and actual not in expected:
            want = ", ".join(sorted(expected))
            return Verdict(
                False,
                REASON_DIGEST_MISMATCH,
                f"file {name}: staged sha256 {actual}, statement (key {keyid}) says {want}",
                keyid,
            )
        if expected is None and actual not in digests:
            return Verdict(
                False,
                REASON_DIGEST_MISMATCH,
                f"file {name}: staged sha256 {actual} is in no subject of the statement (key {keyid})",
                keyid,
            )
    if one_file is not None and one_file.lower() not in digests:
        return Verdict(
            False,
            REASON_DIGEST_MISMATCH,
            f"the model's sha256 {one_file.lower()} is in no subject of the statement (key {keyid})",
            keyid,
        )
    count = len(files) or 1
    return Verdict(
        True,
        REASON_ATTESTATION_VERIFIED,
        f"signed by key {keyid}: {count} staged file(s) match the statement's digests",
        keyid,
    )


def verify(
    envelope_text: str | bytes,
    keys: TrustedKeys,
    staged_files: Mapping[str, str],
    one_file_sha256: str | None,
    now: float,
) -> Verdict:
    """Verify an envelope (see the module docstring).

    Args:
        envelope_text: The DSSE envelope (JSON).
        keys: The trusted keys.
        staged_files: The staged files' sha256 digests by relative name.
        one_file_sha256: The digest of a one-file model (``status.sha256``), or ``None``.
        now: Epoch seconds (key expiry).
    """
    try:
        envelope = parse_envelope(envelope_text)
    except EnvelopeError as exc:
        return Verdict(False, REASON_INVALID_ENVELOPE, f"not a DSSE envelope: {exc}")
    if envelope.payload_type != PAYLOAD_TYPE:
        return Verdict(
            False,
            REASON_INVALID_ENVELOPE,
            f"payloadType is {envelope.payload_type[:80]!r}, not {PAYLOAD_TYPE!r}",
        )
    keyid, failure = _signer(envelope, keys, now)
    if failure is not None or keyid is None:
        assert failure is not None
        return failure
    try:
        statement = parse_statement(envelope.payload_type, envelope.payload)
    except EnvelopeError as exc:
        return Verdict(
            False, REASON_INVALID_ENVELOPE, f"signed by key {keyid} but not an in-toto Statement: {exc}", keyid
        )
    return _digests(statement, staged_files, one_file_sha256, keyid)
