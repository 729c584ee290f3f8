"""plan_cache: phases, conditions, Events, retries with backoff, storage, prefetch, node-local fan-out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kthena_py.api.modelcache import ModelCache
from kthena_py.plan.modelcache import (
    Backoff,
    CachePlan,
    ClaimView,
    JobSettings,
    Observed,
    PlanSettings,
    download_job_name,
    fingerprint,
    plan_cache,
    retry_delay,
)
from kthena_py.plan.modelcache.views import JobView

from .builders import NODE_LOCAL, SHA_A, TEMPLATE, cache, job, node, result

CLAIM = ClaimView("models", "Bound", False)
SETTINGS = PlanSettings()


def _conditions(plan: CachePlan) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in plan.status["conditions"]}


def _plan(mc: ModelCache, *jobs: JobView, now: float = 1000.0, **observed: Any) -> CachePlan:
    observed.setdefault("claim", CLAIM)
    return plan_cache(mc, Observed(jobs=tuple(jobs), **observed), SETTINGS, now)


def _settle(mc: ModelCache, plan: CachePlan) -> ModelCache:
    """The cache as it reads after the plan's status was written."""
    return cache(status=plan.status, **mc.spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True))


def test_a_new_cache_starts_one_download_job_with_its_podgroup() -> None:
    mc = cache()
    plan = _plan(mc)
    name = download_job_name("llama", fingerprint(mc.spec))
    assert [(c.kind, c.name) for c in plan.creates] == [("PodGroup", name), ("Job", name)]
    assert plan.status["phase"] == "Pending" and plan.status["jobName"] == name
    assert _conditions(plan) == {
        "Ready": ("False", "Pending"),
        "Progressing": ("True", "Pending"),
        "Degraded": ("False", "NoFailure"),
    }
    assert plan.status["observedGeneration"] == 2 and plan.status["path"].startswith("pvc://models/")
    assert plan.requeue_after == SETTINGS.progress_interval and plan.events == ()


def test_no_podgroup_without_volcano() -> None:
    plan = plan_cache(cache(), Observed(claim=CLAIM), PlanSettings(job=JobSettings(scheduler_name="other")), 0.0)
    assert [c.kind for c in plan.creates] == ["Job"]


def test_a_running_download_reports_its_progress_and_says_so_once() -> None:
    from kthena_py.api.modelcache import DownloadProgress

    mc = cache()
    running = job(mc, "active")
    progress = {running.name: DownloadProgress(bytes_done=5, bytes_total=10, files_done=0, percent="50%")}
    plan = _plan(mc, running, progress=progress)
    assert plan.creates == () and plan.status["phase"] == "Downloading"
    assert plan.status["progress"]["percent"] == "50%"
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "Downloading")]
    again = _plan(_settle(mc, plan), running, progress=progress)
    assert again.events == () and again.status == plan.status


def test_a_started_job_whose_pod_waits_is_pending() -> None:
    mc = cache()
    plan = _plan(mc, job(mc, "active", pod_phase="Pending"))
    assert plan.status["phase"] == "Pending" and plan.creates == ()


def test_a_succeeded_job_makes_the_cache_ready_with_files_digests_and_size() -> None:
    mc = cache()
    done = job(mc, "succeeded", pod_phase="Succeeded", message=result())
    plan = _plan(mc, done)
    status = plan.status
    assert status["phase"] == "Ready" and "progress" not in status
    assert status["size"] == "2.0 GiB" and status["sizeBytes"] == 2 * 1024**3 + 512
    assert [f["name"] for f in status["files"]] == ["config.json", "model.safetensors"]
    assert status["revision"] == "abc123" and status["jobName"] == done.name
    assert _conditions(plan) == {
        "Ready": ("True", "Cached"),
        "Progressing": ("False", "Cached"),
        "Degraded": ("False", "NoFailure"),
    }
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "Cached")]
    # The next look is the source's first revalidation: one hour (the default) plus the cache's jitter.
    assert plan.requeue_after is not None and 3600 <= plan.requeue_after < 3600 * 1.1
    # Converged: the pod may be gone, the status and its transition times stay, nothing is said again.
    settled = _settle(mc, plan)
    again = plan_cache(settled, Observed(jobs=(job(mc, "succeeded", pod_phase=None),), claim=CLAIM), SETTINGS, 5000.0)
    assert again.status == status and again.events == () and again.creates == () and again.deletes == ()


@pytest.mark.parametrize(
    ("message", "reason", "text"),
    [
        (
            result(False, "IntegrityCheckFailed", "model.safetensors: sha256 differs"),
            "IntegrityCheckFailed",
            "IntegrityCheckFailed: model.safetensors: sha256 differs",
        ),
        (result(False, "SourceNotFound", "404 from the hub"), "DownloadFailed", "SourceNotFound: 404 from the hub"),
        (
            "Traceback...\nOSError: No space left on device",
            "DownloadFailed",
            "download failed (exit code 1): Traceback... | OSError: No space left on device",
        ),
        (None, "DownloadFailed", "Job has reached the specified backoff limit"),
    ],
)
def test_a_failed_job_degrades_the_cache_with_the_pods_words(message: str | None, reason: str, text: str) -> None:
    mc = cache()
    failed = job(mc, "failed", pod_phase="Failed", message=message, finished=990.0)
    plan = _plan(mc, failed, now=995.0)
    assert plan.status["phase"] == "Failed" and plan.creates == ()
    degraded = next(c for c in plan.status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", reason) and text in degraded["message"]
    assert _conditions(plan)["Ready"] == ("False", reason)
    assert _conditions(plan)["Progressing"] == ("True", "Pending")  # a retry is scheduled
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", reason)]
    assert plan.requeue_after == pytest.approx(5.0)  # 990 + 10 s base - 995


def test_the_retry_is_a_new_deterministic_job_and_keeps_the_failure_visible() -> None:
    mc = cache()
    first = job(mc, "failed", message=result(False, "DownloadFailed", "timeout"), finished=990.0, pod_phase="Failed")
    plan = _plan(mc, first, now=1000.0)
    retry = download_job_name("llama", fingerprint(mc.spec), attempt=1)
    assert [c.name for c in plan.creates if c.kind == "Job"] == [retry]
    assert plan.status["phase"] == "Pending" and _conditions(plan)["Degraded"] == ("True", "DownloadFailed")
    second = job(mc, "active", attempt=1, name=retry)
    running = _plan(_settle(mc, plan), first, second, now=1010.0)
    assert running.creates == () and running.status["phase"] == "Downloading"
    assert _conditions(running)["Degraded"] == ("True", "DownloadFailed")
    done = _plan(mc, first, job(mc, "succeeded", attempt=1, name=retry, message=result()), now=1100.0)
    assert done.status["phase"] == "Ready" and _conditions(done)["Degraded"] == ("False", "NoFailure")
    assert [d.name for d in done.deletes] == [first.name]


@pytest.mark.parametrize(("failures", "delay"), [(0, 0.0), (1, 10.0), (2, 20.0), (3, 40.0), (7, 600.0), (500, 600.0)])
def test_backoff_doubles_up_to_the_cap(failures: int, delay: float) -> None:
    assert retry_delay(failures, Backoff(10.0, 600.0)) == delay


# Job timestamps are whole seconds (RFC 3339 without a fraction), so the failure time is one too.
@given(st.integers(0, 40), st.integers(0, 10_000), st.floats(0, 20_000))
@example(6, 0, 600.0)  # a failure at time 0, due exactly now (the builder once read 0 as "not given")
def test_a_failure_is_never_retried_before_its_backoff(attempt: int, failed_at: int, now: float) -> None:
    mc = cache()
    failed = job(mc, "failed", attempt=attempt, finished=failed_at, message=result(False, "DownloadFailed", "x"))
    plan = _plan(mc, failed, now=now)
    due = failed_at + retry_delay(attempt + 1, SETTINGS.backoff)
    created = [c for c in plan.creates if c.kind == "Job"]
    assert bool(created) == (now >= due)
    if not created:
        assert plan.requeue_after is not None and plan.requeue_after >= min(0.5, due - now)


def test_an_unsupported_source_is_not_retried_until_the_spec_changes() -> None:
    mc = cache()
    failed = job(mc, "failed", message=result(False, "UnsupportedSource", "ms:// needs modelscope"))
    plan = _plan(mc, failed, now=1e9)
    assert plan.creates == () and plan.requeue_after is None
    assert _conditions(plan)["Progressing"][0] == "False"
    changed = cache(source="hf://org/other")
    replan = _plan(changed, failed, now=1e9)
    assert [c.kind for c in replan.creates] == ["PodGroup", "Job"]
    assert [d.name for d in replan.deletes] == [failed.name]


def test_a_spec_change_replaces_the_running_job() -> None:
    old = cache()
    running = job(old, "active")
    new = cache(revision="v2")
    plan = _plan(new, running)
    assert [d.name for d in plan.deletes] == [running.name]
    assert [c.name for c in plan.creates if c.kind == "Job"] == [download_job_name("llama", fingerprint(new.spec))]


@pytest.mark.parametrize(
    ("claim", "text"),
    [
        (None, "persistentVolumeClaim models not found"),
        (ClaimView("models", "Lost", False), "persistentVolumeClaim models lost its volume"),
        (ClaimView("models", "Bound", True), "persistentVolumeClaim models is being deleted"),
    ],
)
def test_an_unusable_claim_is_storage_unavailable_and_starts_nothing(claim: ClaimView | None, text: str) -> None:
    plan = plan_cache(cache(), Observed(claim=claim), SETTINGS, 0.0)
    assert plan.creates == () and plan.status["phase"] == "Failed"
    degraded = next(c for c in plan.status["conditions"] if c["type"] == "Degraded")
    assert (degraded["reason"], degraded["message"]) == ("StorageUnavailable", text)
    assert [(e.type, e.reason, e.message) for e in plan.events] == [("Warning", "StorageUnavailable", text)]


def test_a_template_cache_creates_its_claim_then_its_job() -> None:
    mc = cache(storage=TEMPLATE)
    plan = plan_cache(mc, Observed(), SETTINGS, 0.0)
    assert [c.kind for c in plan.creates] == ["PersistentVolumeClaim", "PodGroup", "Job"]
    foreign = plan_cache(mc, Observed(claim=ClaimView("llama-cache", "Bound", False, ("someone",))), SETTINGS, 0.0)
    assert foreign.creates == () and _conditions(foreign)["Degraded"] == ("True", "StorageUnavailable")
    mine = plan_cache(mc, Observed(claim=ClaimView("llama-cache", "Pending", False, ("cache-uid",))), SETTINGS, 0.0)
    assert [c.kind for c in mine.creates] == ["PodGroup", "Job"]  # a Pending claim binds when its pod is scheduled


def test_prefetch_false_waits_for_a_modelserving() -> None:
    mc = cache(prefetch=False)
    waiting = _plan(mc)
    assert waiting.creates == () and waiting.status["phase"] == "Pending" and waiting.requeue_after is None
    assert (
        "waiting for a ModelServing"
        in next(c for c in waiting.status["conditions"] if c["type"] == "Progressing")["message"]
    )
    asked = _plan(mc, requested=True)
    assert [c.kind for c in asked.creates] == ["PodGroup", "Job"]


def test_node_local_fans_out_to_ready_matching_nodes_and_lists_where_it_is_ready() -> None:
    mc = cache(storage=NODE_LOCAL, sha256=SHA_A)
    nodes = (node("a", gpu="true"), node("b", gpu="true"), node("c", ready=False, gpu="true"), node("d"))
    plan = _plan(mc, nodes=nodes)
    jobs = [c for c in plan.creates if c.kind == "Job"]
    assert [j.body["metadata"]["annotations"] for j in jobs] == [
        {"modelcache.serving.kthena-py.io/node": n} for n in ("a", "b")
    ]
    done_a = job(mc, "succeeded", node="a", message=result())
    running_b = job(mc, "active", node="b")
    orphan = job(mc, "active", node="gone")
    staged_there = job(mc, "succeeded", node="left", message=result())
    later = _plan(mc, done_a, running_b, orphan, staged_there, nodes=nodes)
    assert later.status["phase"] == "Ready" and later.status["nodes"] == ["a"]
    # the download on a node that left stops; a finished one stays as the record of its files
    assert later.creates == () and [d.name for d in later.deletes] == [orphan.name]
    assert later.requeue_after == SETTINGS.progress_interval  # b still downloads
    grown = (*nodes, node("e", gpu="true"))
    more = _plan(mc, done_a, job(mc, "succeeded", node="b", message=result()), nodes=grown)
    assert more.status["nodes"] == ["a", "b"]
    assert [c.body["metadata"]["annotations"] for c in more.creates if c.kind == "Job"] == [
        {"modelcache.serving.kthena-py.io/node": "e"}
    ]


@pytest.mark.parametrize("state", ["succeeded", "active", "failed"])
def test_a_node_that_leaves_the_selector_keeps_its_job_but_is_no_longer_a_unit(state: str) -> None:
    mc = cache(storage=NODE_LOCAL)
    nodes = (node("a", gpu="true"), node("b"))  # b lost the label
    done_a = job(mc, "succeeded", node="a", message=result())
    left_b = job(mc, state, node="b", message=result() if state == "succeeded" else None, finished=900.0)
    plan = _plan(mc, done_a, left_b, nodes=nodes)
    assert plan.deletes == () and plan.creates == ()  # its Job is the record that b holds files; no retry there
    assert plan.status["phase"] == "Ready" and plan.status["nodes"] == ["a"]
    assert not any(c["type"] == "Degraded" and c["status"] == "True" for c in plan.status["conditions"])
    # Nothing of the cache's own runs: the only next look is the source's revalidation (one hour and the jitter).
    assert plan.requeue_after is not None and plan.requeue_after >= 3600
    back = _plan(mc, done_a, left_b, nodes=(node("a", gpu="true"), node("b", gpu="true")))
    assert back.status["nodes"] == (["a", "b"] if state == "succeeded" else ["a"])


def test_node_local_failure_on_one_node_degrades_but_keeps_ready() -> None:
    mc = cache(storage=NODE_LOCAL)
    nodes = (node("a", gpu="true"), node("b", gpu="true"))
    failed_b = job(mc, "failed", node="b", message=result(False, "IntegrityCheckFailed", "bad"), finished=999.0)
    plan = _plan(mc, job(mc, "succeeded", node="a", message=result()), failed_b, nodes=nodes)
    assert plan.status["phase"] == "Ready" and plan.status["nodes"] == ["a"]
    degraded = next(c for c in plan.status["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "IntegrityCheckFailed" and degraded["message"].startswith("on node(s) b:")


def test_node_local_without_a_ready_matching_node_is_storage_unavailable() -> None:
    mc = cache(storage=NODE_LOCAL)
    plan = _plan(mc, nodes=(node("x"), node("c", ready=False, gpu="true")))
    assert plan.creates == () and plan.status["phase"] == "Failed"
    assert _conditions(plan)["Degraded"] == ("True", "StorageUnavailable")
