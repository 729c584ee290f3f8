"""Revalidation and OnChange re-staging in plan_cache: cadence, jitter, SourceDrifted, the switch to a new copy."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import ModelCache, model_dir
from kthena_py.plan.modelcache import CachePlan, ClaimView, Observed, PlanSettings, fingerprint, plan_cache
from kthena_py.plan.modelcache.refresh import (
    DEFAULT_INTERVAL,
    JITTER_FRACTION,
    Probe,
    jitter,
    next_due,
    restage_fingerprint,
)
from kthena_py.plan.modelcache.views import JobView
from kthena_py.sourceid import SourceIdentity, identity_token
from kthena_py.vocab.labels import MODEL_CACHE_CONTENT
from kthena_py.vocab.times import format_time

from .builders import NODE_LOCAL, cache, job, result

CLAIM = ClaimView("models", "Bound", False)
SETTINGS = PlanSettings()
OLD = SourceIdentity("c0ffee" * 6 + "c0ff", 2 * 1024**3 + 512)
NEW = SourceIdentity("beef00" * 6 + "beef", 2 * 1024**3 + 900)
FIRST = model_dir("hf://org/llama")


def _plan(mc: ModelCache, *jobs: JobView, now: float = 1000.0, probe: Probe | None = None) -> CachePlan:
    return plan_cache(mc, Observed(jobs=tuple(jobs), claim=CLAIM, probe=probe), SETTINGS, now)


def _staged(identity: SourceIdentity = OLD, **extra: Any) -> str:
    return result(identity=identity.to_json(), **extra)


def _drift(plan: CachePlan) -> dict[str, Any] | None:
    return next((c for c in plan.status["conditions"] if c["type"] == "SourceDrifted"), None)


def _converged(policy: str = "IfNotPresent", **spec: Any) -> tuple[ModelCache, JobView]:
    """A Ready cache (its status fed back from a first plan) and its succeeded download Job."""
    mc = cache(refreshPolicy=policy, **spec)
    done = job(mc, "succeeded", pod_phase="Succeeded", message=_staged())
    first = _plan(mc, done, now=500.0)
    return cache(status=first.status, refreshPolicy=policy, **spec), done


# -- cadence -------------------------------------------------------------------------------------------


@given(st.text(min_size=1, max_size=40), st.floats(min_value=0, max_value=10**7, allow_nan=False))
def test_jitter_is_within_bounds_and_deterministic(uid: str, interval: float) -> None:
    value = jitter(uid, interval)
    assert value == jitter(uid, interval)
    assert 0 <= value <= JITTER_FRACTION * interval


@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=1, max_value=10**5),
    st.text(min_size=1, max_size=20),
)
def test_never_due_before_the_interval(base: int, interval: int, uid: str) -> None:
    status = {"phase": "Ready", "lastRevalidated": format_time(base)}
    mc = cache(revalidationInterval=f"{interval}s")
    mc = mc.model_copy(update={"metadata": {**(mc.metadata or {}), "uid": uid}})
    due = next_due(mc, status)
    assert due is not None and base + interval <= due <= base + interval * (1 + JITTER_FRACTION)


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        ({}, {"phase": "Ready", "lastRevalidated": format_time(100)}, 100 + DEFAULT_INTERVAL),
        ({"revalidationInterval": "0s"}, {"phase": "Ready", "lastRevalidated": format_time(100)}, None),
        ({"source": "pvc://models/llama"}, {"phase": "Ready", "lastRevalidated": format_time(100)}, None),
        ({"source": "/mnt/llama"}, {"phase": "Ready", "lastRevalidated": format_time(100)}, None),
        ({}, {"phase": "Downloading", "lastRevalidated": format_time(100)}, None),
        (
            {"revalidationInterval": "2s"},
            {"phase": "Ready", "conditions": [{"type": "Ready", "lastTransitionTime": format_time(50)}]},
            52,
        ),
        ({}, {"phase": "Ready"}, None),
    ],
)
def test_when_a_cache_is_due(spec: dict[str, Any], status: dict[str, Any], expected: float | None) -> None:
    mc = cache(**spec)
    due = next_due(mc, status)
    if expected is None:
        assert due is None
    else:
        interval = 2 if spec.get("revalidationInterval") == "2s" else DEFAULT_INTERVAL
        assert due is not None and expected <= due <= expected + JITTER_FRACTION * interval


def test_the_requeue_includes_the_next_revalidation() -> None:
    mc, done = _converged(revalidationInterval="30s")
    plan = _plan(mc, done, now=510.0)
    assert plan.requeue_after is not None and 20 <= plan.requeue_after <= 23


# -- identity and SourceDrifted ------------------------------------------------------------------------


def test_the_staged_identity_comes_from_the_download_result_and_stays_when_the_pod_is_gone() -> None:
    mc, _ = _converged()
    assert mc.status is not None and mc.status.source_etag == OLD.etag
    assert mc.status.source_content_length == OLD.content_length
    gone = job(mc, "succeeded", pod_phase=None)
    plan = _plan(mc, gone)
    assert plan.status["sourceETag"] == OLD.etag
    assert _drift(plan) is None  # no probe yet: no condition
    assert "lastRevalidated" not in plan.status and "upstream" not in plan.status


def test_a_converged_cache_with_no_probe_plans_the_same_status_and_says_nothing() -> None:
    mc, done = _converged()
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=OLD))
    again = cache(status=probed.status, refreshPolicy="IfNotPresent")
    later = _plan(again, done, now=6000.0)
    assert later.status == probed.status and later.events == () and later.creates == () and later.deletes == ()


@pytest.mark.parametrize("policy", ["IfNotPresent", "OnChange"])
def test_an_unchanged_source_is_reported_unchanged(policy: str) -> None:
    mc, done = _converged(policy)
    plan = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=OLD))
    drift = _drift(plan)
    assert drift is not None and (drift["status"], drift["reason"]) == ("False", "SourceUnchanged")
    assert plan.status["upstream"] == OLD.to_json() and plan.status["lastRevalidated"] == format_time(4990.0)
    assert plan.creates == () and plan.events == ()


def test_if_not_present_reports_a_change_and_keeps_serving() -> None:
    mc, done = _converged()
    plan = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    drift = _drift(plan)
    assert drift is not None and (drift["status"], drift["reason"]) == ("True", "SourceChanged")
    assert OLD.etag in drift["message"] and NEW.etag in drift["message"]  # type: ignore[operator]
    assert plan.status["phase"] == "Ready" and plan.status["sourceETag"] == OLD.etag
    assert plan.status["upstream"] == NEW.to_json()
    assert plan.creates == () and plan.deletes == ()
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "SourceChanged")]
    # Once per transition: the next probe that finds the same change says nothing more.
    again = _plan(cache(status=plan.status), done, now=9000.0, probe=Probe(8990.0, identity=NEW))
    assert again.events == ()
    assert _drift(again)["lastTransitionTime"] == drift["lastTransitionTime"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("probe", "reason"),
    [
        (Probe(4990.0, error="HTTP 503"), "RevalidationFailed"),
        (Probe(4990.0, unsupported="S3 sources need botocore"), "RevalidationUnsupported"),
    ],
)
def test_a_failed_or_unsupported_probe_is_unknown_and_keeps_serving(probe: Probe, reason: str) -> None:
    mc, done = _converged("OnChange")
    probed = _plan(mc, done, now=3000.0, probe=Probe(2990.0, identity=OLD))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    plan = _plan(mc, done, now=5000.0, probe=probe)
    drift = _drift(plan)
    assert drift is not None and (drift["status"], drift["reason"]) == ("Unknown", reason)
    assert plan.status["upstream"] == OLD.to_json() and plan.status["sourceETag"] == OLD.etag
    assert plan.status["phase"] == "Ready" and plan.creates == ()
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", reason)]
    # Unknown stays until the next probe, without a new Event.
    quiet = _plan(cache(status=plan.status, refreshPolicy="OnChange"), done, now=5500.0)
    assert _drift(quiet) == drift and quiet.events == ()


@given(
    st.sampled_from(["IfNotPresent", "OnChange"]),
    st.builds(
        SourceIdentity,
        etag=st.none() | st.text(min_size=1, max_size=20),
        content_length=st.none() | st.integers(min_value=0, max_value=10**12),
    ),
    st.text(min_size=1, max_size=30),
)
def test_a_probe_failure_never_changes_the_served_identity(policy: str, upstream: SourceIdentity, error: str) -> None:
    mc, done = _converged(policy)
    before = _plan(mc, done, now=3000.0, probe=Probe(2990.0, identity=upstream))
    after = _plan(cache(status=before.status, refreshPolicy=policy), done, now=5000.0, probe=Probe(4990.0, error=error))
    for key in ("sourceETag", "sourceContentLength", "upstream", "servedDirectory", "path"):
        assert after.status.get(key) == before.status.get(key)
    # Nor what is staged: the same re-staging (same Job names) or none, as the last identity says.
    assert [c.name for c in after.creates] == [c.name for c in before.creates]
    if policy == "IfNotPresent":
        assert after.creates == ()


def test_a_failed_probe_neither_starts_nor_aborts_a_re_staging() -> None:
    mc, done = _converged("OnChange")
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    restaging = job(mc, "active", created=5001.0, content=identity_token(NEW))
    failed = _plan(mc, done, restaging, now=7000.0, probe=Probe(6990.0, error="HTTP 503"))
    assert failed.deletes == () and failed.creates == ()
    assert _drift(failed)["reason"] == "RevalidationFailed"  # type: ignore[index]
    quiet = _plan(cache(status=failed.status, refreshPolicy="OnChange"), done, restaging, now=7100.0)
    assert quiet.deletes == () and quiet.creates == ()


def test_a_source_that_is_not_remote_has_no_drift_condition() -> None:
    mc = cache(source="pvc://models/llama")
    done = job(mc, "succeeded", pod_phase="Succeeded", message=result())
    plan = _plan(mc, done)
    assert _drift(plan) is None and plan.requeue_after is None


# -- OnChange ------------------------------------------------------------------------------------------


def _restage_args(plan: CachePlan) -> list[str]:
    jobs = [c.body for c in plan.creates if c.kind == "Job"]
    assert len(jobs) == 1
    return list(jobs[0]["spec"]["template"]["spec"]["containers"][0]["args"])


def test_on_change_stages_the_new_content_beside_the_served_copy() -> None:
    mc, done = _converged("OnChange")
    plan = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    token = identity_token(NEW)
    drift = _drift(plan)
    assert drift is not None and (drift["status"], drift["reason"]) == ("True", "Restaging")
    args = _restage_args(plan)
    assert args[args.index("-o") + 1] == f"/kthena-cache/{FIRST}-{token}"
    assert args[args.index("--revision") + 1] == NEW.etag  # a hub source is pinned to the new commit
    body = next(c.body for c in plan.creates if c.kind == "Job")
    assert body["metadata"]["labels"][MODEL_CACHE_CONTENT] == token
    fp = fingerprint(mc.spec)
    assert body["metadata"]["name"].startswith(f"llama-{restage_fingerprint(fp, token)[:8]}")
    assert [c.kind for c in plan.creates] == ["PodGroup", "Job"]
    # The served copy is untouched: same directory, same identity, still Ready, its Job kept.
    assert plan.status["phase"] == "Ready" and plan.status["sourceETag"] == OLD.etag
    assert plan.status["path"] == f"pvc://models/{FIRST}" and "servedDirectory" not in plan.status
    assert plan.deletes == ()


def test_an_http_source_is_not_pinned() -> None:
    mc, done = _converged("OnChange", source="https://example.test/m.gguf")
    plan = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    assert "--revision" not in _restage_args(plan)


def test_on_change_on_node_local_storage_reports_the_change_only() -> None:
    mc = cache(refreshPolicy="OnChange", storage=NODE_LOCAL)
    plan = _plan(mc, now=5000.0, probe=Probe(4990.0, identity=NEW))
    assert not any(c.body["metadata"]["labels"].get(MODEL_CACHE_CONTENT) for c in plan.creates if c.kind == "Job")


@pytest.mark.parametrize("state", ["active", "failed"])
def test_on_change_never_switches_before_the_new_copy_is_verified(state: str) -> None:
    mc, done = _converged("OnChange")
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    token = identity_token(NEW)
    restaging = job(mc, state, created=5001.0, content=token, message=None if state == "active" else "boom")
    plan = _plan(mc, done, restaging, now=5010.0)
    assert "servedDirectory" not in plan.status and plan.status["sourceETag"] == OLD.etag
    assert plan.status["path"] == f"pvc://models/{FIRST}" and plan.status["phase"] == "Ready"
    assert plan.deletes == ()  # neither the served copy's Job nor the re-staging one
    drift = _drift(plan)
    assert drift is not None and drift["reason"] == "Restaging" and restaging.name in drift["message"]


def test_on_change_switches_once_the_new_copy_succeeded_and_keeps_the_old_jobs() -> None:
    mc, done = _converged("OnChange")
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    token = identity_token(NEW)
    staged = job(mc, "succeeded", created=5001.0, finished=5100.0, content=token, message=_staged(NEW))
    plan = _plan(mc, done, staged, now=5110.0)
    directory = f"{FIRST}-{token}"
    assert plan.status["servedDirectory"] == {"directory": directory, "fingerprint": fingerprint(mc.spec)}
    assert plan.status["path"] == f"pvc://models/{directory}"
    assert plan.status["sourceETag"] == NEW.etag and plan.status["phase"] == "Ready"
    drift = _drift(plan)
    assert drift is not None and (drift["status"], drift["reason"]) == ("False", "SourceUnchanged")
    assert plan.deletes == ()  # the old copy's Jobs are its record until it is retired (see test_retire)
    assert ("Normal", "Restaging") in [(e.type, e.reason) for e in plan.events]
    # A restarted manager whose old Job is gone, and whose new Job's pod is gone, still serves the new copy.
    after = cache(status=plan.status, refreshPolicy="OnChange")
    again = _plan(after, job(after, "succeeded", created=5001.0, finished=5100.0, content=token, pod_phase=None))
    assert again.status["servedDirectory"] == plan.status["servedDirectory"]
    assert again.status["path"] == plan.status["path"] and again.deletes == ()
    assert again.status["sourceETag"] == NEW.etag and again.creates == ()


def test_a_restaging_the_source_moved_past_runs_out_and_the_new_one_starts() -> None:
    mc, done = _converged("OnChange")
    third = SourceIdentity("f" * 40, 1)
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=third))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    outdated = job(mc, "active", created=4000.0, content=identity_token(NEW))
    plan = _plan(mc, done, outdated, now=5010.0)
    assert plan.deletes == ()  # still writing into its directory: kept (the copy's record) until it finished
    args = _restage_args(plan)
    assert args[args.index("-o") + 1].endswith(f"-{identity_token(third)}")


def test_status_of_the_served_copy_round_trips_through_the_api_model() -> None:
    mc, done = _converged("OnChange")
    plan = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    assert to_dict(cache(status=plan.status).status)["upstream"] == NEW.to_json()


@given(
    st.lists(
        st.tuples(st.sampled_from(["active", "failed"]), st.integers(min_value=0, max_value=5), st.booleans()),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[1],
    ),
    st.floats(min_value=5001, max_value=10**6, allow_nan=False),
)
def test_on_change_never_switches_while_no_new_copy_succeeded(
    attempts: list[tuple[str, int, bool]], now: float
) -> None:
    mc, done = _converged("OnChange")
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    token = identity_token(NEW)
    jobs = [
        job(mc, state, attempt=attempt, created=5001.0 + attempt, content=token, pod_phase="Running" if pod else None)
        for state, attempt, pod in attempts
    ]
    plan = _plan(mc, done, *jobs, now=now)
    assert "servedDirectory" not in plan.status and plan.status["sourceETag"] == OLD.etag
    assert plan.status["path"] == f"pvc://models/{FIRST}" and plan.status["phase"] == "Ready"
    assert done.name not in {d.name for d in plan.deletes}  # the served copy's Job is never retired first


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        ({"etag": '"e"', "contentLength": 3}, SourceIdentity('"e"', 3)),
        ({"etag": 7}, None),
        ("garbage", None),
        (None, None),
    ],
)
def test_the_result_parser_reads_the_identity_tolerantly(identity: Any, expected: SourceIdentity | None) -> None:
    from kthena_py.plan.modelcache import parse_result

    parsed = parse_result(result(identity=identity))
    assert parsed is not None and parsed.ok and parsed.identity == expected


def test_a_served_re_staged_copy_whose_jobs_are_gone_is_staged_again_into_its_own_directory() -> None:
    mc, done = _converged("OnChange")
    probed = _plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    mc = cache(status=probed.status, refreshPolicy="OnChange")
    token = identity_token(NEW)
    staged = job(mc, "succeeded", created=5001.0, finished=5100.0, content=token, message=_staged(NEW))
    switched = _plan(mc, done, staged, now=5110.0)
    after = cache(status={**switched.status, "revision": NEW.etag}, refreshPolicy="OnChange")
    plan = _plan(after, now=6000.0)  # every Job is gone (deleted by hand)
    args = _restage_args(plan)
    assert args[args.index("-o") + 1] == f"/kthena-cache/{FIRST}-{token}"  # never the first directory
    assert args[args.index("--revision") + 1] == NEW.etag
    name = next(c.name for c in plan.creates if c.kind == "Job")
    assert name.startswith(f"llama-{restage_fingerprint(fingerprint(mc.spec), token)[:8]}")
    assert plan.status["servedDirectory"]["directory"] == f"{FIRST}-{token}"


# -- OnChange under an enforced attestation ------------------------------------------------------------


def test_under_enforce_a_re_staged_copy_serves_only_once_the_signed_statement_covers_it() -> None:
    from kthena_py.plan.modelcache import AttestationDocument, AttestationSettings
    from kthena_py.testing.attestation import FILES, envelope, keypair, text, trusted

    key = keypair("ed25519")
    ref = {"configMapKeyRef": {"name": "llama-attestation", "key": "envelope.json"}}
    settings = PlanSettings(attestation=AttestationSettings("enforce", trusted(("release", key))))
    old_files = dict(FILES)  # what builders.result() stages
    new_files = {"model.safetensors": "d" * 64, "config.json": "e" * 64}

    def staged(identity: SourceIdentity, files: dict[str, str]) -> str:
        entries = [{"name": n, "size": 10, "sha256": d} for n, d in files.items()]
        return result(identity=identity.to_json(), files=entries, sizeBytes=20)

    def plan(
        mc: ModelCache, signed: dict[str, str], *jobs: JobView, now: float, probe: Probe | None = None
    ) -> CachePlan:
        document = AttestationDocument(text=text(envelope(key, files=signed)))
        observed = Observed(jobs=tuple(jobs), claim=CLAIM, probe=probe, attestation=document)
        return plan_cache(mc, observed, settings, now)

    spec = {"refreshPolicy": "OnChange", "attestation": ref}
    mc = cache(**spec)
    done = job(mc, "succeeded", pod_phase="Succeeded", message=staged(OLD, old_files))
    first = plan(mc, old_files, done, now=500.0)
    assert first.status["phase"] == "Ready"
    mc = cache(status=first.status, **spec)
    probed = plan(mc, old_files, done, now=5000.0, probe=Probe(4990.0, identity=NEW))
    mc = cache(status=probed.status, **spec)
    token = identity_token(NEW)
    new = job(mc, "succeeded", created=5001.0, finished=5100.0, content=token, message=staged(NEW, new_files))

    # The statement still covers only the old files: the verified copy keeps serving, nothing is switched.
    held = plan(mc, old_files, done, new, now=5110.0)
    assert "servedDirectory" not in held.status and held.status["sourceETag"] == OLD.etag
    assert held.status["phase"] == "Ready" and held.status["path"] == f"pvc://models/{FIRST}"
    assert done.name not in [d.name for d in held.deletes] and new.name not in [d.name for d in held.deletes]

    # Once the statement is re-signed for the new files, the switch happens.
    switched = plan(mc, new_files, done, new, now=5120.0)
    assert switched.status["servedDirectory"]["directory"] == f"{FIRST}-{token}"
    assert switched.status["sourceETag"] == NEW.etag and switched.status["phase"] == "Ready"
