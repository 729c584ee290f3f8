"""Signed attestations of model files: DSSE envelopes carrying in-toto Statements, trusted keys, verdicts.

A pure package (no I/O, no clock: ``now`` is passed in): texts and digests in, a :class:`Verdict` out. The
manager's ModelCache planner (:mod:`kthena_py.plan.modelcache.attestation`) and ``kthena-py attest`` use it;
files are read by their callers. Modules: :mod:`.dsse` (envelope, PAE, signing), :mod:`.intoto` (Statement),
:mod:`.keys` (trusted keys, signers), :mod:`.verify` (the verdict), :mod:`.policy` (the effective mode).
"""

from .dsse import Envelope, EnvelopeError, Signature, decode_base64, pae, parse_envelope, sign_envelope
from .intoto import PAYLOAD_TYPE, Statement, Subject, make_statement, parse_statement
from .keys import (
    KeyLoadError,
    TrustedKey,
    TrustedKeys,
    key_id_of,
    load_public_key,
    load_signer,
    public_pem,
    trusted_keys_from_files,
)
from .policy import ENFORCE, MODES, OFF, WARN, Mode, effective_mode, parse_mode
from .verify import Verdict, verify

__all__ = [
    "ENFORCE",
    "MODES",
    "OFF",
    "PAYLOAD_TYPE",
    "WARN",
    "Envelope",
    "EnvelopeError",
    "KeyLoadError",
    "Mode",
    "Signature",
    "Statement",
    "Subject",
    "TrustedKey",
    "TrustedKeys",
    "Verdict",
    "decode_base64",
    "effective_mode",
    "key_id_of",
    "load_public_key",
    "load_signer",
    "make_statement",
    "pae",
    "parse_envelope",
    "parse_mode",
    "parse_statement",
    "public_pem",
    "sign_envelope",
    "trusted_keys_from_files",
    "verify",
]
