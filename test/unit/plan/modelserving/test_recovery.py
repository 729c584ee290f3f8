"""Recovery by recoveryPolicy, restart grace period and terminating pods (through plan_servinggroups)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kthena_py.plan.modelserving.core.types import Plan
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups

from .builders import NOW, VOLCANO, Cluster, created, deleted, ms_doc, parse, ref_of, role_doc

PREFILL0 = ["llama-0-prefill-0-0", "llama-0-prefill-0-1"]
PREFILL1 = ["llama-0-prefill-1-0", "llama-0-prefill-1-1"]
DECODE0 = ["llama-0-decode-0-0"]
ALL = sorted(PREFILL0 + PREFILL1 + DECODE0)


def _doc(policy: str, grace: int | None = None, prefill: int = 2) -> dict[str, Any]:
    return ms_doc(role_doc("prefill", replicas=prefill, workers=1), role_doc("decode"), policy=policy, grace=grace)


def _setup(policy: str, grace: int | None = None) -> tuple[Cluster, dict[str, Any]]:
    doc = _doc(policy, grace)
    cluster = Cluster()
    cluster.converge(parse(doc))
    assert sorted(cluster.pods()) == ALL
    return cluster, doc


def _plan(
    cluster: Cluster,
    doc: dict[str, Any],
    now: float = NOW,
    refused: frozenset[str] = frozenset(),
    foreign: frozenset[str] = frozenset(),
) -> Plan:
    ms = parse(doc)
    observed = dataclasses.replace(cluster.observed(), refused_pods=refused, foreign_pods=foreign)
    return plan_servinggroups(ms, ref_of(ms), observed, VOLCANO, now)


def _reasons(plan: Plan) -> list[str]:
    return [e.reason for e in plan.events]


# --- RoleRecreate ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "breakage",
    [
        lambda c: c.fail("llama-0-prefill-0-1", NOW - 1),
        lambda c: c.restart("llama-0-prefill-0-0", NOW - 1),
        lambda c: c.remove("llama-0-prefill-0-1"),  # worker missing while the entry exists
        lambda c: c.remove("llama-0-prefill-0-0"),  # entry missing while a worker exists
        lambda c: c.terminate("llama-0-prefill-0-1"),  # deleted by someone
        lambda c: c.set_status("llama-0-prefill-0-0", phase="Succeeded"),
    ],
)
def test_role_recreate_recreates_only_the_instance(breakage: Any) -> None:
    cluster, doc = _setup("RoleRecreate")
    breakage(cluster)
    plan = _plan(cluster, doc)
    survivors = [
        n for n in PREFILL0 if n in cluster.pods() and not cluster.pods()[n]["metadata"].get("deletionTimestamp")
    ]
    assert deleted(plan) == sorted(survivors)
    assert created(plan) == []
    assert _reasons(plan) == ["RoleRecreating"]
    assert plan.events[0].type == "Warning"
    assert plan.events[0].message.startswith("Role prefill/prefill-0 in ServingGroup llama-0 is now Recreating")
    for delete in plan.deletes:
        assert delete.uid == cluster.pods()[delete.name]["metadata"]["uid"]


def test_role_recreate_full_cycle_never_recreates_twice() -> None:
    cluster, doc = _setup("RoleRecreate")
    cluster.fail("llama-0-prefill-0-1", NOW - 1)
    old_uids = {n: cluster.pods()[n]["metadata"]["uid"] for n in ALL}
    cluster.apply(_plan(cluster, doc), graceful=True)
    # pods terminating: no second recreation, nothing created for the instance
    waiting = _plan(cluster, doc)
    assert waiting.deletes == () and waiting.creates == () and waiting.events == ()
    progressing = waiting.status["conditions"][1]  # type: ignore[index]
    assert progressing["status"] == "True"
    cluster.finish_terminating()
    rebuilt = _plan(cluster, doc)
    assert created(rebuilt) == ["llama-0-prefill-0-1", "llama-0-prefill-0-0"]  # entry last
    assert rebuilt.deletes == ()
    assert _reasons(rebuilt) == ["RoleCreating"]
    cluster.apply(rebuilt)
    assert cluster.converge(parse(doc)) == 0
    for name in PREFILL1 + DECODE0:
        assert cluster.pods()[name]["metadata"]["uid"] == old_uids[name]
    for name in PREFILL0:
        assert cluster.pods()[name]["metadata"]["uid"] != old_uids[name]


def test_whole_instance_missing_is_simply_created() -> None:
    cluster, doc = _setup("RoleRecreate")
    for name in PREFILL1:
        cluster.remove(name)
    plan = _plan(cluster, doc)
    assert plan.deletes == ()
    assert created(plan) == ["llama-0-prefill-1-1", "llama-0-prefill-1-0"]


@pytest.mark.parametrize("policy", ["RoleRecreate", "ServingGroupRecreate"])
def test_restarted_but_ready_pod_is_left_alone(policy: str) -> None:
    cluster, doc = _setup(policy)
    cluster.restart("llama-0-prefill-0-0", NOW - 100, ready=True, count=3)
    plan = _plan(cluster, doc)
    assert plan.deletes == () and plan.creates == () and plan.requeue_after is None


@pytest.mark.parametrize(
    ("since", "recreated", "requeue"),
    [
        (NOW - 10, False, 50.0),  # inside the grace period: wait
        (NOW - 60, True, None),  # exactly at the end: failed
        (NOW - 600, True, None),
    ],
)
@pytest.mark.parametrize("kind", ["failed", "restarted"])
def test_grace_period(since: float, recreated: bool, requeue: float | None, kind: str) -> None:
    cluster, doc = _setup("RoleRecreate", grace=60)
    if kind == "failed":
        cluster.fail("llama-0-prefill-0-1", since)
    else:
        cluster.restart("llama-0-prefill-0-1", since)
    plan = _plan(cluster, doc)
    assert bool(plan.deletes) is recreated
    assert plan.requeue_after == requeue


def test_pod_recovering_inside_grace_is_left_alone() -> None:
    cluster, doc = _setup("RoleRecreate", grace=60)
    cluster.not_ready("llama-0-prefill-0-1", NOW - 30)  # not ready, never restarted: not unhealthy
    assert _plan(cluster, doc).requeue_after is None
    cluster.restart("llama-0-prefill-0-1", NOW - 5, ready=True)
    plan = _plan(cluster, doc)
    assert plan.deletes == () and plan.requeue_after is None


def test_grace_falls_back_to_creation_time() -> None:
    cluster, doc = _setup("RoleRecreate", grace=60)
    cluster.set_pod_status("llama-0-prefill-0-1", {"phase": "Failed"})
    assert _plan(cluster, doc, now=NOW + 30).requeue_after == 30.0
    assert _plan(cluster, doc, now=NOW + 61).deletes


# --- ServingGroupRecreate --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "breakage",
    [
        lambda c: c.fail("llama-0-decode-0-0", NOW - 1),
        lambda c: c.terminate("llama-0-prefill-1-1"),
        lambda c: c.remove("llama-0-prefill-1-1"),
        lambda c: [c.remove(n) for n in PREFILL0],  # a whole instance gone below a live one of its role
        lambda c: c.restart("llama-0-prefill-0-1", NOW - 1),
    ],
)
def test_serving_group_recreate(breakage: Any) -> None:
    cluster, doc = _setup("ServingGroupRecreate")
    breakage(cluster)
    plan = _plan(cluster, doc)
    alive = sorted(n for n, p in cluster.pods().items() if not p["metadata"].get("deletionTimestamp"))
    assert deleted(plan) == alive
    assert plan.creates == ()
    assert _reasons(plan) == ["ServingGroupRecreating"]
    assert plan.events[0].message.startswith("ServingGroup llama-0 is now Recreating")


def test_serving_group_recreate_full_cycle() -> None:
    cluster, doc = _setup("ServingGroupRecreate")
    cluster.fail("llama-0-decode-0-0", NOW - 1)
    cluster.apply(_plan(cluster, doc), graceful=True)
    waiting = _plan(cluster, doc)
    assert waiting.deletes == () and waiting.creates == () and waiting.events == ()
    cluster.finish_terminating()
    rebuilt = _plan(cluster, doc)
    assert sorted(created(rebuilt)) == ALL
    assert "ServingGroupCreating" in _reasons(rebuilt)


def test_serving_group_recreate_role_scale_up_is_not_a_failure() -> None:
    cluster, _ = _setup("ServingGroupRecreate")
    plan = _plan(cluster, _doc("ServingGroupRecreate", prefill=3))
    assert plan.deletes == ()
    assert created(plan) == ["llama-0-prefill-2-1", "llama-0-prefill-2-0"]
    assert created(plan, "Service") == ["llama-0-prefill-2-0"]


@pytest.mark.parametrize("policy", ["RoleRecreate", "ServingGroupRecreate"])
def test_role_scaled_up_from_zero_adds_instances_without_recreating(policy: str) -> None:
    doc = ms_doc(role_doc("prefill", replicas=1, workers=1), role_doc("decode", replicas=0), policy=policy)
    cluster = Cluster()
    cluster.converge(parse(doc))
    assert sorted(cluster.pods()) == PREFILL0
    scaled = ms_doc(role_doc("prefill", replicas=1, workers=1), role_doc("decode", replicas=2), policy=policy)
    plan = _plan(cluster, scaled)
    assert plan.deletes == ()
    assert created(plan) == ["llama-0-decode-0-0", "llama-0-decode-1-0"]
    assert "ServingGroupRecreating" not in _reasons(plan)


# --- refused and foreign pods ------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["RoleRecreate", "ServingGroupRecreate", "None"])
@pytest.mark.parametrize("refused", [["llama-0-prefill-0-1"], ["llama-0-prefill-0-0"], PREFILL0])
def test_a_partly_refused_instance_is_completed_not_torn_down(policy: str, refused: list[str]) -> None:
    cluster, doc = _setup(policy)
    for name in refused:
        cluster.remove(name)  # the API server refused these pods; the rest of the instance exists
    plan = _plan(cluster, doc, refused=frozenset(refused))
    assert plan.deletes == ()
    assert sorted(created(plan)) == sorted(refused)  # retried (the applier paces the retries)
    assert not {"RoleRecreating", "ServingGroupRecreating"} & set(_reasons(plan))


def test_a_lost_pod_is_still_a_failure_next_to_a_refused_one() -> None:
    cluster, doc = _setup("RoleRecreate")
    cluster.remove("llama-0-prefill-0-1")
    plan = _plan(cluster, doc, refused=frozenset({"llama-0-prefill-1-1"}))
    assert deleted(plan) == ["llama-0-prefill-0-0"]
    assert _reasons(plan) == ["RoleRecreating"]


@pytest.mark.parametrize("policy", ["RoleRecreate", "ServingGroupRecreate", "None"])
def test_a_name_held_by_another_owner_is_waited_for(policy: str) -> None:
    cluster, doc = _setup(policy)
    cluster.remove("llama-0-prefill-0-1")
    foreign = frozenset({"llama-0-prefill-0-1"})
    plan = _plan(cluster, doc, foreign=foreign)
    assert plan.deletes == () and plan.creates == ()
    # Once the holder is gone, the pod is created; the failure condition still names it as refused.
    again = _plan(cluster, doc, refused=foreign)
    assert again.deletes == () and created(again) == ["llama-0-prefill-0-1"]


def test_a_new_group_skips_names_held_by_another_owner() -> None:
    doc = _doc("RoleRecreate")
    cluster = Cluster()
    ms = parse(doc)
    cluster.apply(plan_podgroups(ms, ref_of(ms), cluster.observed(), VOLCANO))
    plan = _plan(cluster, doc, foreign=frozenset({"llama-0-decode-0-0"}))
    assert sorted(created(plan)) == sorted(PREFILL0 + PREFILL1)


# --- None ------------------------------------------------------------------------------------------------------


def test_none_replaces_a_failed_pod_alone() -> None:
    cluster, doc = _setup("None")
    cluster.fail("llama-0-prefill-0-1", NOW - 1)
    plan = _plan(cluster, doc)
    assert deleted(plan) == ["llama-0-prefill-0-1"]
    assert plan.creates == ()
    assert _reasons(plan) == ["PodRecreating"]
    cluster.apply(plan)
    again = _plan(cluster, doc)
    assert created(again) == ["llama-0-prefill-0-1"] and again.deletes == ()


def test_none_leaves_restarts_to_the_kubelet() -> None:
    cluster, doc = _setup("None", grace=0)
    cluster.restart("llama-0-prefill-0-0", NOW - 1000, count=5)
    plan = _plan(cluster, doc)
    assert plan.deletes == () and plan.creates == ()


def test_none_waits_for_a_terminating_pod_and_recreates_a_deleted_one() -> None:
    cluster, doc = _setup("None")
    cluster.terminate("llama-0-prefill-0-0")
    cluster.remove("llama-0-prefill-1-1")
    plan = _plan(cluster, doc)
    assert plan.deletes == ()
    assert created(plan) == ["llama-0-prefill-1-1"]
    cluster.apply(plan)
    cluster.finish_terminating()
    assert created(_plan(cluster, doc)) == ["llama-0-prefill-0-0"]


def test_none_failed_pod_honours_grace() -> None:
    cluster, doc = _setup("None", grace=30)
    cluster.fail("llama-0-decode-0-0", NOW - 10)
    plan = _plan(cluster, doc)
    assert plan.deletes == () and plan.requeue_after == 20.0
