"""``kthena-py attest``: sign, verify and key generation for ModelCache attestations.

The file I/O around :mod:`kthena_py.attestation`.

Guarantees: ``sign`` prints one envelope (JSON) whose in-toto Statement lists every regular file (sorted,
names relative to ``--dir`` with ``/`` separators; ``--file`` uses base names) with its sha256, read in
chunks; ``verify`` applies exactly the manager's rule (:func:`kthena_py.attestation.verify`) and exits 0 only
when it verifies; ``keygen`` writes ``<keyid>.key`` (private, mode 0600) and ``<keyid>.pem`` (public, ready for
a key directory) and refuses to overwrite. :func:`read_key_dir` is also the manager's loader of
``--model-attestation-keys``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

from kthena_py.attestation import (
    PAYLOAD_TYPE,
    KeyLoadError,
    TrustedKeys,
    key_id_of,
    load_signer,
    make_statement,
    public_pem,
    sign_envelope,
    trusted_keys_from_files,
    verify,
)

from .common import CommandError

__all__ = ["digest_files", "read_key_dir", "run"]

_CHUNK = 1 << 20
_FILE_KEYID = re.compile(r"^[-._a-zA-Z0-9]+$")


def read_key_dir(path: str | Path) -> TrustedKeys:
    """The trusted keys of a directory (``<keyid>.pem``, ``keys.yaml|yml|json``) or of one such file.

    Raises:
        CommandError: The path cannot be read or a key cannot be used (the message says which).
    """
    root = Path(path)
    try:
        if root.is_dir():
            names = [p for p in sorted(root.iterdir()) if not p.name.startswith(".") and p.is_file()]
            files = {p.name: p.read_text(encoding="utf-8") for p in names}
        else:
            files = {root.name: root.read_text(encoding="utf-8")}
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read the trusted keys at {root}: {exc}") from exc
    try:
        return trusted_keys_from_files(files)
    except KeyLoadError as exc:
        raise CommandError(f"trusted keys at {root}: {exc}") from exc


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def digest_files(directory: Path | None = None, files: list[Path] | None = None) -> dict[str, str]:
    """The sha256 of every regular file under ``directory`` (relative names) or of ``files`` (base names).

    Raises:
        CommandError: A path is missing or unreadable.
    """
    try:
        if files is not None:
            return {p.name: _sha256(p) for p in files}
        assert directory is not None
        if directory.is_file():
            return {directory.name: _sha256(directory)}
        found = {}
        for root, dirs, names in os.walk(directory):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                full = Path(root) / name
                if name.startswith(".") or not full.is_file():
                    continue  # the downloader's markers and partial files are hidden
                found[full.relative_to(directory).as_posix()] = _sha256(full)
        return found
    except OSError as exc:
        raise CommandError(str(exc)) from exc


def _sign(args: argparse.Namespace) -> int:
    try:
        signer, public = load_signer(Path(args.key).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"cannot read {args.key}: {exc}") from exc
    except KeyLoadError as exc:
        raise CommandError(f"{args.key}: {exc}") from exc
    digests = digest_files(Path(args.dir) if args.dir else None, [Path(f) for f in args.file] if args.file else None)
    if not digests:
        raise CommandError("no file to sign")
    envelope = sign_envelope(PAYLOAD_TYPE, make_statement(digests), [(args.keyid or key_id_of(public), signer)])
    sys.stdout.write(json.dumps(envelope, indent=2) + "\n")
    return 0


def _verify(args: argparse.Namespace) -> int:
    keys = read_key_dir(args.keys)
    try:
        text = Path(args.envelope).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {args.envelope}: {exc}") from exc
    target = Path(args.dir)
    digests = digest_files(target)
    one_file = next(iter(digests.values())) if target.is_file() else None
    verdict = verify(text, keys, digests, one_file, time.time())
    stream = sys.stdout if verdict.ok else sys.stderr
    print(f"{verdict.reason}: {verdict.message}", file=stream)
    return 0 if verdict.ok else 1


def _keygen(args: argparse.Namespace) -> int:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    if args.algorithm == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        private = ec.generate_private_key(ec.SECP256R1() if args.algorithm == "p256" else ec.SECP384R1())
    public = private.public_key()
    keyid = args.keyid or key_id_of(public)
    if not _FILE_KEYID.match(keyid) or keyid.startswith("."):
        raise CommandError(f"key id {keyid!r}: use letters, digits, '-', '_' and '.' (it names a Secret key)")
    out = Path(args.out_dir)
    key_file, pem_file = out / f"{keyid}.key", out / f"{keyid}.pem"
    if key_file.exists() or pem_file.exists():
        raise CommandError(f"{key_file} or {pem_file} exists: not overwritten")
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        pem_file.write_text(public_pem(public), encoding="utf-8")
    except OSError as exc:
        raise CommandError(str(exc)) from exc
    print(f"key id {keyid}: private key {key_file}, public key {pem_file}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``attest sign|verify|keygen``."""
    actions = {"sign": _sign, "verify": _verify, "keygen": _keygen}
    return actions[args.attest_command](args)
