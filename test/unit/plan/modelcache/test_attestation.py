"""plan_cache with attestations: enforce holds Ready, warn serves with the condition False, pending, rechecks,
Events once, and no change (so no write) on a converged cache."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kthena_py.api.modelcache import ModelCache
from kthena_py.attestation import Mode
from kthena_py.plan.modelcache import (
    AttestationDocument,
    AttestationSettings,
    CachePlan,
    ClaimView,
    Observed,
    PlanSettings,
    plan_cache,
)
from kthena_py.plan.modelcache.views import JobView
from kthena_py.testing.attestation import FILES, envelope, keypair, text, trusted

from .builders import SHA_A, cache, job, result

CLAIM = ClaimView("models", "Bound", False)
KEY, STRANGER = keypair("ed25519"), keypair("p256")
GOOD = AttestationDocument(text=text(envelope(KEY)))
TAMPERED = AttestationDocument(text=text(envelope(KEY, files={**FILES, "model.safetensors": "c" * 64})))
FORGED = AttestationDocument(text=text(envelope(STRANGER, keyid="release")))
REF = {"configMapKeyRef": {"name": "llama-attestation", "key": "envelope.json"}}


def _settings(mode: Mode) -> PlanSettings:
    return PlanSettings(attestation=AttestationSettings(mode, trusted(("release", KEY)), recheck_interval=30.0))


def _conditions(plan: CachePlan) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in plan.status["conditions"]}


def _message(plan: CachePlan, kind: str) -> str:
    return str(next(c["message"] for c in plan.status["conditions"] if c["type"] == kind))


def _staged(mc: ModelCache) -> JobView:
    return job(mc, "succeeded", pod_phase="Succeeded", message=result())


def _plan(
    mc: ModelCache, mode: Mode, document: AttestationDocument | None, *jobs: JobView, now: float = 1000.0
) -> CachePlan:
    observed = Observed(jobs=jobs, claim=CLAIM, attestation=document)
    return plan_cache(mc, observed, _settings(mode), now)


def _settle(mc: ModelCache, plan: CachePlan) -> ModelCache:
    return cache(status=plan.status, **mc.spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True))


def test_enforce_with_a_good_signature_is_ready_and_verified_and_says_so_once() -> None:
    mc = cache(attestation=REF)
    plan = _plan(mc, "enforce", GOOD, _staged(mc))
    assert plan.status["phase"] == "Ready"
    assert _conditions(plan)["AttestationVerified"] == ("True", "Verified")
    assert "release" in _message(plan, "AttestationVerified")
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "Cached"), ("Normal", "Verified")]
    assert plan.requeue_after is not None and plan.requeue_after >= 3600  # only the 1 h revalidation: no recheck
    again = _plan(_settle(mc, plan), "enforce", GOOD, job(mc, "succeeded", pod_phase=None), now=5000.0)
    assert again.status == plan.status and again.events == ()


@pytest.mark.parametrize(
    ("document", "reason"),
    [(TAMPERED, "DigestMismatch"), (FORGED, "SignatureInvalid"), (None, "AttestationNotFound")],
)
def test_enforce_failing_holds_the_cache_from_ready(document: AttestationDocument | None, reason: str) -> None:
    mc = cache(attestation=REF)
    plan = _plan(mc, "enforce", document, _staged(mc))
    assert plan.status["phase"] == "Failed"
    assert _conditions(plan) == {
        "Ready": ("False", "AttestationFailed"),
        "Progressing": ("False", "AttestationFailed"),
        "Degraded": ("True", "AttestationFailed"),
        "AttestationVerified": ("False", reason),
    }
    assert "llama-attestation" in _message(plan, "Degraded") and _message(plan, "Ready") == _message(plan, "Degraded")
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "AttestationFailed")]
    assert plan.requeue_after == 30.0  # the ConfigMap is not watched: look again
    # The files stay reported (what was staged), and nothing changes on the next pass.
    assert [f["name"] for f in plan.status["files"]] == ["config.json", "model.safetensors"]
    again = _plan(_settle(mc, plan), "enforce", document, _staged(mc), now=5000.0)
    assert again.status == plan.status and again.events == ()


def test_a_fixed_configmap_makes_an_enforced_cache_ready() -> None:
    mc = cache(attestation=REF)
    held = _plan(mc, "enforce", TAMPERED, _staged(mc))
    fixed = _plan(_settle(mc, held), "enforce", GOOD, _staged(mc), now=1030.0)
    assert fixed.status["phase"] == "Ready"
    assert _conditions(fixed)["Degraded"] == ("False", "NoFailure")
    assert ("Normal", "Verified") in [(e.type, e.reason) for e in fixed.events]
    assert fixed.requeue_after is not None and fixed.requeue_after >= 3600  # only the 1 h revalidation


def test_warn_serves_with_the_condition_false_and_warns_once() -> None:
    mc = cache(attestation=REF)
    plan = _plan(mc, "warn", TAMPERED, _staged(mc))
    assert plan.status["phase"] == "Ready"
    conditions = _conditions(plan)
    assert conditions["Ready"] == ("True", "Cached") and conditions["Degraded"] == ("False", "NoFailure")
    assert conditions["AttestationVerified"] == ("False", "DigestMismatch")
    assert SHA_A in _message(plan, "AttestationVerified")
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "Cached"), ("Warning", "DigestMismatch")]
    again = _plan(_settle(mc, plan), "warn", TAMPERED, _staged(mc), now=5000.0)
    assert again.status == plan.status and again.events == ()


def test_a_cache_policy_tightens_the_manager_off_mode() -> None:
    mc = cache(attestation={**REF, "policy": "Enforce"})
    assert _plan(mc, "off", TAMPERED, _staged(mc)).status["phase"] == "Failed"
    relaxed = cache(attestation={**REF, "policy": "Warn"})
    assert _plan(relaxed, "enforce", TAMPERED, _staged(relaxed)).status["phase"] == "Failed"  # never relaxed
    referenced = cache(attestation=REF)
    plan = _plan(referenced, "off", TAMPERED, _staged(referenced))  # a reference under off: checked as warn
    assert plan.status["phase"] == "Ready" and _conditions(plan)["AttestationVerified"][0] == "False"


def test_pending_before_anything_is_staged() -> None:
    mc = cache(attestation=REF)
    plan = _plan(mc, "enforce", GOOD, job(mc, "active"))
    assert plan.status["phase"] == "Downloading"
    assert _conditions(plan)["AttestationVerified"] == ("Unknown", "AttestationPending")
    assert plan.requeue_after == PlanSettings().progress_interval


@pytest.mark.parametrize(("mode", "phase"), [("enforce", "Failed"), ("warn", "Ready")])
def test_no_reference_under_warn_or_enforce_is_no_attestation(mode: Mode, phase: str) -> None:
    mc = cache()
    plan = _plan(mc, mode, None, _staged(mc))
    assert plan.status["phase"] == phase
    assert _conditions(plan)["AttestationVerified"] == ("False", "NoAttestation")
    # A spec change, not a timer, brings a reference (the only timer: a Ready cache's 1 h source revalidation).
    if phase == "Ready":
        assert plan.requeue_after is not None and plan.requeue_after >= 3600
    else:
        assert plan.requeue_after is None


def test_off_without_a_reference_adds_no_condition() -> None:
    mc = cache()
    plan = _plan(mc, "off", None, _staged(mc))
    assert plan.status["phase"] == "Ready" and "AttestationVerified" not in _conditions(plan)


def test_a_one_file_model_is_checked_by_its_digest() -> None:
    mc = cache(attestation=REF)
    one = job(mc, "succeeded", pod_phase="Succeeded", message=_one_file_result())
    statement = AttestationDocument(text=text(envelope(KEY, files={"whatever.gguf": SHA_A})))
    assert _plan(mc, "enforce", statement, one).status["phase"] == "Ready"
    wrong = AttestationDocument(text=text(envelope(KEY, files={"model.gguf": "d" * 64})))
    assert _plan(mc, "enforce", wrong, one).status["phase"] == "Failed"


def _one_file_result() -> str:
    import json

    body: dict[str, Any] = {"ok": True, "files": [{"name": "model.gguf", "size": 10, "sha256": SHA_A}], "sha256": SHA_A}
    return json.dumps(body)


def test_the_expiry_of_a_key_is_judged_at_the_plan_time() -> None:
    mc = cache(attestation=REF)
    settings = PlanSettings(attestation=AttestationSettings("enforce", trusted(("release", KEY, 2000.0))))
    observed = Observed(jobs=(_staged(mc),), claim=CLAIM, attestation=GOOD)
    assert plan_cache(mc, observed, settings, 1999.0).status["phase"] == "Ready"
    late = plan_cache(mc, observed, settings, 2001.0)
    assert late.status["phase"] == "Failed" and _conditions(late)["AttestationVerified"][1] == "KeyExpired"
    assert dataclasses.replace(settings.attestation).recheck_interval == late.requeue_after
