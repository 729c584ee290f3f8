"""The ServingGroup planner: creation order, gang gating, scaling, revisions and history."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kthena_py.plan.modelserving import PluginError
from kthena_py.plan.modelserving.core.disruption import group_key, role_key
from kthena_py.plan.modelserving.core.revision import revision_data, revision_hash
from kthena_py.plan.modelserving.core.state import build_state
from kthena_py.plan.modelserving.core.types import Observed, Plan, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups

from .builders import NO_VOLCANO, NOW, VOLCANO, Cluster, created, deleted, ms_doc, parse, ref_of, role_doc


def _plan(cluster: Cluster, doc: dict[str, Any], support: PodGroupSupport = VOLCANO, now: float = NOW) -> Plan:
    ms = parse(doc)
    return plan_servinggroups(ms, ref_of(ms), cluster.observed(), support, now)


def _two_roles(**kwargs: Any) -> dict[str, Any]:
    return ms_doc(role_doc("prefill", replicas=2, workers=2), role_doc("decode"), **kwargs)


def _rev(doc: dict[str, Any]) -> str:
    return revision_hash(revision_data(parse(doc).spec))


def test_gang_waits_for_podgroups_but_creates_the_revision() -> None:
    doc = _two_roles()
    plan = _plan(Cluster(), doc)
    assert [o["kind"] for o in plan.creates] == ["ControllerRevision"]
    assert plan.requeue_after == 1.0
    assert any("waiting for its PodGroup" in r for r in plan.reasons)


def test_creation_order_and_events() -> None:
    doc = _two_roles()
    cluster = Cluster()
    cluster.put("PodGroup", {"metadata": {"name": "llama-0", "uid": "pg"}})
    plan = _plan(cluster, doc)
    assert [(o["kind"], o["metadata"]["name"]) for o in plan.creates] == [
        ("ControllerRevision", f"llama-{_rev(doc)}"),
        ("Service", "llama-0-prefill-0-0"),
        ("Pod", "llama-0-prefill-0-1"),
        ("Pod", "llama-0-prefill-0-2"),
        ("Pod", "llama-0-prefill-0-0"),
        ("Service", "llama-0-prefill-1-0"),
        ("Pod", "llama-0-prefill-1-1"),
        ("Pod", "llama-0-prefill-1-2"),
        ("Pod", "llama-0-prefill-1-0"),
        ("Pod", "llama-0-decode-0-0"),
    ]
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Normal", "ServingGroupCreating", "ServingGroup llama-0 is now Creating"),
        ("Normal", "RoleCreating", "Role prefill/prefill-0 in ServingGroup llama-0 is now Creating"),
        ("Normal", "RoleCreating", "Role prefill/prefill-1 in ServingGroup llama-0 is now Creating"),
        ("Normal", "RoleCreating", "Role decode/decode-0 in ServingGroup llama-0 is now Creating"),
    ]
    assert plan.requeue_after is None and plan.deletes == ()


def test_non_volcano_scheduler_creates_pods_without_podgroups() -> None:
    doc = _two_roles(scheduler="default-scheduler")
    plan = _plan(Cluster(), doc, VOLCANO)
    pods = [o for o in plan.creates if o["kind"] == "Pod"]
    assert len(pods) == 7
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert "scheduling.k8s.io/group-name" not in pod["metadata"].get("annotations", {})


def test_converged_state_is_a_fixed_point() -> None:
    cluster = Cluster()
    doc = _two_roles(replicas=2)
    assert cluster.converge(parse(doc)) == 1  # one pass: PodGroups, then revision and pods
    assert len(cluster.pods()) == 14 and len(cluster.objects("Service")) == 4
    plan = _plan(cluster, doc)
    assert plan.creates == () and plan.deletes == () and plan.events == () and plan.requeue_after is None


def test_scale_up_fills_gaps_without_renumbering() -> None:
    cluster = Cluster()
    cluster.converge(parse(ms_doc(replicas=3)), NO_VOLCANO)
    for name in list(cluster.pods()):
        if name.startswith("llama-1-"):
            cluster.remove(name)
    plan = _plan(cluster, ms_doc(replicas=4), NO_VOLCANO)
    assert created(plan) == ["llama-1-prefill-0-0", "llama-3-prefill-0-0"]


def test_scale_down_prefers_not_ready_then_cheap_then_high_ordinals() -> None:
    cluster = Cluster()
    doc = ms_doc(role_doc("p", workers=1), replicas=5)
    cluster.converge(parse(doc), NO_VOLCANO)
    cluster.not_ready("llama-1-p-0-0", NOW)
    cluster.set_cost("llama-4-p-0-0", "100")
    cluster.set_cost("llama-3-p-0-1", "-1")
    plan = _plan(cluster, ms_doc(role_doc("p", workers=1), replicas=2), NO_VOLCANO)
    assert deleted(plan) == [
        "llama-1-p-0-0",
        "llama-1-p-0-1",
        "llama-2-p-0-0",
        "llama-2-p-0-1",
        "llama-3-p-0-0",
        "llama-3-p-0-1",
    ]
    assert deleted(plan, "Service") == ["llama-1-p-0-0", "llama-2-p-0-0", "llama-3-p-0-0"]
    assert [e.message for e in plan.events] == [f"ServingGroup llama-{g} is now Deleting" for g in (1, 3, 2)]
    assert plan.creates == ()


def test_role_scale_down_and_up() -> None:
    cluster = Cluster()
    cluster.converge(parse(ms_doc(role_doc("p", replicas=3))), NO_VOLCANO)
    cluster.not_ready("llama-0-p-0-0", NOW)
    plan = _plan(cluster, ms_doc(role_doc("p", replicas=1)), NO_VOLCANO)
    assert deleted(plan) == ["llama-0-p-0-0", "llama-0-p-2-0"]
    assert [e.reason for e in plan.events] == ["RoleDeleting", "RoleDeleting"]
    assert plan.events[0].message == "Role p/p-0 in ServingGroup llama-0 is now Deleting"
    cluster.apply(plan, graceful=True)
    # while the removed instances terminate, nothing else happens; scaling back up waits for the names
    assert _plan(cluster, ms_doc(role_doc("p", replicas=1)), NO_VOLCANO).creates == ()
    up = _plan(cluster, ms_doc(role_doc("p", replicas=3)), NO_VOLCANO)
    assert up.creates == () and up.deletes == ()
    cluster.finish_terminating()
    assert created(_plan(cluster, ms_doc(role_doc("p", replicas=3)), NO_VOLCANO)) == ["llama-0-p-0-0", "llama-0-p-2-0"]


def test_old_revision_groups_are_kept_and_repaired_from_their_revision() -> None:
    cluster = Cluster()
    v1 = ms_doc(role_doc("p", replicas=2, image="img:1"), replicas=1)
    cluster.converge(parse(v1))
    v2 = ms_doc(role_doc("p", replicas=2, image="img:2"), replicas=2)
    plan = _plan(cluster, v2)
    assert [o["kind"] for o in plan.creates] == ["ControllerRevision"]  # group 1 waits for its PodGroup
    cluster.converge(parse(v2))
    images = {n: p["spec"]["containers"][0]["image"] for n, p in cluster.pods().items()}
    assert images == {
        "llama-0-p-0-0": "img:1",
        "llama-0-p-1-0": "img:1",
        "llama-1-p-0-0": "img:2",
        "llama-1-p-1-0": "img:2",
    }
    # a recreated instance of the old group is rendered from the old ControllerRevision
    cluster.remove("llama-0-p-0-0")
    cluster.converge(parse(v2))
    pod = cluster.pods()["llama-0-p-0-0"]
    assert pod["spec"]["containers"][0]["image"] == "img:1"
    assert pod["metadata"]["labels"]["modelserving.volcano.sh/revision"] == _rev(v1)
    # without its ControllerRevision, nothing is guessed: the instance is not re-created and a Warning says why
    cluster.drop("ControllerRevision", f"llama-{_rev(v1)}")
    cluster.remove("llama-0-p-0-0")
    plan = _plan(cluster, v2)
    assert "llama-0-p-0-0" not in created(plan)
    unresolved = [e for e in plan.events if e.reason == "RevisionUnresolved"]
    assert unresolved and unresolved[0].type == "Warning" and _rev(v1) in unresolved[0].message
    # a group that lost every pod is created anew, at the update revision
    cluster.remove("llama-0-p-1-0")
    cluster.converge(parse(v2))
    assert {p["spec"]["containers"][0]["image"] for p in cluster.pods().values()} == {"img:2"}


def test_revision_numbers_and_history_limit() -> None:
    cluster = Cluster()
    for image in range(6):
        doc = ms_doc(role_doc("p", image=f"img:{image}"))
        doc["spec"]["revisionHistoryLimit"] = 2
        cluster.converge(parse(doc), NO_VOLCANO)
        for name in list(cluster.pods()):
            cluster.remove(name)
    numbers = sorted(obj["revision"] for obj in cluster.objects("ControllerRevision").values())
    # live: the current revision; kept: the 2 newest others
    assert numbers == [4, 5, 6]


def test_service_recreated_alone_and_terminating_service_waited_for() -> None:
    cluster = Cluster()
    doc = ms_doc(role_doc("p", workers=1))
    cluster.converge(parse(doc))
    cluster.drop("Service", "llama-0-p-0-0")
    plan = _plan(cluster, doc)
    assert [(o["kind"], o["metadata"]["name"]) for o in plan.creates] == [("Service", "llama-0-p-0-0")]
    assert plan.deletes == ()
    cluster.apply(plan)
    service = cluster.objects("Service")["llama-0-p-0-0"]
    service["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    service["metadata"]["finalizers"] = ["test/hold"]
    cluster.put("Service", service)
    assert _plan(cluster, doc).creates == ()


def test_foreign_and_malformed_pods_are_ignored() -> None:
    cluster = Cluster()
    doc = ms_doc()
    cluster.converge(parse(doc))
    labels = {"modelserving.volcano.sh/name": "llama", "modelserving.volcano.sh/group-name": "llama-0"}
    cluster.put("Pod", {"metadata": {"name": "odd", "uid": "x1", "labels": labels}})
    full = {**labels, "modelserving.volcano.sh/role": "prefill", "modelserving.volcano.sh/role-id": "prefill-0"}
    cluster.put("Pod", {"metadata": {"name": "renamed-0", "uid": "x2", "labels": full}})
    cluster.put("Pod", {"metadata": {"name": "x", "uid": "x3", "labels": {"app": "x"}}})
    plan = _plan(cluster, doc)
    assert plan.creates == () and plan.deletes == ()


def test_pods_of_unknown_roles_are_deleted() -> None:
    cluster = Cluster()
    cluster.converge(parse(ms_doc(role_doc("a"), role_doc("b"))), NO_VOLCANO)
    rev = _rev(ms_doc(role_doc("a")))
    for pod in cluster.pods().values():  # pretend every pod is on the single-role revision
        pod["metadata"]["labels"]["modelserving.volcano.sh/revision"] = rev
        cluster.put("Pod", pod)
    plan = _plan(cluster, ms_doc(role_doc("a")), NO_VOLCANO)
    assert deleted(plan) == ["llama-0-b-0-0"]


def test_plugin_errors_are_raised() -> None:
    doc = ms_doc(plugins=[{"name": "no-such-plugin"}])
    with pytest.raises(PluginError, match="plugin no-such-plugin not registered"):
        _plan(Cluster(), doc)


def test_foreign_controller_revision_blocks_nothing_but_is_not_recreated() -> None:
    doc = ms_doc()
    name = f"llama-{_rev(doc)}"
    revision = {"metadata": {"name": name, "uid": "old", "ownerReferences": [{"controller": True, "uid": "other"}]}}
    ms = parse(doc)
    plan = plan_servinggroups(ms, ref_of(ms), Observed(revisions=(revision,)), NO_VOLCANO, NOW)
    assert "ControllerRevision" not in [o["kind"] for o in plan.creates]
    assert plan.requeue_after == 1.0
    assert len(created(plan)) == 1


def test_plan_is_deterministic() -> None:
    cluster = Cluster()
    doc = _two_roles(replicas=3)
    cluster.converge(parse(doc))
    cluster.fail("llama-1-prefill-1-2", NOW - 5)
    cluster.remove("llama-2-decode-0-0")
    assert _plan(cluster, doc) == _plan(cluster, doc)


def test_a_unit_an_eviction_disrupted_is_wanted_or_not_as_every_planner_sees_it() -> None:
    # Behaviour change (issue 24): the disrupted units come with the observed state, so the ServingGroup and
    # PodGroup planners see a recorded unit as not ready, as the rollout always did. Scaling down 3 -> 2 with
    # llama-0 recorded as disrupted takes llama-0 away (not ready first) instead of llama-2 (highest ordinal).
    cluster = Cluster()
    cluster.converge(parse(ms_doc(replicas=3)), VOLCANO)
    ms = parse(ms_doc(replicas=2))
    plain = cluster.observed()
    evicted = replace(plain, disrupted=frozenset({group_key("ns", "llama", "llama-0")}))
    assert deleted(plan_servinggroups(ms, ref_of(ms), plain, VOLCANO, NOW)) == ["llama-2-prefill-0-0"]
    assert deleted(plan_servinggroups(ms, ref_of(ms), evicted, VOLCANO, NOW)) == ["llama-0-prefill-0-0"]
    assert deleted(plan_podgroups(ms, ref_of(ms), plain, VOLCANO), "PodGroup") == ["llama-2"]
    assert deleted(plan_podgroups(ms, ref_of(ms), evicted, VOLCANO), "PodGroup") == ["llama-0"]
    state = build_state(ms, ref_of(ms), evicted, VOLCANO)
    assert state.targets.plan.desired == (1, 2)


def test_status_counts_a_group_an_eviction_disrupted_as_not_available() -> None:
    # Behaviour change (issue 24): the status reads readiness from the same targets as the rollout, so a group that
    # is recorded as disrupted (its own record, or one of a role instance of it) is not available (and the rollout
    # is not complete) until the record ends, as the rollout planner already judged it.
    cluster = Cluster()
    doc = ms_doc(replicas=3)
    cluster.converge(parse(doc), VOLCANO)
    ms = parse(doc)
    plain = cluster.observed()
    role = replace(plain, disrupted=frozenset({role_key("ns", "llama", "llama-1", "prefill", "prefill-0")}))
    group = replace(plain, disrupted=frozenset({group_key("ns", "llama", "llama-1")}))

    def available(observed: Observed) -> tuple[int, str]:
        status = plan_servinggroups(ms, ref_of(ms), observed, VOLCANO, NOW).status or {}
        condition = next(c for c in status["conditions"] if c["type"] == "Available")
        return status["availableReplicas"], condition["status"]

    assert available(plain) == (3, "True")
    assert available(role) == available(group) == (2, "False")
