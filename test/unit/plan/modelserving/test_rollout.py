"""Rolling updates, planned purely: group and role granularity, budgets, surge, partition, stalls and the condition."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kthena_py.api.intstr import IntOrString
from kthena_py.plan.modelserving.core.rolling import Budget, UnitView, choose_updates, plan_units, resolve_budget

from .builders import ms_doc, role_doc
from .fleet import Fleet


def _group_rolling(replicas: int, **config: Any) -> dict[str, Any]:
    doc = ms_doc(role_doc("decode", workers=1), replicas=replicas)
    doc["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config}
    return doc


def _started(doc: dict[str, Any]) -> Fleet:
    fleet = Fleet(doc)
    fleet.settle()
    assert fleet.ready_groups() == doc["spec"]["replicas"]
    return fleet


# --- the arithmetic ---------------------------------------------------------------------------------------------


def test_budget_rounding() -> None:
    assert resolve_budget(10, IntOrString("25%"), IntOrString("25%"), IntOrString("25%")) == Budget(2, 3, 3)
    assert resolve_budget(3, IntOrString("50%"), None, IntOrString("1%")) == Budget(1, 0, 1)
    assert resolve_budget(4, None, None, None) == Budget(1, 0, 0)
    assert resolve_budget(4, IntOrString("x"), None, None) == Budget(1, 0, 0)


def _views(spec: str) -> list[UnitView]:
    """``"RoRn"``: one letter pair per ordinal: R ready / N not ready, o outdated / u updated."""
    return [
        UnitView(ordinal=i, live=True, updated=pair[1] == "u", ready=pair[0] == "R")
        for i, pair in enumerate(spec[j : j + 2] for j in range(0, len(spec), 2))
    ]


def test_choose_updates_takes_not_ready_outdated_first_and_respects_the_budget() -> None:
    views = _views("RoRoNoRoRo")
    budget = Budget(max_unavailable=2)
    plan = plan_units(views, 5, budget, rollout_in_progress=True)
    # group 2 is not ready: replacing it costs nothing; then one ready group (5-1 ready, floor 3) -> 1 more
    assert choose_updates(views, plan, 5, budget) == (2, 4)


def test_choose_updates_stops_when_unavailable_units_use_the_budget() -> None:
    views = _views("RuNuNuRoRo")
    budget = Budget(max_unavailable=2)
    plan = plan_units(views, 5, budget, rollout_in_progress=True)
    assert choose_updates(views, plan, 5, budget) == ()


def test_partition_protects_positions_not_ordinals() -> None:
    views = [UnitView(o, True, False, True) for o in (0, 2, 5, 7)]
    plan = plan_units(views, 4, Budget(max_unavailable=4, partition=2), rollout_in_progress=True)
    assert plan.protected == {0, 2}
    assert plan.outdated == (5, 7)


def test_surge_while_outdated_then_back_to_base_ordinals() -> None:
    budget = Budget(max_unavailable=0, max_surge=1)
    assert plan_units(_views("RoRoRo"), 3, budget, rollout_in_progress=True).desired == (0, 1, 2, 3)
    # nothing outdated, group 0 re-created but not ready yet: the surge group 3 stays
    views = [UnitView(0, True, True, False), *(UnitView(o, True, True, True) for o in (1, 2, 3))]
    assert plan_units(views, 3, budget, rollout_in_progress=True).desired == (0, 1, 2, 3)
    # all ready: the surplus goes, highest ordinal first
    views = [UnitView(o, True, True, True) for o in range(4)]
    plan = plan_units(views, 3, budget, rollout_in_progress=True)
    assert plan.desired == (0, 1, 2) and plan.remove == (3,)


# --- ServingGroupRollingUpdate ----------------------------------------------------------------------------------


def test_group_rolling_update_keeps_max_unavailable_and_converges() -> None:
    fleet = _started(_group_rolling(4, maxUnavailable=2))
    before = fleet.doc["status"]["currentRevision"]
    fleet.set_image("img:2")
    fleet.watch()
    fleet.settle()
    assert fleet.min_available is not None and fleet.min_available >= 2
    assert set(fleet.images().values()) == {"img:2"}
    assert sorted(fleet.group_pods()) == [0, 1, 2, 3]
    status = fleet.doc["status"]
    assert status["currentRevision"] == status["updateRevision"] != before
    assert status["updatedReplicas"] == 4
    condition = fleet.condition()
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "RolloutComplete")
    assert [e for e in fleet.events if e[1] == "ServingGroupUpdating"]
    assert ("Normal", "RolloutComplete") in {(e[0], e[1]) for e in fleet.events}


def test_no_condition_without_a_rollout_and_no_write_when_converged() -> None:
    fleet = _started(_group_rolling(2))
    assert fleet.condition() is None
    assert not fleet.reconcile()


def test_bad_image_stalls_with_at_most_max_unavailable_down_and_fixing_it_resumes() -> None:
    fleet = _started(_group_rolling(6, maxUnavailable=2))
    fleet.set_image("img:bad")
    fleet.watch()
    fleet.settle()
    assert fleet.ready_groups() == 4 and fleet.min_available == 4
    assert sum(1 for image in fleet.images().values() if image == "img:bad") == 4  # 2 groups x 2 pods
    condition = fleet.condition()
    assert condition is not None and condition["reason"] == "UpdateStalled" and condition["status"] == "True"
    assert "ImagePullBackOff" in condition["message"] and "llama-5" in condition["message"]
    assert any(e[:2] == ("Warning", "UpdateStalled") for e in fleet.events)
    fleet.set_image("img:3")
    fleet.settle()
    assert set(fleet.images().values()) == {"img:3"}
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]


def test_partition_keeps_first_groups_and_a_deleted_protected_group_comes_back_old() -> None:
    fleet = _started(_group_rolling(5, partition=3))
    old = fleet.doc["status"]["currentRevision"]
    fleet.set_image("img:2")
    fleet.settle()
    by_group = {g: {p["spec"]["containers"][0]["image"] for p in pods} for g, pods in fleet.group_pods().items()}
    assert by_group == {0: {"img:1"}, 1: {"img:1"}, 2: {"img:1"}, 3: {"img:2"}, 4: {"img:2"}}
    status = fleet.doc["status"]
    assert status["currentRevision"] == old != status["updateRevision"]
    assert fleet.condition()["reason"] == "PartitionReached"  # type: ignore[index]
    # a protected group that loses a pod is rebuilt on its historical revision
    fleet.cluster.remove("llama-1-decode-0-0")
    fleet.settle()
    assert fleet.images()["llama-1-decode-0-0"] == "img:1"
    # scale up during the partitioned update: new groups get the update revision
    fleet.set_spec("replicas", 7)
    fleet.settle()
    assert fleet.images()["llama-6-decode-0-0"] == "img:2"
    # scale down: updated groups (outside the partition) go first
    fleet.set_spec("replicas", 4)
    fleet.settle()
    assert sorted(fleet.group_pods()) == [0, 1, 2, 3]
    assert fleet.doc["status"]["currentRevision"] == old


def test_partition_lifted_finishes_the_rollout() -> None:
    fleet = _started(_group_rolling(3, partition=2))
    fleet.set_image("img:2")
    fleet.settle()
    fleet.set_spec("rolloutStrategy.rollingUpdateConfiguration.partition", 0)
    fleet.settle()
    assert set(fleet.images().values()) == {"img:2"}
    assert fleet.doc["status"]["currentRevision"] == fleet.doc["status"]["updateRevision"]


def test_surge_keeps_availability_at_replicas_and_ends_on_base_ordinals() -> None:
    fleet = _started(_group_rolling(4, maxUnavailable=0, maxSurge=1))
    fleet.set_image("img:2")
    fleet.watch()
    fleet.settle()
    assert fleet.min_available == 4
    assert sorted(fleet.group_pods()) == [0, 1, 2, 3]
    assert set(fleet.images().values()) == {"img:2"}
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]


def test_undo_by_reverting_the_spec_rolls_back() -> None:
    fleet = _started(_group_rolling(3))
    first = fleet.doc["status"]["currentRevision"]
    fleet.set_image("img:2")
    fleet.settle()
    fleet.set_image("img:1")
    fleet.settle()
    assert set(fleet.images().values()) == {"img:1"}
    assert fleet.doc["status"]["currentRevision"] == first


def test_interrupted_steps_never_exceed_the_budget() -> None:
    """Apply only the rollout's deletes, several times, without letting pods come up: the budget holds."""
    fleet = _started(_group_rolling(5, maxUnavailable=2))
    fleet.set_image("img:2")
    fleet.watch()
    for _ in range(5):
        fleet.reconcile()
    assert fleet.min_available == 3
    fleet.settle()
    assert set(fleet.images().values()) == {"img:2"}


# --- RoleRollingUpdate ------------------------------------------------------------------------------------------


def _role_rolling(groups: int, prefill: int, decode: int, **prefill_fields: Any) -> dict[str, Any]:
    p = role_doc("prefill", replicas=prefill) | prefill_fields
    doc = ms_doc(p, role_doc("decode", replicas=decode, workers=1), replicas=groups)
    doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    return doc


def test_role_rolling_update_replaces_only_the_changed_role() -> None:
    fleet = _started(_role_rolling(2, 2, 1))
    decode_uids = {n: u for n, u in fleet.uids().items() if "-decode-" in n}
    fleet.set_image("img:2", role=0)
    fleet.settle()
    images = fleet.images()
    assert {i for n, i in images.items() if "-prefill-" in n} == {"img:2"}
    assert {i for n, i in images.items() if "-decode-" in n} == {"img:1"}
    assert {n: u for n, u in fleet.uids().items() if "-decode-" in n} == decode_uids
    assert fleet.doc["status"]["updatedReplicas"] == 2
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]
    assert any(e[1] == "RoleUpdating" for e in fleet.events)


def test_role_max_unavailable_with_a_bad_image_keeps_old_instances() -> None:
    fleet = _started(_role_rolling(1, 4, 1, maxUnavailable=2))
    fleet.set_image("img:bad", role=0)
    fleet.settle()
    prefill = {n: i for n, i in fleet.images().items() if "-prefill-" in n}
    assert sorted(prefill.values()) == ["img:1", "img:1", "img:bad", "img:bad"]
    assert fleet.condition()["reason"] == "UpdateStalled"  # type: ignore[index]


def test_role_partition_protects_first_instances_and_recreates_them_old() -> None:
    fleet = _started(_role_rolling(1, 4, 1, partition=2))
    fleet.set_image("img:2", role=0)
    fleet.settle()
    prefill = {n: i for n, i in fleet.images().items() if "-prefill-" in n}
    assert prefill == {
        "llama-0-prefill-0-0": "img:1",
        "llama-0-prefill-1-0": "img:1",
        "llama-0-prefill-2-0": "img:2",
        "llama-0-prefill-3-0": "img:2",
    }
    condition = fleet.condition()
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "PartitionReached")
    assert "llama-0/prefill-0" in condition["message"]
    fleet.cluster.remove("llama-0-prefill-1-0")
    fleet.settle()
    assert fleet.images()["llama-0-prefill-1-0"] == "img:1"
    # role scale down during the partitioned update: updated instances go first
    fleet.set_spec("template.roles.0.replicas", 3)
    fleet.settle()
    prefill = {n: i for n, i in fleet.images().items() if "-prefill-" in n}
    assert prefill == {
        "llama-0-prefill-0-0": "img:1",
        "llama-0-prefill-1-0": "img:1",
        "llama-0-prefill-2-0": "img:2",
    }


def test_role_surge() -> None:
    fleet = _started(_role_rolling(1, 3, 1, maxUnavailable=0, maxSurge=1))
    fleet.set_image("img:2", role=0)
    fleet.settle()
    prefill = {n: i for n, i in fleet.images().items() if "-prefill-" in n}
    assert prefill == {f"llama-0-prefill-{r}-0": "img:2" for r in range(3)}


def test_scale_down_takes_protected_units_last() -> None:
    views = [UnitView(0, True, False, True), UnitView(1, True, False, False)]
    views += [UnitView(o, True, True, True) for o in (2, 3, 4)]
    plan = plan_units(views, 3, Budget(partition=2), rollout_in_progress=True)
    assert plan.remove == (4, 3) and plan.desired == (0, 1, 2)
    # without a partition, the not-ready unit goes first
    plan = plan_units(views, 3, Budget(), rollout_in_progress=True)
    assert plan.remove[0] == 1


def test_taking_over_groups_of_kthenas_go_controller_rolls_nothing() -> None:
    """Groups labelled with a revision Kthena named differently, recording the same templates, are up to date."""
    fleet = _started(_group_rolling(3))
    ours = fleet.doc["status"]["currentRevision"]
    (cr,) = fleet.cluster.objects("ControllerRevision").values()
    kthena = dict(cr)
    kthena["metadata"] = {**cr["metadata"], "name": "llama-5d4f8b9c7", "uid": "kthena-cr"}
    kthena["data"] = {"data": cr["data"]["data"]}  # Kthena records the roles only
    fleet.cluster.drop("ControllerRevision", cr["metadata"]["name"])
    fleet.cluster.put("ControllerRevision", kthena)
    for pod in fleet.cluster.pods().values():
        pod["metadata"]["labels"]["modelserving.volcano.sh/revision"] = "5d4f8b9c7"
        pod["metadata"]["labels"]["modelserving.volcano.sh/role-template-hash"] = "12345"
        fleet.cluster.put("Pod", pod)
    fleet.set_status(currentRevision="5d4f8b9c7")
    uids = fleet.uids()
    fleet.settle()
    assert fleet.uids() == uids
    assert fleet.doc["status"]["currentRevision"] == ours
    assert fleet.doc["status"]["updatedReplicas"] == 3
    assert not [e for e in fleet.events if e[1] == "ServingGroupUpdating"]


def test_units_an_eviction_disrupted_count_against_the_rollout_budget() -> None:
    from kthena_py.plan.modelserving.eviction.tracker import group_key
    from kthena_py.plan.modelserving.rollout.rollout import plan_rollout

    from .builders import VOLCANO, parse, ref_of

    fleet = _started(_group_rolling(4, maxUnavailable=1))
    fleet.set_image("img:2")
    ms = parse(fleet.doc)
    free = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
    assert {d.name.rsplit("-", 3)[0] for d in free.deletes if d.kind == "Pod"} == {"llama-3"}
    evicted = frozenset({group_key("ns", "llama", "llama-0")})
    held = plan_rollout(ms, ref_of(ms), replace(fleet.cluster.observed(), disrupted=evicted), VOLCANO, fleet.now)
    # The disrupted group already uses the budget: no ready group is taken down; the disrupted (outdated) one is
    # replaced instead, at no further cost.
    assert {d.name.rsplit("-", 3)[0] for d in held.deletes if d.kind == "Pod"} == {"llama-0"}
