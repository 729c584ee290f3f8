"""Trusted public keys and private signing keys (pure: texts in, key objects out).

Guarantees:

* A trusted key is an Ed25519, ECDSA P-256 or ECDSA P-384 public key in PEM, with a key id and an optional
  expiry (``notAfter``, RFC 3339). :func:`trusted_keys_from_files` builds a :class:`TrustedKeys` from the texts
  of a directory (a mounted Secret): every ``<keyid>.pem`` file is one key, and one index file ``keys.yaml``,
  ``keys.yml`` or ``keys.json`` lists ``{keyid, publicKey, notAfter}`` entries (a list, or ``{"keys": [...]}``).
  Files whose names start with a dot (a Secret volume's ``..data``) and other names are skipped. A key that does
  not parse, an unsupported algorithm, a bad ``notAfter``, a duplicate key id or no key at all raise
  :class:`KeyLoadError` naming the file and the key id: the manager refuses to start on it.
* :meth:`TrustedKey.verifies` checks a signature over a message: Ed25519, or ECDSA with SHA-256 (P-256) or
  SHA-384 (P-384) and a DER signature (a raw ``r || s`` of the curve's size is accepted too). It never raises.
* :func:`load_signer` turns a private key in PEM (PKCS#8 or the traditional formats, unencrypted) into a
  signing function with the same rules, for ``kthena-py attest sign`` and tests.
* ``cryptography`` is imported by the functions that need it, on their first call: a manager that reads no
  trusted key and verifies no signature never loads it (about 8 MiB of resident memory).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import yaml

from kthena_py.vocab.times import parse_time

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

__all__ = [
    "INDEX_FILES",
    "KeyLoadError",
    "PublicKey",
    "TrustedKey",
    "TrustedKeys",
    "key_id_of",
    "load_public_key",
    "load_signer",
    "public_pem",
    "trusted_keys_from_files",
]

PublicKey: TypeAlias = "ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey"

INDEX_FILES = ("keys.yaml", "keys.yml", "keys.json")
"""Names of the index file of a key directory."""

_CURVE_SIZES = {"secp256r1": 32, "secp384r1": 48}
"""The ECDSA curves a key may use, and the size of a signature's ``r`` and ``s`` on each."""


def _ecdsa(curve: str) -> ec.ECDSA:
    """ECDSA with the curve's digest: SHA-256 on P-256, SHA-384 on P-384."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.ECDSA(hashes.SHA256() if curve == "secp256r1" else hashes.SHA384())


class KeyLoadError(ValueError):
    """A key (file) cannot be used; the message names the file and key id."""


def _check_algorithm(key: object, where: str) -> PublicKey:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in _CURVE_SIZES:
        return key
    kind = key.curve.name if isinstance(key, ec.EllipticCurvePublicKey) else type(key).__name__
    raise KeyLoadError(f"{where}: unsupported key type {kind} (use Ed25519, ECDSA P-256 or P-384)")


def load_public_key(pem: str, where: str) -> PublicKey:
    """Parse a PEM public key (``where`` names it in errors).

    Raises:
        KeyLoadError: Not a PEM public key, or an unsupported algorithm.
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_public_key(pem.encode("utf-8"))
    except (ValueError, UnsupportedAlgorithm, TypeError) as exc:
        raise KeyLoadError(
            f"{where}: not a PEM public key ({str(exc).splitlines()[0] if str(exc) else 'invalid'})"
        ) from None
    return _check_algorithm(key, where)


def public_pem(key: PublicKey) -> str:
    """The key as a PEM SubjectPublicKeyInfo."""
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def key_id_of(key: PublicKey) -> str:
    """A default key id: ``sha256-`` and the first 16 hex digits of the digest of the DER public key."""
    from cryptography.hazmat.primitives import serialization

    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256-" + hashlib.sha256(der).hexdigest()[:16]


def _ecdsa_signatures(sig: bytes, size: int) -> list[bytes]:
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    candidates = [sig]
    if len(sig) == 2 * size:
        candidates.append(encode_dss_signature(int.from_bytes(sig[:size], "big"), int.from_bytes(sig[size:], "big")))
    return candidates


@dataclass(frozen=True)
class TrustedKey:
    """A public key the manager trusts.

    Attributes:
        keyid: The id signatures name it by.
        public_key: The key.
        not_after: Epoch seconds after which its signatures no longer count, or ``None``.
    """

    keyid: str
    public_key: PublicKey
    not_after: float | None = None

    def expired(self, now: float) -> bool:
        """Whether the key is past its ``notAfter`` at ``now``."""
        return self.not_after is not None and now > self.not_after

    def verifies(self, message: bytes, sig: bytes) -> bool:
        """Whether ``sig`` is this key's signature of ``message``."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric import ed25519

        key = self.public_key
        if isinstance(key, ed25519.Ed25519PublicKey):
            try:
                key.verify(sig, message)
                return True
            except InvalidSignature:
                return False
        for candidate in _ecdsa_signatures(sig, _CURVE_SIZES[key.curve.name]):
            try:
                key.verify(candidate, message, _ecdsa(key.curve.name))
                return True
            except (InvalidSignature, ValueError):
                continue
        return False


@dataclass(frozen=True)
class TrustedKeys:
    """The trusted key set, by key id."""

    by_id: Mapping[str, TrustedKey]

    def __iter__(self) -> Iterator[TrustedKey]:
        return iter(self.by_id[k] for k in sorted(self.by_id))

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, keyid: str) -> TrustedKey | None:
        """The key named ``keyid``, or ``None``."""
        return self.by_id.get(keyid)


def _not_after(value: Any, where: str) -> float | None:
    if value is None or value == "":
        return None
    if hasattr(value, "isoformat"):  # YAML reads an unquoted timestamp as a datetime
        value = value.isoformat()
    stamp = parse_time(value) if isinstance(value, str) else None
    if stamp is None:
        raise KeyLoadError(f"{where}: notAfter {str(value)[:40]!r} is not an RFC 3339 time with a zone")
    return stamp


def _index_entries(name: str, text: str) -> list[Any]:
    try:
        data = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        raise KeyLoadError(f"{name}: not valid {'JSON' if name.endswith('.json') else 'YAML'}") from None
    if isinstance(data, dict) and "keys" in data:
        data = data["keys"]
    if not isinstance(data, list):
        raise KeyLoadError(f"{name}: expected a list of {{keyid, publicKey, notAfter}} (or {{keys: [...]}})")
    return data


def trusted_keys_from_files(files: Mapping[str, str]) -> TrustedKeys:
    """The trusted keys of a key directory's files (name -> text); see the module docstring.

    Raises:
        KeyLoadError: A key cannot be used, a key id repeats, or there is no key.
    """
    found: dict[str, TrustedKey] = {}

    def add(key: TrustedKey, where: str) -> None:
        if key.keyid in found:
            raise KeyLoadError(f"{where}: key id {key.keyid!r} is defined twice")
        found[key.keyid] = key

    for name in sorted(files):
        if name.startswith("."):
            continue
        if name.endswith(".pem"):
            add(TrustedKey(name[: -len(".pem")], load_public_key(files[name], name)), name)
        elif name in INDEX_FILES:
            for index, entry in enumerate(_index_entries(name, files[name])):
                where = f"{name}[{index}]"
                if not isinstance(entry, dict):
                    raise KeyLoadError(f"{where}: not an object")
                entry_id, pem = entry.get("keyid"), entry.get("publicKey")
                if not isinstance(entry_id, str) or not entry_id:
                    raise KeyLoadError(f"{where}: keyid is missing")
                where = f"{where} (keyid {entry_id})"
                if not isinstance(pem, str):
                    raise KeyLoadError(f"{where}: publicKey (PEM) is missing")
                not_after = _not_after(entry.get("notAfter"), where)
                add(TrustedKey(entry_id, load_public_key(pem, where), not_after), where)
    if not found:
        raise KeyLoadError(f"no trusted key found (expected <keyid>.pem files or one of {', '.join(INDEX_FILES)})")
    return TrustedKeys(found)


def load_signer(pem: str) -> tuple[Callable[[bytes], bytes], PublicKey]:
    """A signing function for an unencrypted PEM private key, and its public key.

    Raises:
        KeyLoadError: Not such a key, or an unsupported algorithm.
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    try:
        key = serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    except (ValueError, UnsupportedAlgorithm, TypeError) as exc:
        raise KeyLoadError(
            f"not an unencrypted PEM private key ({str(exc).splitlines()[0] if str(exc) else 'invalid'})"
        ) from None
    if isinstance(key, ed25519.Ed25519PrivateKey):
        ed_key = key
        return ed_key.sign, ed_key.public_key()
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVE_SIZES:
        ec_key, algorithm = key, _ecdsa(key.curve.name)
        return (lambda message: ec_key.sign(message, algorithm)), ec_key.public_key()
    _check_algorithm(key.public_key(), "private key")
    raise AssertionError("unreachable")  # pragma: no cover
