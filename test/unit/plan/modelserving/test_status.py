"""ModelServing status and conditions (kthena_py.plan.modelserving.groups.status, through plan_servinggroups)."""

from __future__ import annotations

import copy
from typing import Any

from kthena_py.plan.modelserving.core.types import PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.groups.status import format_time, label_selector

from .builders import NO_VOLCANO, NOW, VOLCANO, Cluster, ms_doc, parse, ref_of, role_doc

T0 = "2023-01-01T00:00:00Z"


def _status(cluster: Cluster, doc: dict[str, Any], support: PodGroupSupport = VOLCANO, now: float = NOW) -> Any:
    ms = parse(doc)
    plan = plan_servinggroups(ms, ref_of(ms), cluster.observed(), support, now)
    return plan.status


def _conditions(status: Any) -> dict[str, Any]:
    return {c["type"]: c for c in status["conditions"]}


def test_format_time_and_selector() -> None:
    assert format_time(0) == "1970-01-01T00:00:00Z"
    assert format_time(NOW + 0.9) == "2023-11-14T22:13:20Z"
    assert label_selector("llama", "prefill") == (
        "modelserving.volcano.sh/entry=true,modelserving.volcano.sh/name=llama,"
        "modelserving.volcano.sh/role-id=prefill-0,modelserving.volcano.sh/role=prefill"
    )


def test_status_of_a_new_modelserving() -> None:
    doc = ms_doc(role_doc("prefill", workers=1), role_doc("decode"), replicas=2, generation=4)
    status = _status(Cluster(), doc, NO_VOLCANO)
    assert status["observedGeneration"] == 4
    assert status["replicas"] == 0 and status["availableReplicas"] == 0
    assert status["updatedReplicas"] == 0 and status["currentReplicas"] == 0
    assert status["currentRevision"] == status["updateRevision"]
    assert status["labelSelector"] == label_selector("llama", "prefill")
    cond = _conditions(status)
    assert cond["Available"]["status"] == "False" and cond["Available"]["reason"] == "GroupsNotReady"
    assert cond["Available"]["message"] == "0/2 ServingGroups available; not ready: llama-0, llama-1"
    assert cond["Available"]["observedGeneration"] == 4
    assert cond["Available"]["lastTransitionTime"] == format_time(NOW)
    assert cond["Progressing"]["status"] == "True" and cond["Progressing"]["reason"] == "GroupProgressing"
    assert cond["Progressing"]["message"] == (
        "Some groups is progressing: [0 1]; llama-0 (creating), llama-1 (creating)"
    )


def test_waiting_for_podgroup_is_progressing() -> None:
    status = _status(Cluster(), ms_doc(), VOLCANO)
    message = "Some groups is progressing: [0]; llama-0 (waiting for PodGroup)"
    assert _conditions(status)["Progressing"]["message"] == message


def test_steady_state() -> None:
    cluster = Cluster()
    doc = ms_doc(role_doc("prefill", replicas=2, workers=1), replicas=3)
    cluster.converge(parse(doc))
    status = _status(cluster, doc)
    assert (status["replicas"], status["availableReplicas"], status["updatedReplicas"], status["currentReplicas"]) == (
        3,
        3,
        3,
        3,
    )
    cond = _conditions(status)
    assert (cond["Available"]["status"], cond["Available"]["reason"]) == ("True", "AllGroupsReady")
    assert (cond["Progressing"]["status"], cond["Progressing"]["reason"]) == ("False", "Idle")


def test_not_ready_group_and_transition_times() -> None:
    cluster = Cluster()
    doc = ms_doc(replicas=2)
    cluster.converge(parse(doc))
    previous = {
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "AllGroupsReady",
                "message": "x",
                "lastTransitionTime": T0,
            },
            {"type": "Progressing", "status": "False", "reason": "Idle", "message": "y", "lastTransitionTime": T0},
            {"type": "UpdateInProgress", "status": "True", "reason": "Old", "message": "z", "lastTransitionTime": T0},
        ],
        "collisionCount": 2,
    }
    with_status = copy.deepcopy(doc)
    with_status["status"] = previous
    unchanged = _status(cluster, with_status)
    assert [c["lastTransitionTime"] for c in unchanged["conditions"]] == [T0, T0]
    assert [c["type"] for c in unchanged["conditions"]] == ["Available", "Progressing"]
    assert unchanged["collisionCount"] == 2
    # Other reconcilers' conditions (the eviction budget's) are not part of this share: server-side apply keeps them.
    with_budget = copy.deepcopy(with_status)
    with_budget["status"]["conditions"].append({**previous["conditions"][0], "type": "DisruptionAllowed"})
    assert [c["type"] for c in _status(cluster, with_budget)["conditions"]] == ["Available", "Progressing"]
    cluster.not_ready("llama-1-prefill-0-0", NOW - 5)
    status = _status(cluster, with_status)
    cond = _conditions(status)
    assert status["availableReplicas"] == 1 and status["replicas"] == 2
    assert cond["Available"]["status"] == "False"
    assert cond["Available"]["message"] == "1/2 ServingGroups available; not ready: llama-1"
    assert cond["Available"]["lastTransitionTime"] == format_time(NOW)
    assert cond["Progressing"]["message"] == "Some groups is progressing: [1]; llama-1 (starting)"


def test_revisions_without_rolling_update() -> None:
    cluster = Cluster()
    v1 = ms_doc(role_doc("prefill", image="img:1"), replicas=2)
    cluster.converge(parse(v1))
    rev1 = _status(cluster, v1)["updateRevision"]
    v2 = ms_doc(role_doc("prefill", image="img:2"), replicas=3)
    v2["status"] = {"currentRevision": rev1}
    cluster.converge(parse(v2))
    status = _status(cluster, v2)
    assert status["updateRevision"] != rev1
    assert status["currentRevision"] == rev1
    assert (status["replicas"], status["updatedReplicas"], status["currentReplicas"]) == (3, 1, 2)
    # without a previous value, the most common outdated revision
    del v2["status"]
    assert _status(cluster, v2)["currentRevision"] == rev1
    # once no group is outdated, current = update
    for name in [n for n in cluster.pods() if n.startswith(("llama-0-", "llama-1-"))]:
        cluster.remove(name)
    cluster.converge(parse(v2))
    final = _status(cluster, v2)
    assert final["currentRevision"] == final["updateRevision"]
    assert final["updatedReplicas"] == final["currentReplicas"] == 3


def test_zero_replicas_is_available() -> None:
    status = _status(Cluster(), ms_doc(replicas=0))
    assert _conditions(status)["Available"]["status"] == "True"
    assert _conditions(status)["Progressing"]["status"] == "False"
