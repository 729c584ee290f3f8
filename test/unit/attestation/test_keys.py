"""Trusted keys: a key directory's files (PEMs, an index with notAfter), refusals with the file and key id."""

from __future__ import annotations

import json

import pytest

from kthena_py.attestation import KeyLoadError, key_id_of, load_public_key, load_signer, trusted_keys_from_files
from kthena_py.testing.attestation import keypair
from kthena_py.vocab.times import parse_time

ED, P256, P384 = keypair("ed25519"), keypair("p256"), keypair("p384")


def test_pem_files_and_an_index_make_one_key_set() -> None:
    index = [
        {"keyid": "ci", "publicKey": P256.public_pem, "notAfter": "2027-01-01T00:00:00Z"},
        {"keyid": "old", "publicKey": P384.public_pem},
    ]
    keys = trusted_keys_from_files(
        {"release.pem": ED.public_pem, "keys.json": json.dumps(index), "..data": "skipped", "README": "skipped"}
    )
    assert [k.keyid for k in keys] == ["ci", "old", "release"]
    ci = keys.get("ci")
    assert ci is not None and ci.not_after == parse_time("2027-01-01T00:00:00Z")
    assert ci.expired(ci.not_after + 1) and not ci.expired(ci.not_after)
    assert keys.get("release") is not None and keys.get("release").not_after is None  # type: ignore[union-attr]


def test_a_yaml_index_with_an_unquoted_timestamp_and_a_keys_wrapper() -> None:
    pem = "\n".join("      " + line for line in ED.public_pem.splitlines())
    text = f"keys:\n  - keyid: a\n    notAfter: 2030-05-01T12:00:00Z\n    publicKey: |\n{pem}\n"
    keys = trusted_keys_from_files({"keys.yaml": text})
    key = keys.get("a")
    assert key is not None and key.not_after == parse_time("2030-05-01T12:00:00Z")


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({}, "no trusted key found"),
        ({"x.pem": "not a key"}, "x.pem: not a PEM public key"),
        ({"x.pem": ED.private_pem}, "x.pem: not a PEM public key"),
        ({"x.pem": keypair("p521").public_pem}, "x.pem: unsupported key type secp521r1"),
        ({"keys.json": "{"}, "keys.json: not valid JSON"),
        ({"keys.yaml": "a: b"}, "keys.yaml: expected a list"),
        ({"keys.json": json.dumps([{"publicKey": ED.public_pem}])}, r"keys.json\[0\]: keyid is missing"),
        ({"keys.json": json.dumps([{"keyid": "k"}])}, r"keyid k\): publicKey \(PEM\) is missing"),
        (
            {"keys.json": json.dumps([{"keyid": "k", "publicKey": ED.public_pem, "notAfter": "tomorrow"}])},
            "keyid k.*notAfter 'tomorrow' is not an RFC 3339",
        ),
        (
            {"k.pem": ED.public_pem, "keys.json": json.dumps([{"keyid": "k", "publicKey": P256.public_pem}])},
            "key id 'k' is defined twice",
        ),
    ],
)
def test_unusable_keys_refuse_the_whole_set(files: dict[str, str], words: str) -> None:
    with pytest.raises(KeyLoadError, match=words):
        trusted_keys_from_files(files)


@pytest.mark.parametrize("pair", [ED, P256, P384], ids=["ed25519", "p256", "p384"])
def test_a_signer_and_its_public_key_agree(pair: object) -> None:
    from kthena_py.testing.attestation import KeyPair

    assert isinstance(pair, KeyPair)
    sign, public = load_signer(pair.private_pem)
    trusted = trusted_keys_from_files({"k.pem": pair.public_pem}).get("k")
    assert trusted is not None
    signature = sign(b"message")
    assert trusted.verifies(b"message", signature)
    assert not trusted.verifies(b"messagE", signature)
    assert not trusted.verifies(b"message", signature[:-1] + bytes([signature[-1] ^ 1]))
    assert key_id_of(public) == key_id_of(load_public_key(pair.public_pem, "k"))


def test_a_raw_r_s_ecdsa_signature_is_accepted() -> None:
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    sign, _ = load_signer(P256.private_pem)
    r, s = decode_dss_signature(sign(b"m"))
    raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    trusted = trusted_keys_from_files({"k.pem": P256.public_pem}).get("k")
    assert trusted is not None and trusted.verifies(b"m", raw) and not trusted.verifies(b"n", raw)


def test_a_private_key_that_cannot_sign_is_refused() -> None:
    with pytest.raises(KeyLoadError, match="not an unencrypted PEM private key"):
        load_signer(ED.public_pem)
    with pytest.raises(KeyLoadError, match="unsupported key type secp521r1"):
        load_signer(keypair("p521").private_pem)
