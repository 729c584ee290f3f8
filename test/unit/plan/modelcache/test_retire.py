"""Retiring superseded copies of an OnChange cache (plan/modelcache/retire.py), through the cache planner."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.modelcache import ModelCache, model_dir
from kthena_py.plan.modelcache import CachePlan, ClaimView, Observed, PlanSettings, cleanup_job_name, fingerprint
from kthena_py.plan.modelcache import plan_cache as plan_cache_
from kthena_py.plan.modelcache.refresh import Probe, restage_fingerprint
from kthena_py.plan.modelcache.retire import (
    GRACE,
    RECHECK,
    RETIRE_WHY,
    PodMount,
    Rollout,
    mounts_directory,
    pod_mounts,
    retirement_blocker,
)
from kthena_py.plan.modelcache.views import JobView
from kthena_py.sourceid import SourceIdentity, identity_token
from kthena_py.vocab.labels import MODEL_CACHE_CONTENT, MODEL_CACHE_FINGERPRINT, MODEL_CACHE_NAME

from .builders import cache, job, result

CLAIM = ClaimView("models", "Bound", False)
SETTINGS = PlanSettings()
OLD = SourceIdentity("c0ffee" * 6 + "c0ff", 2 * 1024**3 + 512)
NEW = SourceIdentity("beef00" * 6 + "beef", 2 * 1024**3 + 900)
THIRD = SourceIdentity("f00d00" * 6 + "f00d", 2 * 1024**3 + 1000)
FIRST = model_dir("hf://org/llama")
TOKEN = identity_token(NEW)
SWITCHED_AT = 5100.0
LATER = SWITCHED_AT + GRACE + 1


def _plan(
    mc: ModelCache,
    *jobs: JobView,
    now: float = LATER,
    mounts: tuple[PodMount, ...] = (),
    rollouts: tuple[Rollout, ...] = (),
    probe: Probe | None = None,
) -> CachePlan:
    observed = Observed(jobs=tuple(jobs), claim=CLAIM, probe=probe, mounts=mounts, rollouts=rollouts)
    return plan_cache_(mc, observed, SETTINGS, now)


def _staged(identity: SourceIdentity) -> str:
    return result(identity=identity.to_json())


def _switched() -> tuple[ModelCache, JobView, JobView]:
    """A cache that switched from its first copy to the re-staged ``TOKEN`` copy (status fed back)."""
    mc = cache(refreshPolicy="OnChange")
    done = job(mc, "succeeded", pod_phase="Succeeded", message=_staged(OLD))
    mc = cache(status=_plan(mc, done, now=500.0).status, refreshPolicy="OnChange")
    mc = cache(status=_plan(mc, done, now=5000.0, probe=Probe(4990.0, identity=NEW)).status, refreshPolicy="OnChange")
    staged = job(mc, "succeeded", created=5001.0, finished=SWITCHED_AT, content=TOKEN, message=_staged(NEW))
    switch = _plan(mc, done, staged, now=SWITCHED_AT + 1)
    assert switch.deletes == () and not [c for c in switch.creates if c.why == RETIRE_WHY]
    return cache(status=switch.status, refreshPolicy="OnChange"), done, staged


def _cleanup(mc: ModelCache, state: str, token: str = "", finished: float = LATER + 5) -> JobView:
    fp = fingerprint(mc.spec)
    name = cleanup_job_name(mc.name, restage_fingerprint(fp, token) if token else fp)
    return job(mc, state, kind="cleanup", name=name, content=token or None, created=LATER, finished=finished)


def _retirements(plan: CachePlan) -> list[dict[str, Any]]:
    return [c.body for c in plan.creates if c.why == RETIRE_WHY]


def _claim_pod(sub_path: str | None = None, *, phase: str = "Running", expr: bool = False, **labels: str) -> Any:
    mount: dict[str, Any] = {"name": "kthena-model-cache", "mountPath": "/models"}
    if expr:
        mount["subPathExpr"] = "$(POD)"
    elif sub_path is not None:
        mount["subPath"] = sub_path
    return {
        "metadata": {"name": "srv-0", "labels": labels},
        "spec": {
            "volumes": [{"name": "kthena-model-cache", "persistentVolumeClaim": {"claimName": "models"}}],
            "containers": [{"name": "c", "volumeMounts": [mount]}],
        },
        "status": {"phase": phase},
    }


# -- reading pods ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_claim_pod("abc"), (PodMount("srv-0", "models", "abc"),)),
        (_claim_pod("/abc/"), (PodMount("srv-0", "models", "abc"),)),
        (_claim_pod(), (PodMount("srv-0", "models", ""),)),
        (_claim_pod(expr=True), (PodMount("srv-0", "models", None),)),
        (_claim_pod("abc", phase="Succeeded"), ()),
        (_claim_pod("abc", phase="Failed"), ()),
        (_claim_pod("abc", **{MODEL_CACHE_NAME: "llama"}), ()),
        ({"metadata": {"name": "bare"}}, ()),
    ],
    ids=["subpath", "slashes", "whole-claim", "expr", "succeeded", "failed", "cache-job-pod", "no-spec"],
)
def test_pod_mounts(pod: Any, expected: tuple[PodMount, ...]) -> None:
    assert pod_mounts(pod) == expected


@pytest.mark.parametrize(
    ("claim", "sub", "directory", "sees"),
    [
        ("models", "d1", "d1", True),
        ("models", "d1/sub", "d1", True),
        ("models", "parent", "parent/d1", True),
        ("models", "", "d1", True),
        ("models", None, "d1", True),
        ("models", "d1-abc", "d1", False),
        ("models", "d2", "d1", False),
        ("other", "d1", "d1", False),
    ],
)
def test_mounts_directory(claim: str, sub: str | None, directory: str, sees: bool) -> None:
    assert mounts_directory(PodMount("p", claim, sub), "models", directory) is sees


@pytest.mark.parametrize(
    ("mounts", "rollouts", "blocked_by"),
    [
        ((), (), None),
        ((PodMount("p", "models", "d1"),), (), "p"),
        ((PodMount("p", "models", "d2"),), (Rollout("srv", True),), None),
        ((), (Rollout("srv", False),), "srv"),
        ((), (Rollout("a", True), Rollout("b", False)), "b"),
    ],
)
def test_retirement_blocker(
    mounts: tuple[PodMount, ...], rollouts: tuple[Rollout, ...], blocked_by: str | None
) -> None:
    why = retirement_blocker("d1", "models", mounts, rollouts)
    assert (why is None) == (blocked_by is None)
    if blocked_by is not None:
        assert why is not None and blocked_by in why


# -- the steps -----------------------------------------------------------------------------------------


def test_the_switch_itself_retires_nothing_and_keeps_the_old_jobs() -> None:
    _switched()  # asserts inside: no delete, no cleanup in the pass that switches


def test_within_the_grace_the_old_copy_waits() -> None:
    mc, done, staged = _switched()
    plan = _plan(mc, done, staged, now=SWITCHED_AT + GRACE - 1)
    assert _retirements(plan) == [] and plan.deletes == ()
    assert plan.requeue_after is not None and plan.requeue_after <= RECHECK


@pytest.mark.parametrize(
    ("mounts", "rollouts"),
    [
        ((PodMount("srv-0", "models", FIRST),), ()),
        ((PodMount("debug", "models", ""),), ()),
        ((), (Rollout("srv", False, "Waiting for rollout"),)),
    ],
    ids=["serving-pod", "whole-claim-pod", "rollout-unfinished"],
)
def test_a_mounted_copy_or_an_unfinished_rollout_waits(
    mounts: tuple[PodMount, ...], rollouts: tuple[Rollout, ...]
) -> None:
    mc, done, staged = _switched()
    plan = _plan(mc, done, staged, mounts=mounts, rollouts=rollouts)
    assert _retirements(plan) == [] and plan.deletes == ()
    [waiting] = plan.retiring
    assert waiting.startswith(f"{FIRST}: ") and (mounts[0].pod if mounts else rollouts[0].name) in waiting
    assert plan.requeue_after is not None and plan.requeue_after <= RECHECK


def test_an_unused_old_copy_gets_its_cleanup_job_and_keeps_its_download_jobs() -> None:
    mc, done, staged = _switched()
    on_new = (PodMount("srv-1", "models", f"{FIRST}-{TOKEN}"),)
    plan = _plan(mc, done, staged, mounts=on_new, rollouts=(Rollout("srv", True),))
    [body] = _retirements(plan)
    fp = fingerprint(mc.spec)
    assert body["metadata"]["name"] == cleanup_job_name(mc.name, fp)
    assert body["metadata"]["labels"][MODEL_CACHE_FINGERPRINT] == fp
    args = body["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--remove" in args and args[args.index("-o") + 1].endswith(f"/{FIRST}")
    assert plan.deletes == ()
    assert plan.status["servedDirectory"]["directory"] == f"{FIRST}-{TOKEN}"


def test_a_running_cleanup_is_waited_for() -> None:
    mc, done, staged = _switched()
    plan = _plan(mc, done, staged, _cleanup(mc, "active", finished=0.0))
    assert _retirements(plan) == [] and plan.deletes == ()


def test_a_succeeded_cleanup_deletes_the_download_jobs_then_itself_with_an_event() -> None:
    mc, done, staged = _switched()
    cleanup = _cleanup(mc, "succeeded")
    plan = _plan(mc, done, staged, cleanup, now=LATER + 10)
    assert [d.name for d in plan.deletes] == [done.name, cleanup.name]
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "Retired")]
    assert FIRST in plan.events[0].message and _retirements(plan) == []
    # A crash after the download Jobs went: the cleanup Job alone is deleted, without another Event.
    rest = _plan(mc, staged, cleanup, now=LATER + 11)
    assert [d.name for d in rest.deletes] == [cleanup.name] and rest.events == ()


def test_a_failed_cleanup_is_retried_after_the_backoff_while_the_download_jobs_keep_the_record() -> None:
    mc, done, staged = _switched()
    failed = _cleanup(mc, "failed", finished=LATER + 5)
    early = _plan(mc, done, staged, failed, now=LATER + 6)
    assert early.deletes == () and early.events == ()
    late = _plan(mc, done, staged, failed, now=LATER + 5 + SETTINGS.backoff.base)
    assert [d.name for d in late.deletes] == [failed.name]
    assert [(e.type, e.reason) for e in late.events] == [("Warning", "RetirementFailed")]
    # Without its download Jobs the failed cleanup is the copy's only record: kept.
    alone = _plan(mc, staged, failed, now=LATER + 5 + SETTINGS.backoff.base)
    assert alone.deletes == ()


def test_a_converged_cache_plans_no_write() -> None:
    mc, _, staged = _switched()
    plan = _plan(mc, staged)
    assert plan.creates == () and plan.deletes == () and plan.events == ()


def test_a_superseded_restaged_copy_is_removed_under_its_own_name_and_label() -> None:
    mc, _, staged = _switched()
    mc = cache(status=_plan(mc, staged, probe=Probe(LATER, identity=THIRD)).status, refreshPolicy="OnChange")
    third = identity_token(THIRD)
    newest = job(mc, "succeeded", created=LATER + 1, finished=LATER + 50, content=third, message=_staged(THIRD))
    mc = cache(status=_plan(mc, staged, newest, now=LATER + 51).status, refreshPolicy="OnChange")
    plan = _plan(mc, staged, newest, now=LATER + 50 + GRACE + 1)
    [body] = _retirements(plan)
    fp = fingerprint(mc.spec)
    assert body["metadata"]["name"] == cleanup_job_name(mc.name, restage_fingerprint(fp, TOKEN))
    assert body["metadata"]["labels"][MODEL_CACHE_CONTENT] == TOKEN
    assert body["spec"]["template"]["metadata"]["labels"][MODEL_CACHE_CONTENT] == TOKEN
    args = body["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("-o") + 1].endswith(f"/{FIRST}-{TOKEN}")


def test_a_superseded_download_that_still_runs_is_neither_deleted_nor_cleaned() -> None:
    mc, _, staged = _switched()
    mc = cache(status=_plan(mc, staged, probe=Probe(LATER, identity=THIRD)).status, refreshPolicy="OnChange")
    # The source moved on again: a running re-staging of an older identity is past.
    moved = cache(status=_plan(mc, staged, probe=Probe(LATER + 1, identity=OLD)).status, refreshPolicy="OnChange")
    running = job(moved, "active", created=LATER, content=identity_token(THIRD))
    plan = _plan(moved, staged, running, now=LATER + 2)
    assert running.name not in [d.name for d in plan.deletes] and _retirements(plan) == []


# -- the property ----------------------------------------------------------------------------------------

_DIRS = [FIRST, f"{FIRST}-{TOKEN}", "other", ""]


@settings(deadline=None, max_examples=150)
@given(
    subs=st.lists(st.sampled_from([*_DIRS, None, f"{FIRST}/x"]), max_size=3),
    finished=st.lists(st.booleans(), max_size=3),
    old_state=st.sampled_from(["succeeded", "failed", "active"]),
    cleanup_state=st.sampled_from([None, "active", "succeeded", "failed"]),
    offset=st.floats(min_value=-60, max_value=600, allow_nan=False),
)
def test_never_removes_a_copy_a_pod_mounts_or_may_still_mount(
    subs: list[str | None],
    finished: list[bool],
    old_state: str,
    cleanup_state: str | None,
    offset: float,
) -> None:
    mc, _, staged = _switched()
    old = job(mc, old_state, pod_phase="Succeeded", message=_staged(OLD))
    jobs = [old, staged] + ([_cleanup(mc, cleanup_state)] if cleanup_state else [])
    mounts = tuple(PodMount(f"p{i}", "models", s) for i, s in enumerate(subs))
    rollouts = tuple(Rollout(f"ms{i}", f) for i, f in enumerate(finished))
    now = SWITCHED_AT + offset
    plan = _plan(mc, *jobs, now=now, mounts=mounts, rollouts=rollouts)
    served = f"{FIRST}-{TOKEN}"
    for body in _retirements(plan):
        target = body["spec"]["template"]["spec"]["containers"][0]["args"][-1].rsplit("/", 1)[-1]
        assert target != served  # the served copy is never removed
        assert not any(mounts_directory(m, "models", target) for m in mounts)
        assert all(r.finished for r in rollouts)
        assert now >= SWITCHED_AT + GRACE
        assert old.state != "active"
    deleted = {d.name for d in plan.deletes}
    assert staged.name not in deleted
    if old.name in deleted:  # the old copy's record goes only once its directory is removed
        assert cleanup_state == "succeeded"


def test_a_source_back_to_an_unretired_copy_retires_it_first_then_stages_it_again() -> None:
    mc, _, staged = _switched()
    mc = cache(status=_plan(mc, staged, probe=Probe(LATER, identity=THIRD)).status, refreshPolicy="OnChange")
    third = identity_token(THIRD)
    newest = job(mc, "succeeded", created=LATER + 1, finished=LATER + 50, content=third, message=_staged(THIRD))
    mc = cache(status=_plan(mc, staged, newest, now=LATER + 51).status, refreshPolicy="OnChange")
    now = LATER + 50 + GRACE + 1
    # The source goes back to NEW while its copy (TOKEN) is still on the storage, superseded by THIRD.
    back = _plan(mc, staged, newest, now=now, probe=Probe(now, identity=NEW))
    [body] = _retirements(back)
    assert body["metadata"]["labels"][MODEL_CACHE_CONTENT] == TOKEN  # its removal, not a download into it
    assert not [c for c in back.creates if c.kind == "Job" and c.why != RETIRE_WHY]
    mc = cache(status=back.status, refreshPolicy="OnChange")
    cleanup = _cleanup(mc, "succeeded", TOKEN, finished=now + 5)
    gone = _plan(mc, staged, newest, cleanup, now=now + 6)
    assert {d.name for d in gone.deletes} == {staged.name, cleanup.name}
    again = _plan(cache(status=gone.status, refreshPolicy="OnChange"), newest, now=now + 7)
    [download] = [c.body for c in again.creates if c.kind == "Job"]
    args = download["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("-o") + 1].endswith(f"/{FIRST}-{TOKEN}") and "--remove" not in args
