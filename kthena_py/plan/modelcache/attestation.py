"""The ModelCache's ``AttestationVerified`` condition and whether it holds the cache back from Ready (pure).

:func:`check_attestation` takes the cache's attestation reference, the manager's settings (mode, trusted
keys), the referenced document as observed, the staged files' digests and ``now``; it returns an
:class:`AttestationCheck` or ``None`` when the effective mode (:func:`~kthena_py.attestation.effective_mode`)
is ``off``. Rules:

* Nothing staged yet: ``Unknown``/``AttestationPending`` (nothing to compare the statement with).
* No reference (the manager's mode is ``warn`` or ``enforce``): ``False``/``NoAttestation``.
* The ConfigMap or its key is missing: ``False``/``AttestationNotFound``.
* Otherwise the verdict of :func:`~kthena_py.attestation.verify`: ``True``/``Verified`` or ``False`` with its
  reason (``InvalidEnvelope``, ``UntrustedKey``, ``KeyExpired``, ``SignatureInvalid``, ``DigestMismatch``).
* ``holds``: under ``enforce`` a staged cache that is not verified is not Ready (``status`` turns it into
  phase Failed, Ready False and Degraded True with ``AttestationFailed``); under ``warn`` it serves.

ConfigMaps are not watched: while a referenced attestation does not verify, :func:`recheck_after` asks for
another look after :attr:`AttestationSettings.recheck_interval` (bounded), so a fixed ConfigMap is picked up.
A verified cache is not re-checked on a timer; its next reconcile (any event of it) checks again.
:func:`attestation_events`: a Warning when the condition turns False while the cache serves (warn; under
enforce the Degraded Warning says it), a Normal ``Verified`` when it turns True.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kthena_py.api.modelcache import AttestationReference
from kthena_py.attestation import ENFORCE, OFF, Mode, TrustedKeys, effective_mode, verify
from kthena_py.vocab.conditions import (
    ATTESTATION_VERIFIED,
    DEGRADED,
    REASON_ATTESTATION_FAILED,
    REASON_ATTESTATION_NOT_FOUND,
    REASON_ATTESTATION_PENDING,
    REASON_NO_ATTESTATION,
)

__all__ = [
    "AttestationCheck",
    "AttestationDocument",
    "AttestationInputs",
    "AttestationSettings",
    "attestation_condition",
    "attestation_events",
    "check_attestation",
    "held_message",
    "recheck_after",
]

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class AttestationSettings:
    """The manager's attestation settings.

    Attributes:
        mode: ``--model-attestation`` (``off``, ``warn``, ``enforce``).
        keys: The trusted keys (``--model-attestation-keys``).
        recheck_interval: Seconds before a failing attestation is read again (ConfigMaps are not watched).
    """

    mode: Mode = OFF
    keys: TrustedKeys = field(default_factory=lambda: TrustedKeys({}))
    recheck_interval: float = 30.0


@dataclass(frozen=True)
class AttestationDocument:
    """The referenced envelope as observed: its ``text``, or ``missing`` (why it was not found)."""

    text: str | None = None
    missing: str | None = None


@dataclass(frozen=True)
class AttestationInputs:
    """What the status needs to decide the attestation (besides the staged files and ``now``)."""

    settings: AttestationSettings
    reference: AttestationReference | None
    document: AttestationDocument | None


@dataclass(frozen=True)
class AttestationCheck:
    """The ``AttestationVerified`` condition's content and whether readiness is held."""

    status: ConditionStatus
    reason: str
    message: str
    holds: bool


def check_attestation(
    inputs: AttestationInputs,
    staged: Mapping[str, str] | None,
    one_file_sha256: str | None,
    now: float,
) -> AttestationCheck | None:
    """Decide the attestation (see the module docstring); ``staged`` is ``None`` while nothing is staged."""
    reference = inputs.reference
    mode = effective_mode(inputs.settings.mode, reference.policy if reference else None, reference is not None)
    if mode == OFF:
        return None
    enforced = mode == ENFORCE
    if staged is None:
        return AttestationCheck("Unknown", REASON_ATTESTATION_PENDING, "nothing staged yet to verify", False)
    if reference is None:
        return AttestationCheck(
            "False",
            REASON_NO_ATTESTATION,
            f"--model-attestation is {mode} and the cache references no attestation (spec.attestation)",
            enforced,
        )
    ref = reference.config_map_key_ref
    document = inputs.document
    if document is None or document.text is None:
        missing = document.missing if document is not None and document.missing else "not read"
        return AttestationCheck(
            "False", REASON_ATTESTATION_NOT_FOUND, f"ConfigMap {ref.name} key {ref.key}: {missing}", enforced
        )
    verdict = verify(document.text, inputs.settings.keys, staged, one_file_sha256, now)
    if verdict.ok:
        return AttestationCheck("True", verdict.reason, verdict.message, False)
    return AttestationCheck("False", verdict.reason, f"ConfigMap {ref.name} key {ref.key}: {verdict.message}", enforced)


def attestation_condition(
    previous: Mapping[str, Mapping[str, Any]], check: AttestationCheck, gen: int, now: str
) -> dict[str, Any]:
    """The ``AttestationVerified`` condition (its ``lastTransitionTime`` kept while the status stays)."""
    before = previous.get(ATTESTATION_VERIFIED)
    since = str(before["lastTransitionTime"]) if before and before.get("status") == check.status else now
    return {
        "type": ATTESTATION_VERIFIED,
        "status": check.status,
        "observedGeneration": gen,
        "lastTransitionTime": since,
        "reason": check.reason,
        "message": check.message,
    }


def held_message(check: AttestationCheck) -> str:
    """The Ready/Degraded message of a cache held back by ``check``."""
    return f"attestation not verified (enforced): {check.message}"


def _condition_of(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def recheck_after(
    reference: AttestationReference | None, status: Mapping[str, Any], settings: AttestationSettings
) -> float | None:
    """Seconds until the referenced attestation should be read again: only while it does not verify."""
    if reference is None:
        return None
    condition = _condition_of(status, ATTESTATION_VERIFIED)
    if condition.get("status") == "False":
        return settings.recheck_interval
    return None


def attestation_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events of the condition's change (see the module docstring)."""
    old, new = _condition_of(previous, ATTESTATION_VERIFIED), _condition_of(status, ATTESTATION_VERIFIED)
    if not new or (old.get("status"), old.get("reason")) == (new.get("status"), new.get("reason")):
        return []
    if new.get("status") == "True":
        return [("Normal", str(new.get("reason")), str(new.get("message")))]
    degraded = _condition_of(status, DEGRADED)
    if new.get("status") == "False" and not (
        degraded.get("status") == "True" and degraded.get("reason") == REASON_ATTESTATION_FAILED
    ):
        return [("Warning", str(new.get("reason")), f"{new.get('message')} (not enforced: the cache serves)")]
    return []
