"""The child update policy: creates, no-ops, kept drift, replacements, stale and foreign children."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api import ModelServing
from kthena_py.api.validation import validate_modelserving
from kthena_py.plan.modelbooster import Observed, Remove, Write, expand, plan_children
from kthena_py.plan.modelbooster.children import Kind, contains
from kthena_py.plan.modelbooster.naming import ANNOTATION_REPLICAS
from kthena_py.vocab.labels import BOOSTER_PREFETCH, MODEL_CACHE

from .builders import UID, booster_doc, parse, worker

SETTINGS = settings(max_examples=80, deadline=None, database=None)
ALL: frozenset[Kind] = frozenset({"ModelServing", "ModelServer", "ModelRoute"})


def stored(body: dict[str, Any], n: int = 1) -> dict[str, Any]:
    """What the API server would return for an applied body: server fields, CRD defaults, extra managers' fields."""
    obj = copy.deepcopy(body)
    md = obj["metadata"]
    md.update({"uid": f"uid-{md['name']}-{n}", "resourceVersion": str(100 + n), "generation": n})
    md.setdefault("labels", {})["team"] = "added-by-someone-else"
    if obj["kind"] == "ModelServing":
        obj["spec"].setdefault("schedulerName", "volcano")
        obj["spec"]["recoveryPolicy"] = "RoleRecreate"
        for role in obj["spec"]["template"]["roles"]:
            for c in role["entryTemplate"]["spec"]["containers"]:
                for port in c.get("ports") or []:
                    port.setdefault("protocol", "TCP")
        obj["status"] = {"conditions": [{"type": "Available", "status": "True"}]}
    if obj["kind"] == "ModelRoute":
        for rule in obj["spec"]["rules"]:
            for target in rule["targetModels"]:
                target.setdefault("weight", 100)
    return obj


def observed(*objects: dict[str, Any], served: frozenset[Kind] = ALL) -> Observed:
    by_kind: dict[str, list[dict[str, Any]]] = {
        "ModelServing": [],
        "ModelServer": [],
        "ModelRoute": [],
        "ModelCache": [],
    }
    for obj in objects:
        by_kind[obj["kind"]].append(obj)
    return Observed(
        tuple(by_kind["ModelServing"]),
        tuple(by_kind["ModelServer"]),
        tuple(by_kind["ModelRoute"]),
        served,
        tuple(by_kind["ModelCache"]),
    )


def converge(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The stored children after the first reconcile of ``doc`` on an empty cluster."""
    plan = plan_children(UID, expand(parse(doc)), observed())
    return [stored(step.body) for step in plan.steps if isinstance(step, Write)]


def test_empty_cluster_creates_the_three_children_in_kthenas_order() -> None:
    plan = plan_children(UID, expand(parse(booster_doc())), observed())
    assert [(type(s).__name__, s.kind, s.name, getattr(s, "create", None)) for s in plan.steps] == [
        ("Write", "ModelServing", "mb-backend1", True),
        ("Write", "ModelServer", "mb-backend1", True),
        ("Write", "ModelRoute", "mb", True),
    ]
    ms = plan.steps[0]
    assert isinstance(ms, Write)
    assert json.loads(ms.body["metadata"]["annotations"][ANNOTATION_REPLICAS]) == {
        "replicas": 1,
        "roles": {"leader": 1},
    }
    assert "resourceVersion" not in ms.body["metadata"]


def test_converged_children_need_no_write() -> None:
    doc = booster_doc(worker(replicas=1, pods=2, config={"port": 9000}))
    plan = plan_children(UID, expand(parse(doc)), observed(*converge(doc)))
    assert plan.steps == () and plan.foreign == () and plan.modelserving is not None


def test_unserved_networking_kinds_are_skipped() -> None:
    plan = plan_children(UID, expand(parse(booster_doc())), observed(served=frozenset({"ModelServing"})))
    assert [s.kind for s in plan.steps] == ["ModelServing"]
    assert plan.unserved == ("ModelServer", "ModelRoute")


def _ms(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "ModelServing")


def test_replicas_scaled_by_others_are_kept() -> None:
    doc = booster_doc(worker(replicas=1), replicas=1)
    live = converge(doc)
    _ms(live)["spec"]["replicas"] = 5  # the scale subresource
    _ms(live)["spec"]["template"]["roles"][0]["replicas"] = 3  # an autoscaler patching the role
    assert plan_children(UID, expand(parse(doc)), observed(*live)).steps == ()
    # Another change is written with the live counts.
    changed = booster_doc(worker(replicas=1, image="vllm/vllm-openai:v0.11.0"), replicas=1)
    (write,) = [s for s in plan_children(UID, expand(parse(changed)), observed(*live)).steps if isinstance(s, Write)]
    assert write.kind == "ModelServing" and not write.create
    assert write.body["spec"]["replicas"] == 5 and write.body["spec"]["template"]["roles"][0]["replicas"] == 3
    assert write.body["metadata"]["resourceVersion"] == _ms(live)["metadata"]["resourceVersion"]


def test_the_boosters_own_replica_changes_are_applied() -> None:
    live = converge(booster_doc(worker(replicas=1), replicas=1))
    _ms(live)["spec"]["replicas"] = 5
    (write,) = plan_children(UID, expand(parse(booster_doc(worker(replicas=1), replicas=2))), observed(*live)).steps
    assert isinstance(write, Write)
    assert write.body["spec"]["replicas"] == 2
    assert json.loads(write.body["metadata"]["annotations"][ANNOTATION_REPLICAS])["replicas"] == 2
    (write,) = plan_children(UID, expand(parse(booster_doc(worker(replicas=4), replicas=1))), observed(*live)).steps
    assert isinstance(write, Write)
    assert write.body["spec"]["replicas"] == 5  # unchanged in the booster: kept
    assert write.body["spec"]["template"]["roles"][0]["replicas"] == 4
    # The gang minimum is immutable in the ModelServing: the live one is kept.
    assert write.body["spec"]["template"]["gangPolicy"] == {"minRoleReplicas": {"leader": 1}}


def test_children_without_the_record_keep_their_live_counts() -> None:
    live = converge(booster_doc(worker(replicas=1), replicas=1))
    del _ms(live)["metadata"]["annotations"][ANNOTATION_REPLICAS]
    _ms(live)["spec"]["replicas"] = 7
    (write,) = plan_children(UID, expand(parse(booster_doc(worker(replicas=1), replicas=2))), observed(*live)).steps
    assert isinstance(write, Write) and write.body["spec"]["replicas"] == 7


def test_model_name_change_deletes_the_route() -> None:
    live = converge(booster_doc(spec={"name": "first"}))
    plan = plan_children(UID, expand(parse(booster_doc(spec={"name": "second"}))), observed(*live))
    (step,) = plan.steps
    assert isinstance(step, Remove) and (step.kind, step.name, step.uid) == ("ModelRoute", "mb", "uid-mb-1")
    assert "modelName changed from 'first' to 'second'" in step.why


def test_role_name_change_replaces_the_modelserving() -> None:
    live = converge(booster_doc())
    pd = booster_doc(worker("prefill", replicas=1), worker("decode", replicas=1), type_="vLLMDisaggregated")
    steps = plan_children(UID, expand(parse(pd)), observed(*live)).steps
    assert isinstance(steps[0], Remove) and steps[0].kind == "ModelServing"
    assert "role names are immutable" in steps[0].why


def test_renamed_backend_creates_the_new_children_then_deletes_the_old() -> None:
    live = converge(booster_doc(backend="old"))
    steps = plan_children(UID, expand(parse(booster_doc(backend="new"))), observed(*live)).steps
    assert [(type(s).__name__, s.kind, s.name) for s in steps] == [
        ("Write", "ModelServing", "mb-new"),
        ("Remove", "ModelServing", "mb-old"),
        ("Write", "ModelServer", "mb-new"),
        ("Remove", "ModelServer", "mb-old"),
        ("Write", "ModelRoute", "mb"),
    ]


def test_foreign_children_are_never_touched() -> None:
    live = converge(booster_doc())
    for obj in live:
        obj["metadata"]["ownerReferences"] = [{**obj["metadata"]["ownerReferences"][0], "uid": "someone-else"}]
    plan = plan_children(UID, expand(parse(booster_doc(worker(replicas=2)))), observed(*live))
    assert plan.steps == () and plan.modelserving is None
    assert plan.foreign[0] == "ModelServing mb-backend1 already exists and is not controlled by this ModelBooster"
    assert len(plan.foreign) == 3


def test_a_child_being_deleted_is_waited_for() -> None:
    live = converge(booster_doc())
    _ms(live)["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    plan = plan_children(UID, expand(parse(booster_doc())), observed(*live))
    assert plan.steps == () and plan.waiting == ("ModelServing mb-backend1",)


def test_drift_on_rendered_fields_is_written_back() -> None:
    live = converge(booster_doc())
    server = next(o for o in live if o["kind"] == "ModelServer")
    server["spec"]["workloadPort"]["port"] = 1234
    (step,) = plan_children(UID, expand(parse(booster_doc())), observed(*live)).steps
    assert isinstance(step, Write) and step.kind == "ModelServer" and step.body["spec"]["workloadPort"]["port"] == 8000


def test_contains() -> None:
    assert contains({"a": 1, "b": 2}, {"a": 1})
    assert not contains({"a": 1}, {"a": 1, "b": 2})
    assert contains([{"name": "x", "v": 1, "w": 2}, {"name": "y"}], [{"name": "x", "v": 1}])
    assert not contains([{"name": "x", "v": 2}], [{"name": "x", "v": 1}])
    assert not contains(["a", "b"], ["a"])
    assert contains([{"p": 1, "q": 2}], [{"p": 1}])
    assert not contains(1, True) and not contains(True, 1) and contains(False, False)
    assert not contains("1", 1)


# -- properties --------------------------------------------------------------------------------------------


@st.composite
def boosters(draw: st.DrawFn) -> dict[str, Any]:
    doc = draw(plain_boosters())
    return prefetching(doc) if draw(st.booleans()) else doc


@st.composite
def plain_boosters(draw: st.DrawFn) -> dict[str, Any]:
    port = draw(st.sampled_from([None, 8000, 9000, "9100"]))
    config: dict[str, Any] = {} if port is None else {"port": port}
    if draw(st.booleans()):
        config["served-model-name"] = "served"
    cache = draw(st.sampled_from([None, "pvc://models", "hostpath://tmp/cache"]))
    scheduler = draw(st.sampled_from([None, "volcano", "default-scheduler"]))
    extra: dict[str, Any] = {} if scheduler is None else {"schedulerName": scheduler}
    gpus = draw(st.integers(0, 8))
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else None
    if draw(st.booleans()):
        w = worker(replicas=draw(st.integers(0, 3)), pods=draw(st.integers(0, 4)), config=config, resources=resources)
        return booster_doc(w, cache_uri=cache, replicas=draw(st.integers(0, 5)), **extra)
    kv = draw(st.sampled_from([None, "MooncakeConnector", "NixlConnector"]))
    kv_p = {} if kv is None else {"kv-transfer-config": json.dumps({"kv_connector": kv, "kv_role": "kv_producer"})}
    kv_d = {} if kv is None else {"kv-transfer-config": json.dumps({"kv_connector": kv, "kv_role": "kv_consumer"})}
    workers = [
        worker("prefill", replicas=draw(st.integers(0, 3)), config={**config, **kv_p}, resources=resources),
        worker("decode", replicas=draw(st.integers(0, 3)), config={**config, **kv_d}, resources=resources),
    ]
    return booster_doc(*workers, type_="vLLMDisaggregated", cache_uri=cache, replicas=draw(st.integers(0, 5)), **extra)


@SETTINGS
@given(boosters(), st.integers(0, 9), st.integers(0, 9))
def test_one_reconcile_converges_and_others_scaling_is_never_reverted(
    doc: dict[str, Any], scaled: int, role_scaled: int
) -> None:
    live = converge(doc)
    assert len(live) == 3 + (expand(parse(doc)).modelcache is not None)  # hostpath:// and pvc:// caches map
    # Whatever others do to the replica counts, a second reconcile has nothing to write.
    _ms(live)["spec"]["replicas"] = scaled
    _ms(live)["spec"]["template"]["roles"][0]["replicas"] = role_scaled
    assert plan_children(UID, expand(parse(doc)), observed(*live)).steps == ()


@SETTINGS
@given(boosters(), st.integers(0, 5), st.integers(0, 3))
def test_replica_changes_never_touch_the_pod_templates(doc: dict[str, Any], replicas: int, role: int) -> None:
    live = converge(doc)
    changed = copy.deepcopy(doc)
    changed["spec"]["backend"]["replicas"] = replicas
    changed["spec"]["backend"]["workers"][0]["replicas"] = role
    writes = [s for s in plan_children(UID, expand(parse(changed)), observed(*live)).steps if isinstance(s, Write)]
    assert all(w.kind == "ModelServing" for w in writes)
    for write in writes:
        new_roles, old_roles = write.body["spec"]["template"]["roles"], _ms(live)["spec"]["template"]["roles"]
        for new, old in zip(new_roles, old_roles, strict=True):
            assert new["entryTemplate"]["metadata"] == old["entryTemplate"]["metadata"]
            assert contains(old["entryTemplate"], new["entryTemplate"])
            assert new.get("workerTemplate") == old.get("workerTemplate")


@SETTINGS
@given(boosters())
def test_every_expansion_is_valid_and_labelled_for_routing(doc: dict[str, Any]) -> None:
    children = expand(parse(doc))
    ms = ModelServing.model_validate(children.modelserving)
    assert validate_modelserving(ms) == []
    selector = children.modelserver["spec"]["workloadSelector"]["matchLabels"]
    for role in children.modelserving["spec"]["template"]["roles"]:
        for template in ("entryTemplate", "workerTemplate"):
            labels = (role.get(template) or {}).get("metadata", {}).get("labels")
            if labels is not None:
                assert labels["workload.serving.volcano.sh/model-uid"] == UID
    assert selector["workload.serving.volcano.sh/model-uid"] == UID


# -- the prefetch opt-in's ModelCache -------------------------------------------------------------------------


def prefetching(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["annotations"] = {BOOSTER_PREFETCH: "true"}
    return doc


def kinds_of(steps: Any) -> list[tuple[str, str, str]]:
    return [(type(s).__name__, s.kind, s.name) for s in steps]


def test_the_cache_is_created_before_the_modelserving_that_waits_for_it() -> None:
    plan = plan_children(UID, expand(parse(prefetching(booster_doc()))), observed())
    assert kinds_of(plan.steps) == [
        ("Write", "ModelCache", "mb-backend1"),
        ("Write", "ModelServing", "mb-backend1"),
        ("Write", "ModelServer", "mb-backend1"),
        ("Write", "ModelRoute", "mb"),
    ]
    assert plan.steps[1].body["metadata"]["annotations"][MODEL_CACHE] == "mb-backend1"  # type: ignore[union-attr]


def test_a_converged_prefetching_booster_plans_nothing() -> None:
    doc = prefetching(booster_doc())
    live = converge(doc)
    cache = next(o for o in live if o["kind"] == "ModelCache")
    cache["spec"]["maxWorkers"] = 8  # the CRD's default
    assert plan_children(UID, expand(parse(doc)), observed(*live)).steps == ()


def test_a_changed_cache_storage_replaces_the_cache() -> None:
    live = converge(prefetching(booster_doc(cache_uri="pvc://old")))
    plan = plan_children(UID, expand(parse(prefetching(booster_doc(cache_uri="pvc://new")))), observed(*live))
    first = plan.steps[0]
    assert isinstance(first, Remove) and (first.kind, first.name) == ("ModelCache", "mb-backend1")
    assert "storage" in first.why and first.uid == "uid-mb-backend1-1"
    # The ModelServing is updated to the new cacheURI in the same pass (it stays gated on the same name).
    assert ("Write", "ModelServing", "mb-backend1") in kinds_of(plan.steps)


def test_removing_the_opt_in_deletes_the_cache_first_and_holds_the_modelserving_until_it_is_gone() -> None:
    gated = converge(prefetching(booster_doc()))
    plain = expand(parse(booster_doc()))
    plan = plan_children(UID, plain, observed(*gated))
    assert kinds_of(plan.steps) == [("Remove", "ModelCache", "mb-backend1")]
    assert plan.steps[0].why == "the booster no longer prefetches"  # type: ignore[union-attr]
    (held,) = plan.waiting
    assert "ModelServing mb-backend1" in held and "ModelCache mb-backend1" in held
    assert plan.modelserving is not None  # the status still reads it
    # While the cache's cleanup runs (deletionTimestamp), nothing is written.
    going = [copy.deepcopy(o) for o in gated]
    for o in going:
        if o["kind"] == "ModelCache":
            o["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    plan = plan_children(UID, plain, observed(*going))
    assert plan.steps == () and len(plan.waiting) == 1
    # Once it is gone, the ModelServing returns to the per-pod downloader (a rollout) and loses the annotation.
    rest = [o for o in gated if o["kind"] != "ModelCache"]
    plan = plan_children(UID, plain, observed(*rest))
    (write,) = plan.steps
    assert isinstance(write, Write) and write.kind == "ModelServing"
    assert MODEL_CACHE not in write.body["metadata"]["annotations"]
    assert write.body["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["initContainers"]


def test_a_foreign_cache_of_the_name_is_reported_and_the_modelserving_is_not_gated_on_it() -> None:
    doc = prefetching(booster_doc())
    cache = stored(expand(parse(doc)).modelcache or {})
    cache["metadata"]["ownerReferences"] = [{"kind": "X", "name": "x", "uid": "other", "controller": True}]
    plan = plan_children(UID, expand(parse(doc)), observed(cache))
    assert plan.foreign == ("ModelCache mb-backend1 already exists and is not controlled by this ModelBooster",)
    assert [s.kind for s in plan.steps] == ["ModelServer", "ModelRoute"]
    assert any("not this booster's" in w for w in plan.waiting)


def test_a_booster_that_never_prefetched_ignores_caches_it_does_not_control() -> None:
    doc = booster_doc()
    other = stored(expand(parse(prefetching(doc))).modelcache or {})
    other["metadata"]["ownerReferences"] = [{"kind": "X", "name": "x", "uid": "other", "controller": True}]
    plan = plan_children(UID, expand(parse(doc)), observed(other))
    assert [s.kind for s in plan.steps] == ["ModelServing", "ModelServer", "ModelRoute"]
    assert plan.foreign == () and plan.waiting == ()
