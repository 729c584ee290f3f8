"""Volcano PodGroups (kthena_py.plan.modelserving.render.podgroups)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_py.plan.modelserving.core.types import PodGroupSupport
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups

from .builders import NO_VOLCANO, VOLCANO, VOLCANO_OLD, Cluster, is_noop, ms_doc, names, parse, ref_of, role_doc

_CPU_MEM = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 1}
_WORKER = {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1}
_DECODE = {"cpu": "500m", "memory": "512Mi"}


def _fixture(gang: dict[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    return ms_doc(
        role_doc("prefill", replicas=2, workers=2, requests=_CPU_MEM, worker_requests=_WORKER),
        role_doc("decode", replicas=5, requests=_DECODE),
        gang=gang,
        **extra,
    )


def _plan(doc: dict[str, Any], support: PodGroupSupport = VOLCANO, cluster: Cluster | None = None) -> Any:
    ms = parse(doc)
    return plan_podgroups(ms, ref_of(ms), (cluster or Cluster()).observed(), support)


@pytest.mark.parametrize(
    ("gang", "min_member", "resources"),
    [
        (None, 11, {"cpu": "12500m", "memory": "10752Mi", "nvidia.com/gpu": "6"}),
        ({"prefill": 2, "decode": 1}, 7, {"cpu": "10500m", "memory": "8704Mi", "nvidia.com/gpu": "6"}),
        ({"prefill": 1}, 8, {"cpu": "7500m", "memory": "6656Mi", "nvidia.com/gpu": "3"}),
        ({"prefill": 0, "decode": 0}, 0, None),
        ({"prefill": 9}, 11, {"cpu": "12500m", "memory": "10752Mi", "nvidia.com/gpu": "6"}),  # capped at replicas
    ],
)
def test_min_member_and_resources(
    gang: dict[str, int] | None, min_member: int, resources: dict[str, str] | None
) -> None:
    (pg,) = _plan(_fixture(gang)).creates
    assert pg["spec"]["minMember"] == min_member
    assert pg["spec"].get("minResources") == resources


def test_podgroup_shape_with_sub_group_policy() -> None:
    topology = {"groupPolicy": {"highestTierAllowed": 2}, "rolePolicy": {"mode": "soft", "highestTierAllowed": 1}}
    doc = _fixture({"prefill": 1}, annotations={"scheduling.volcano.sh/queue-name": "gpu-q"}, topology=topology)
    (pg,) = _plan(doc).creates
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1" and pg["kind"] == "PodGroup"
    meta = pg["metadata"]
    assert meta["name"] == "llama-0" and meta["namespace"] == "ns"
    assert meta["labels"] == {"modelserving.volcano.sh/name": "llama", "modelserving.volcano.sh/group-name": "llama-0"}
    assert meta["annotations"] == {"scheduling.k8s.io/group-name": "llama-0"}
    owner = meta["ownerReferences"][0]
    assert owner["controller"] is True and "blockOwnerDeletion" not in owner
    spec = pg["spec"]
    assert spec["queue"] == "gpu-q"
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert "minTaskMember" not in spec
    assert spec["subGroupPolicy"] == [
        {
            "name": "prefill",
            "labelSelector": {
                "matchLabels": {"modelserving.volcano.sh/name": "llama", "modelserving.volcano.sh/role": "prefill"}
            },
            "matchLabelKeys": ["modelserving.volcano.sh/role-id"],
            "subGroupSize": 3,
            "minSubGroups": 1,
            "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
        },
        {
            "name": "decode",
            "labelSelector": {
                "matchLabels": {"modelserving.volcano.sh/name": "llama", "modelserving.volcano.sh/role": "decode"}
            },
            "matchLabelKeys": ["modelserving.volcano.sh/role-id"],
            "subGroupSize": 1,
            "minSubGroups": 5,
            "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
        },
    ]


def test_min_task_member_without_sub_group_policy() -> None:
    (pg,) = _plan(_fixture({"prefill": 1, "decode": 2}), VOLCANO_OLD).creates
    assert "subGroupPolicy" not in pg["spec"]
    assert "queue" not in pg["spec"] and "networkTopology" not in pg["spec"]
    assert pg["spec"]["minTaskMember"] == {"prefill-0": 3, "decode-0": 1, "decode-1": 1}


def test_priority_class_from_templates() -> None:
    doc = _fixture()
    doc["spec"]["template"]["roles"][1]["entryTemplate"]["spec"]["priorityClassName"] = "high"
    (pg,) = _plan(doc).creates
    assert pg["spec"]["priorityClassName"] == "high"


def test_limits_stand_in_for_missing_requests() -> None:
    role = role_doc("r")
    role["entryTemplate"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "2", "memory": "1Gi"},
        "requests": {"cpu": "1"},
    }
    (pg,) = _plan(ms_doc(role)).creates
    assert pg["spec"]["minResources"] == {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("scheduler", "support"), [("default-scheduler", VOLCANO), ("volcano", NO_VOLCANO), ("volcano", PodGroupSupport())]
)
def test_no_podgroups_without_gang(scheduler: str, support: PodGroupSupport) -> None:
    assert _plan(ms_doc(scheduler=scheduler, replicas=2), support).creates == ()


def test_stale_podgroups_deleted_when_gang_stops_applying() -> None:
    cluster = Cluster()
    cluster.converge(parse(ms_doc(replicas=2)))
    plan = _plan(ms_doc(replicas=2, scheduler="default-scheduler"), VOLCANO, cluster)
    assert sorted(d.name for d in plan.deletes) == ["llama-0", "llama-1"]
    assert all(d.uid.startswith("uid-") for d in plan.deletes)


def test_one_podgroup_per_desired_group_and_scale_down() -> None:
    cluster = Cluster()
    cluster.converge(parse(ms_doc(replicas=3)))
    assert sorted(cluster.objects("PodGroup")) == ["llama-0", "llama-1", "llama-2"]
    cluster.set_cost("llama-1-prefill-0-0", "1000")
    cluster.set_cost("llama-0-prefill-0-0", "10")
    plan = _plan(ms_doc(replicas=1), VOLCANO, cluster)
    assert sorted(d.name for d in plan.deletes) == ["llama-0", "llama-2"]
    assert plan.creates == () and plan.updates == ()


def test_existing_equivalent_podgroup_is_not_updated() -> None:
    cluster = Cluster()
    doc = _fixture()
    cluster.converge(parse(doc))
    pg = cluster.objects("PodGroup")["llama-0"]
    pg["spec"]["minResources"] = {"cpu": "12.5", "memory": "11274289152", "nvidia.com/gpu": "6000m"}
    pg["spec"]["queue"] = "default"  # Volcano's webhook default
    pg["spec"]["subGroupPolicy"][0]["extraServerDefault"] = True
    pg["spec"]["networkTopology"] = None
    cluster.put("PodGroup", pg)
    assert is_noop(_plan(doc, VOLCANO, cluster))


def test_drift_is_patched_minimally() -> None:
    cluster = Cluster()
    doc = _fixture(
        annotations={"scheduling.volcano.sh/queue-name": "q1"}, topology={"groupPolicy": {"highestTierAllowed": 1}}
    )
    cluster.converge(parse(doc))
    changed = copy.deepcopy(doc)
    del changed["metadata"]["annotations"]
    del changed["spec"]["template"]["networkTopology"]
    changed["spec"]["template"]["roles"][1]["replicas"] = 1
    pg = cluster.objects("PodGroup")["llama-0"]
    pg["metadata"]["labels"].pop("modelserving.volcano.sh/group-name")
    cluster.put("PodGroup", pg)
    plan = _plan(changed, VOLCANO, cluster)
    (update,) = plan.updates
    assert update.kind == "PodGroup" and update.name == "llama-0"
    assert update.uid == cluster.objects("PodGroup")["llama-0"]["metadata"]["uid"]
    assert update.patch["spec"]["minMember"] == 7
    assert update.patch["spec"]["queue"] is None
    assert update.patch["spec"]["networkTopology"] is None
    assert update.patch["spec"]["subGroupPolicy"][1]["minSubGroups"] == 1
    assert "minResources" in update.patch["spec"]
    assert update.patch["metadata"] == {"labels": {"modelserving.volcano.sh/group-name": "llama-0"}}
    cluster.apply(plan)
    assert is_noop(_plan(changed, VOLCANO, cluster))


def test_deleted_podgroup_is_recreated_and_terminating_one_waited_for() -> None:
    cluster = Cluster()
    doc = ms_doc(replicas=2)
    cluster.converge(parse(doc))
    cluster.drop("PodGroup", "llama-1")
    assert names(_plan(doc, VOLCANO, cluster).creates) == ["llama-1"]
    pg = cluster.objects("PodGroup")["llama-0"]
    pg["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    pg["metadata"]["finalizers"] = ["test/hold"]
    cluster.put("PodGroup", pg)
    plan = _plan(doc, VOLCANO, cluster)
    assert names(plan.creates) == ["llama-1"] and plan.deletes == () and plan.updates == ()
