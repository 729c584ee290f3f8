"""job_view: the job controller's verdict, including what it writes before its terminal conditions."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.plan.modelcache import Observed, PlanSettings, fingerprint, job_view, plan_cache
from kthena_py.plan.modelcache.views import ClaimView
from kthena_py.vocab.labels import MODEL_CACHE_ATTEMPT, MODEL_CACHE_FINGERPRINT
from kthena_py.vocab.times import format_time

from .builders import cache, pod, result

UID = "job-uid"


def _job(status: dict[str, Any], fp: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "llama-1234",
            "uid": UID,
            "labels": {MODEL_CACHE_FINGERPRINT: fp, MODEL_CACHE_ATTEMPT: "0"},
            "creationTimestamp": format_time(100),
            "ownerReferences": [{"uid": "cache-uid", "controller": True}],
        },
        "spec": {"completions": 1},
        "status": status,
    }


def _true(kind: str, at: float = 160.0) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": format_time(at)}


@pytest.mark.parametrize(
    ("status", "state", "finished"),
    [
        ({"active": 1, "ready": 1}, "active", None),
        # the pod succeeded; the controller has seen it but not counted it (its finalizer is being removed)
        ({"active": 0, "uncountedTerminatedPods": {"succeeded": [UID + "-pod"]}}, "succeeded", None),
        ({"active": 0, "succeeded": 1, "conditions": [_true("SuccessCriteriaMet")]}, "succeeded", 160.0),
        ({"succeeded": 1, "completionTime": format_time(170), "conditions": [_true("Complete")]}, "succeeded", 170.0),
        ({"active": 0, "failed": 2, "conditions": [_true("FailureTarget", 150)]}, "failed", 150.0),
        ({"failed": 2, "conditions": [_true("FailureTarget", 150), _true("Failed", 155)]}, "failed", 155.0),
        # a condition that is not True decides nothing
        ({"active": 1, "conditions": [{"type": "SuccessCriteriaMet", "status": "False"}]}, "active", None),
        ({"uncountedTerminatedPods": {"failed": [UID + "-pod"]}, "active": 1}, "active", None),
    ],
)
def test_the_job_state_is_the_controllers_verdict(status: dict[str, Any], state: str, finished: float | None) -> None:
    view = job_view(_job(status))
    assert (view.state, view.finished_at) == (state, finished)


def test_a_download_whose_pod_succeeded_never_goes_back_to_pending() -> None:
    """Between the pod's success and the Job's verdict the cache stays Downloading, then turns Ready."""
    mc = cache()
    claim = ClaimView("models", "Bound", False)
    settings = PlanSettings()
    phases = []
    for pod_phase, status in (
        ("Running", {"active": 1, "ready": 1}),
        ("Succeeded", {"active": 1, "ready": 0}),  # the pod's status arrived before the Job's update
        ("Succeeded", {"active": 0, "ready": 0}),
        ("Succeeded", {"active": 0, "uncountedTerminatedPods": {"succeeded": ["p"]}}),
    ):
        message = result() if pod_phase == "Succeeded" else None
        job = job_view(_job(status, fingerprint(mc.spec)), [pod(UID, pod_phase, message)])
        phases.append(plan_cache(mc, Observed(jobs=(job,), claim=claim), settings, 1000.0).status["phase"])
    assert phases == ["Downloading", "Downloading", "Downloading", "Ready"]
