"""plan_deletion: cleanup Jobs, in-use waits, and a finalizer that never outlives its bound."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.modelcache import ClaimView, Observed, PlanSettings, cleanup_job_name, fingerprint, plan_deletion

from .builders import NODE_LOCAL, TEMPLATE, cache, job, node

CLAIM = ClaimView("models", "Bound", False)
SETTINGS = PlanSettings(cleanup_timeout=300.0)


def _events(plan: object) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in plan.events]  # type: ignore[attr-defined]


def test_a_claim_cache_runs_one_cleanup_job_then_lets_go() -> None:
    mc = cache()
    running = job(mc, "active")
    start = plan_deletion(mc, Observed(jobs=(running,), claim=CLAIM), SETTINGS, 10.0, 0.0)
    name = cleanup_job_name("llama", fingerprint(mc.spec))
    assert [(c.kind, c.name) for c in start.creates] == [("PodGroup", name), ("Job", name)]
    assert [d.name for d in start.deletes] == [running.name]  # no more writes into the storage
    assert not start.remove_finalizer and start.requeue_after == 290.0
    cleaning = job(mc, "active", kind="cleanup", name=name)
    assert not plan_deletion(mc, Observed(jobs=(cleaning,), claim=CLAIM), SETTINGS, 20.0, 0.0).remove_finalizer
    cleaned = job(mc, "succeeded", kind="cleanup", name=name)
    done = plan_deletion(mc, Observed(jobs=(cleaned,), claim=CLAIM), SETTINGS, 30.0, 0.0)
    assert done.remove_finalizer and _events(done) == [("Normal", "CleanupSucceeded")]


def test_a_failed_cleanup_abandons_with_a_warning_naming_the_path() -> None:
    mc = cache()
    name = cleanup_job_name("llama", fingerprint(mc.spec))
    plan = plan_deletion(
        mc, Observed(jobs=(job(mc, "failed", kind="cleanup", name=name),), claim=CLAIM), SETTINGS, 30.0, 0.0
    )
    assert plan.remove_finalizer and _events(plan) == [("Warning", "CleanupAbandoned")]
    assert "pvc://models/" in plan.events[0].message


def test_a_missing_claim_lets_go_at_once() -> None:
    plan = plan_deletion(cache(), Observed(), SETTINGS, 1.0, 0.0)
    assert plan.remove_finalizer and plan.creates == () and _events(plan) == [("Warning", "CleanupAbandoned")]
    assert "persistentVolumeClaim models is gone" in plan.events[0].message


def test_an_owned_claim_goes_with_the_cache() -> None:
    plan = plan_deletion(cache(storage=TEMPLATE), Observed(), SETTINGS, 1.0, 0.0)
    assert plan.remove_finalizer and plan.creates == () and plan.events == ()


def test_a_cache_in_use_waits_with_a_warning_until_the_bound() -> None:
    mc = cache()
    plan = plan_deletion(mc, Observed(claim=CLAIM, in_use_by=("chat", "api")), SETTINGS, 100.0, 0.0)
    assert not plan.remove_finalizer and plan.creates == () and plan.requeue_after == 30.0
    assert _events(plan) == [("Warning", "ModelCacheInUse")] and "api, chat" in plan.events[0].message
    late = plan_deletion(mc, Observed(claim=CLAIM, in_use_by=("chat",)), SETTINGS, 300.0, 0.0)
    assert late.remove_finalizer and _events(late) == [("Warning", "CleanupAbandoned")]


def test_node_local_cleans_every_node_left_and_names_the_gone_ones() -> None:
    mc = cache(storage=NODE_LOCAL)
    had = (job(mc, "succeeded", node="a"), job(mc, "succeeded", node="gone"))
    nodes = (node("a", gpu="true"), node("b", gpu="true"))
    plan = plan_deletion(mc, Observed(jobs=had, nodes=nodes), SETTINGS, 1.0, 0.0)
    fp = fingerprint(mc.spec)
    assert [c.name for c in plan.creates if c.kind == "Job"] == [cleanup_job_name("llama", fp, n) for n in ("a", "b")]
    cleaned = tuple(job(mc, "succeeded", kind="cleanup", name=cleanup_job_name("llama", fp, n)) for n in ("a", "b"))
    done = plan_deletion(mc, Observed(jobs=had + cleaned, nodes=nodes), SETTINGS, 2.0, 0.0)
    assert done.remove_finalizer and _events(done) == [("Warning", "CleanupAbandoned")]
    assert "gone" in done.events[0].message
    nothing = plan_deletion(mc, Observed(jobs=had), SETTINGS, 1.0, 0.0)
    assert nothing.remove_finalizer and "no node is left" in nothing.events[0].message


def test_a_node_that_left_the_selector_is_cleaned_and_a_started_cleanup_is_followed() -> None:
    mc = cache(storage=NODE_LOCAL)
    nodes = (node("a", gpu="true"), node("b"))  # b left the selector, its download Job stays
    fp = fingerprint(mc.spec)
    had = (job(mc, "succeeded", node="a"), job(mc, "succeeded", node="b"))
    plan = plan_deletion(mc, Observed(jobs=had, nodes=nodes), SETTINGS, 1.0, 0.0)
    assert [c.name for c in plan.creates if c.kind == "Job"] == [cleanup_job_name("llama", fp, n) for n in ("a", "b")]
    # b's download Job is gone (stopped while it ran), but its cleanup Job was started: b is still followed.
    cleaning_b = job(mc, "active", kind="cleanup", node="b", name=cleanup_job_name("llama", fp, "b"))
    cleaned_a = job(mc, "succeeded", kind="cleanup", node="a", name=cleanup_job_name("llama", fp, "a"))
    waiting = plan_deletion(mc, Observed(jobs=(had[0], cleaned_a, cleaning_b), nodes=nodes), SETTINGS, 2.0, 0.0)
    assert not waiting.remove_finalizer and waiting.creates == ()


@given(
    st.sampled_from(["claim", "template", "node-local"]),
    st.booleans(),
    st.sampled_from(["none", "active", "failed", "succeeded"]),
    st.floats(0, 1e6),
    st.floats(0, 3600),
)
def test_the_finalizer_never_outlives_its_bound(
    storage: str, in_use: bool, cleanup: str, deleted: float, later: float
) -> None:
    spec = {"claim": {}, "template": {"storage": TEMPLATE}, "node-local": {"storage": NODE_LOCAL}}[storage]
    mc = cache(**spec)
    jobs = ()
    if cleanup != "none":
        jobs = (
            job(
                mc,
                cleanup,
                kind="cleanup",
                name=cleanup_job_name("llama", fingerprint(mc.spec), "a" if storage == "node-local" else None),
            ),
        )
    observed = Observed(jobs=jobs, claim=CLAIM, nodes=(node("a", gpu="true"),), in_use_by=("x",) if in_use else ())
    now = deleted + later
    plan = plan_deletion(mc, observed, SETTINGS, now, deleted)
    if now >= deleted + SETTINGS.cleanup_timeout:
        assert plan.remove_finalizer
    if not plan.remove_finalizer:
        assert plan.requeue_after is not None and 0 < plan.requeue_after <= deleted + SETTINGS.cleanup_timeout - now


def test_a_node_that_left_before_the_deletion_is_still_named_with_its_files() -> None:
    """The live cache keeps the finished Job of a node that left; the deletion then knows the files are there."""
    from kthena_py.plan.modelcache import plan_cache

    from .builders import result

    mc = cache(storage=NODE_LOCAL)
    staged = (job(mc, "succeeded", node="a", message=result()), job(mc, "succeeded", node="b", message=result()))
    left = (node("a", gpu="true"),)  # b was removed
    live = plan_cache(mc, Observed(jobs=staged, nodes=left), SETTINGS, 10.0)
    assert live.deletes == () and live.status["nodes"] == ["a"]
    kept = tuple(j for j in staged if j.name not in {d.name for d in live.deletes})
    nothing_left = plan_deletion(mc, Observed(jobs=kept, nodes=()), SETTINGS, 20.0, 15.0)
    assert nothing_left.remove_finalizer and _events(nothing_left) == [("Warning", "CleanupAbandoned")]
    assert nothing_left.events[0].message.endswith("on node(s) a, b")


def test_a_re_staged_copy_is_removed_beside_the_first_directory() -> None:
    from kthena_py.api.modelcache import model_dir
    from kthena_py.plan.modelcache.refresh import restage_fingerprint

    first = cache(refreshPolicy="OnChange")
    fp = fingerprint(first.spec)
    served = {"directory": f"{model_dir('hf://org/llama')}-1234abcd", "fingerprint": fp}
    mc = cache(status={"servedDirectory": served}, refreshPolicy="OnChange")
    staging = job(mc, "active", content="5678ef00")  # a re-staging that was running: stopped, then removed too
    plan = plan_deletion(mc, Observed(jobs=(staging,), claim=CLAIM), SETTINGS, 10.0, 0.0)
    outputs = {
        c.name: c.body["spec"]["template"]["spec"]["containers"][0]["args"][-1] for c in plan.creates if c.kind == "Job"
    }
    assert outputs == {
        cleanup_job_name("llama", fp): f"/kthena-cache/{model_dir('hf://org/llama')}",
        cleanup_job_name("llama", restage_fingerprint(fp, "1234abcd")): f"/kthena-cache/{served['directory']}",
        cleanup_job_name(
            "llama", restage_fingerprint(fp, "5678ef00")
        ): f"/kthena-cache/{model_dir('hf://org/llama')}-5678ef00",
    }
    assert [d.name for d in plan.deletes] == [staging.name]
    # Only when every copy's cleanup succeeded does the finalizer go.
    tokens = {c.name: c.body["metadata"]["labels"].get("modelcache.serving.kthena-py.io/content") for c in plan.creates}
    done = [job(mc, "succeeded", kind="cleanup", name=name, content=tokens[name]) for name in outputs]
    last = list(outputs)[-1]
    running = job(mc, "active", kind="cleanup", name=last, content=tokens[last])
    waiting = plan_deletion(mc, Observed(jobs=(*done[:2], running), claim=CLAIM), SETTINGS, 20.0, 0.0)
    assert not waiting.remove_finalizer and waiting.creates == ()  # the copy's own cleanup Job is its record
    assert plan_deletion(mc, Observed(jobs=tuple(done), claim=CLAIM), SETTINGS, 20.0, 0.0).remove_finalizer
