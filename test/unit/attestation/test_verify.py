"""verify: the verdict table (signatures, keys, expiry, payload type, digests) and messages without payloads."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.attestation import make_statement, verify
from kthena_py.attestation.intoto import STATEMENT_V01
from kthena_py.testing.attestation import FILES, SHA_A, SHA_B, envelope, keypair, text, trusted
from kthena_py.vocab.conditions import (
    REASON_ATTESTATION_VERIFIED,
    REASON_DIGEST_MISMATCH,
    REASON_INVALID_ENVELOPE,
    REASON_KEY_EXPIRED,
    REASON_SIGNATURE_INVALID,
    REASON_UNTRUSTED_KEY,
)

ED, P256, OTHER = keypair("ed25519"), keypair("p256"), keypair("ed25519")
NOW = 1_800_000_000.0
KEYS = trusted(("release", ED), ("ci", P256), ("retired", OTHER, NOW - 1))


def _tamper(document: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    return {**document, "payload": base64.b64encode(make_statement(files)).decode()}


def _urlsafe(document: dict[str, Any]) -> dict[str, Any]:
    payload = base64.b64decode(document["payload"])
    sigs = [
        {**s, "sig": base64.urlsafe_b64encode(base64.b64decode(s["sig"])).decode().rstrip("=")}
        for s in document["signatures"]
    ]
    return {**document, "payload": base64.urlsafe_b64encode(payload).decode().rstrip("="), "signatures": sigs}


def _no_keyid(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "signatures": [{"sig": s["sig"]} for s in document["signatures"]]}


def _v01(pair: Any) -> dict[str, Any]:
    statement = json.loads(make_statement(FILES))
    statement["_type"] = STATEMENT_V01
    return envelope(pair, payload=json.dumps(statement).encode())


CASES: list[tuple[str, dict[str, Any] | str, str, str | None]] = [
    ("good ed25519", envelope(ED), REASON_ATTESTATION_VERIFIED, "release"),
    ("good p256", envelope(P256, keyid="ci"), REASON_ATTESTATION_VERIFIED, "ci"),
    ("url-safe base64", _urlsafe(envelope(ED)), REASON_ATTESTATION_VERIFIED, "release"),
    ("no keyid, a trusted key verifies", _no_keyid(envelope(P256)), REASON_ATTESTATION_VERIFIED, "ci"),
    ("statement v0.1", _v01(ED), REASON_ATTESTATION_VERIFIED, "release"),
    (
        "a second signature counts when the first does not",
        {**envelope(ED), "signatures": envelope(OTHER, keyid="nobody")["signatures"] + envelope(ED)["signatures"]},
        REASON_ATTESTATION_VERIFIED,
        "release",
    ),
    ("tampered payload", _tamper(envelope(ED), {**FILES, "extra.bin": "c" * 64}), REASON_SIGNATURE_INVALID, None),
    ("wrong key under a trusted id", envelope(OTHER, keyid="release"), REASON_SIGNATURE_INVALID, None),
    ("no keyid, no trusted key verifies", _no_keyid(envelope(keypair())), REASON_SIGNATURE_INVALID, None),
    ("unknown key id", envelope(ED, keyid="stranger"), REASON_UNTRUSTED_KEY, None),
    ("expired key", envelope(OTHER, keyid="retired"), REASON_KEY_EXPIRED, None),
    ("wrong digest", envelope(ED, files={**FILES, "model.safetensors": "c" * 64}), REASON_DIGEST_MISMATCH, "release"),
    ("a file in no subject", envelope(ED, files={"config.json": SHA_B}), REASON_DIGEST_MISMATCH, "release"),
    ("wrong payload type", envelope(ED, payload_type="text/plain"), REASON_INVALID_ENVELOPE, None),
    ("signed but not a statement", envelope(ED, payload=b'{"_type": "other"}'), REASON_INVALID_ENVELOPE, "release"),
    ("no signatures", {**envelope(ED), "signatures": []}, REASON_INVALID_ENVELOPE, None),
    ("malformed base64", {**envelope(ED), "payload": "!!"}, REASON_INVALID_ENVELOPE, None),
    ("malformed JSON", "{not json", REASON_INVALID_ENVELOPE, None),
]


@pytest.mark.parametrize(("document", "reason", "key_id"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verdicts(document: dict[str, Any] | str, reason: str, key_id: str | None) -> None:
    verdict = verify(document if isinstance(document, str) else text(document), KEYS, FILES, None, NOW)
    assert (verdict.ok, verdict.reason, verdict.key_id) == (reason == REASON_ATTESTATION_VERIFIED, reason, key_id)
    assert "eyJ" not in verdict.message  # never the payload (base64 of '{"')


def test_the_mismatch_message_names_the_key_the_file_and_both_digests() -> None:
    verdict = verify(text(envelope(ED, files={**FILES, "model.safetensors": "c" * 64})), KEYS, FILES, None, NOW)
    assert "release" in verdict.message and "model.safetensors" in verdict.message
    assert SHA_A in verdict.message and "c" * 64 in verdict.message


def test_the_expiry_is_judged_at_now() -> None:
    document = text(envelope(OTHER, keyid="retired"))
    assert verify(document, KEYS, FILES, None, NOW - 2).ok
    assert verify(document, KEYS, FILES, None, NOW).reason == REASON_KEY_EXPIRED


def test_no_trusted_key_at_all_is_untrusted() -> None:
    verdict = verify(text(envelope(ED)), trusted(), FILES, None, NOW)
    assert verdict.reason == REASON_UNTRUSTED_KEY and "no trusted keys" in verdict.message


@pytest.mark.parametrize(
    ("subjects", "staged", "one_file", "ok"),
    [
        ({"model.gguf": SHA_A}, {"model.gguf": SHA_A}, SHA_A, True),
        ({"other-name.gguf": SHA_A}, {"model.gguf": SHA_A}, SHA_A, True),  # by digest when no subject names it
        ({"model.gguf": SHA_B}, {"model.gguf": SHA_A}, SHA_A, False),
        ({"model.gguf": SHA_B}, {}, SHA_A, False),
        ({"./sub/a.bin": SHA_A, "b.bin": SHA_B}, {"sub/a.bin": SHA_A, "b.bin": SHA_B}, None, True),
        ({"sub/a.bin": SHA_B, "x": SHA_A}, {"sub/a.bin": SHA_A}, None, False),  # a named subject wins
        ({"a": SHA_A}, {}, None, False),  # nothing staged to compare with
    ],
)
def test_the_digest_rule(subjects: dict[str, str], staged: dict[str, str], one_file: str | None, ok: bool) -> None:
    verdict = verify(text(envelope(ED, files=subjects)), KEYS, staged, one_file, NOW)
    assert verdict.ok is ok and verdict.reason == (REASON_ATTESTATION_VERIFIED if ok else REASON_DIGEST_MISMATCH)


SIGNED = envelope(ED)


@given(st.data())
def test_changing_any_byte_of_the_signed_payload_is_never_verified(data: st.DataObject) -> None:
    payload = bytearray(base64.b64decode(SIGNED["payload"]))
    index = data.draw(st.integers(0, len(payload) - 1), label="index")
    payload[index] ^= data.draw(st.integers(1, 255), label="xor")
    document = {**SIGNED, "payload": base64.b64encode(bytes(payload)).decode()}
    verdict = verify(text(document), KEYS, FILES, None, NOW)
    assert not verdict.ok and verdict.reason == REASON_SIGNATURE_INVALID


@given(st.sampled_from(["payloadType", "payload", "sig"]), st.data())
def test_a_change_to_the_type_the_payload_or_the_signature_is_refused(field: str, data: st.DataObject) -> None:
    if field == "payloadType":
        document = {**SIGNED, "payloadType": SIGNED["payloadType"] + data.draw(st.text(min_size=1, max_size=5))}
        expected = REASON_INVALID_ENVELOPE  # refused before any signature is looked at
    elif field == "payload":
        document = {**SIGNED, "payload": base64.b64encode(make_statement({**FILES, "x": SHA_A})).decode()}
        expected = REASON_SIGNATURE_INVALID
    else:
        sig = bytearray(base64.b64decode(SIGNED["signatures"][0]["sig"]))
        sig[data.draw(st.integers(0, len(sig) - 1))] ^= 1
        document = {**SIGNED, "signatures": [{"keyid": "release", "sig": base64.b64encode(bytes(sig)).decode()}]}
        expected = REASON_SIGNATURE_INVALID
    assert verify(text(document), KEYS, FILES, None, NOW).reason == expected
