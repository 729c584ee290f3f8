"""DSSE: the PAE encoding (spec vectors), envelope parsing (both base64 alphabets, malformed input), signing."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.attestation import EnvelopeError, decode_base64, pae, parse_envelope


@pytest.mark.parametrize(
    ("payload_type", "payload", "expected"),
    [
        # The DSSE protocol document's example.
        ("http://example.com/HelloWorld", b"hello world", b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"),
        ("", b"", b"DSSEv1 0  0 "),
        ("application/vnd.in-toto+json", b"{}", b"DSSEv1 28 application/vnd.in-toto+json 2 {}"),
        # Lengths count bytes, not characters.
        ("t\u00e9", b"\x00\xff", b"DSSEv1 3 t\xc3\xa9 2 \x00\xff"),
        ("x", b"a b 1 c", b"DSSEv1 1 x 7 a b 1 c"),
    ],
)
def test_pae_vectors(payload_type: str, payload: bytes, expected: bytes) -> None:
    assert pae(payload_type, payload) == expected


@given(st.text(max_size=40), st.binary(max_size=200), st.text(max_size=40), st.binary(max_size=200))
def test_pae_is_injective(type_a: str, body_a: bytes, type_b: str, body_b: bytes) -> None:
    if (type_a, body_a) != (type_b, body_b):
        assert pae(type_a, body_a) != pae(type_b, body_b)


@given(st.binary(max_size=300))
def test_both_base64_alphabets_with_or_without_padding_decode(data: bytes) -> None:
    standard = base64.b64encode(data).decode()
    urlsafe = base64.urlsafe_b64encode(data).decode()
    for form in (standard, urlsafe, standard.rstrip("="), urlsafe.rstrip("=")):
        assert decode_base64(form) == data


def _doc(**fields: object) -> str:
    base: dict[str, object] = {
        "payloadType": "application/vnd.in-toto+json",
        "payload": base64.b64encode(b'{"x": 1}').decode(),
        "signatures": [{"keyid": "k", "sig": base64.b64encode(b"sig").decode()}],
    }
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_a_well_formed_envelope_parses() -> None:
    envelope = parse_envelope(_doc(signatures=[{"keyid": "k", "sig": "c2ln"}, {"sig": "c2ln"}]))
    assert envelope.payload == b'{"x": 1}' and envelope.payload_type == "application/vnd.in-toto+json"
    assert [(s.keyid, s.sig) for s in envelope.signatures] == [("k", b"sig"), ("", b"sig")]


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (_doc(payloadType=None), "payloadType"),
        (_doc(payloadType=3), "payloadType"),
        (_doc(payload=None), "payload is missing"),
        (_doc(payload="***"), "payload is not base64"),
        (_doc(signatures=None), "signatures is missing"),
        (_doc(signatures=[]), "no signature"),
        (_doc(signatures=["x"]), "signatures[0] is not an object"),
        (_doc(signatures=[{"keyid": "k"}]), "signatures[0].sig"),
        (_doc(signatures=[{"keyid": 7, "sig": "c2ln"}]), "keyid"),
        (_doc(signatures=[{"keyid": "k", "sig": "%%%"}]), "not base64"),
    ],
)
def test_malformed_envelopes_are_refused_with_a_short_reason(document: str, words: str) -> None:
    with pytest.raises(EnvelopeError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_envelope(document)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_envelope_error(data: bytes) -> None:
    try:
        parse_envelope(data)
    except EnvelopeError:
        pass
