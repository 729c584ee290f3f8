"""The ``kthena-py attest`` command line (sign, verify, keygen), parsed without loading it.

Guarantees: building the parser imports only the standard library; the implementation
(:mod:`kthena_py.cli.attest`, which loads ``cryptography``) is imported when the command runs.
"""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]

_DESCRIPTION = """\
Sign and verify attestations of model files: a DSSE envelope carrying an in-toto Statement whose subjects are
the files' sha256 digests (names relative to --dir). A ModelCache references such an envelope in a ConfigMap
(spec.attestation.configMapKeyRef); the manager verifies it with its trusted keys (--model-attestation-keys).

  kthena-py attest keygen --out-dir keys --keyid release-2026            # Ed25519 (or --algorithm p256|p384)
  kthena-py attest sign --key keys/release-2026.key --keyid release-2026 --dir ./model > envelope.json
  kthena-py attest verify --keys keys --envelope envelope.json --dir ./model

verify exits 0 when the envelope verifies, 1 otherwise (the reason and message on stderr)."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``attest``."""
    p = sub.add_parser(
        "attest",
        help="sign and verify DSSE/in-toto attestations of model files",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="attest_command", required=True, metavar="ACTION")
    sign = actions.add_parser("sign", help="print a signed envelope over the files' sha256 digests")
    sign.add_argument("--key", required=True, metavar="PRIVATE.pem", help="the signing key (unencrypted PEM)")
    sign.add_argument(
        "--keyid", default=None, help="the key id to name (default: sha256- and a digest of the public key)"
    )
    what = sign.add_mutually_exclusive_group(required=True)
    what.add_argument("--file", action="append", metavar="PATH", help="a file to list (repeatable; name: its base)")
    what.add_argument("--dir", metavar="DIR", help="list every file under DIR (names relative to DIR)")
    verify = actions.add_parser("verify", help="verify an envelope against trusted keys and files")
    verify.add_argument("--keys", required=True, metavar="DIR", help="trusted keys: <keyid>.pem files, keys.yaml")
    verify.add_argument("--envelope", required=True, metavar="FILE", help="the DSSE envelope (JSON)")
    verify.add_argument("--dir", required=True, metavar="DIR", help="the model directory (or one file)")
    keygen = actions.add_parser("keygen", help="write a new key pair: <keyid>.key (private) and <keyid>.pem")
    keygen.add_argument("--out-dir", required=True, metavar="DIR")
    keygen.add_argument("--keyid", default=None, help="the key id (default: sha256- and a digest of the public key)")
    keygen.add_argument("--algorithm", choices=("ed25519", "p256", "p384"), default="ed25519")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from kthena_py.cli.attest import run

    return run(args)
