"""Keys and envelopes for attestation tests (unit and cluster): generated in the test, never stored.

:func:`keypair` makes an Ed25519 / ECDSA key pair as PEM texts; :func:`trusted` a trusted key set of them;
:func:`envelope` a DSSE envelope (JSON data) over an in-toto Statement of files, signed by a pair.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from kthena_py.attestation import (
    PAYLOAD_TYPE,
    TrustedKey,
    TrustedKeys,
    load_public_key,
    load_signer,
    make_statement,
    sign_envelope,
)

SHA_A = "a" * 64
SHA_B = "b" * 64
FILES = {"model.safetensors": SHA_A, "config.json": SHA_B}


@dataclass(frozen=True)
class KeyPair:
    """A private key and its public key, PEM."""

    private_pem: str
    public_pem: str


def keypair(kind: str = "ed25519") -> KeyPair:
    """A new key pair: ``ed25519``, ``p256``, ``p384`` or ``p521`` (unsupported by the verifier)."""
    private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    if kind == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    elif kind == "p256":
        private = ec.generate_private_key(ec.SECP256R1())
    elif kind == "p384":
        private = ec.generate_private_key(ec.SECP384R1())
    elif kind == "p521":
        private = ec.generate_private_key(ec.SECP521R1())
    else:
        raise ValueError(kind)
    return KeyPair(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode(),
    )


def trusted(*entries: tuple[str, KeyPair] | tuple[str, KeyPair, float]) -> TrustedKeys:
    """Trusted keys ``(keyid, pair)`` or ``(keyid, pair, notAfter)``."""
    keys = {}
    for entry in entries:
        keyid, pair = entry[0], entry[1]
        not_after = entry[2] if len(entry) == 3 else None
        keys[keyid] = TrustedKey(keyid, load_public_key(pair.public_pem, keyid), not_after)
    return TrustedKeys(keys)


def envelope(
    pair: KeyPair,
    keyid: str = "release",
    files: dict[str, str] | None = None,
    payload_type: str = PAYLOAD_TYPE,
    payload: bytes | None = None,
) -> dict[str, Any]:
    """An envelope signed by ``pair`` under ``keyid`` over a Statement of ``files`` (or over ``payload``)."""
    signer, _ = load_signer(pair.private_pem)
    body = payload if payload is not None else make_statement(FILES if files is None else files)
    return sign_envelope(payload_type, body, [(keyid, signer)])


def text(document: dict[str, Any]) -> str:
    """The envelope as JSON text."""
    return json.dumps(document)
