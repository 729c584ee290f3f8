"""In-place updates, planned purely: eligibility, patches on the same pods, verification, deadline, recovery."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import parse_observed
from kthena_py.plan.modelserving.core.inplace_state import (
    ANNOTATION_INPLACE_STATE,
    InPlaceState,
    excused_restarts,
    parse_state,
)
from kthena_py.plan.modelserving.core.revision import revision_data
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.rollout.inplace import ineligibility, verified
from kthena_py.plan.modelserving.rollout.rollout import plan_rollout

from .builders import VOLCANO, ms_doc, parse, ref_of, role_doc
from .fleet import Fleet

# --- eligibility --------------------------------------------------------------------------------------------------


def _data(doc: dict[str, Any]) -> Any:
    return revision_data(parse(doc).spec)


def _two_roles() -> dict[str, Any]:
    return ms_doc(role_doc("prefill", workers=1), role_doc("decode"))


def _edit(doc: dict[str, Any], edit: Any) -> dict[str, Any]:
    new = copy.deepcopy(doc)
    edit(new["spec"])
    return new


def _entry(spec: dict[str, Any], role: int = 0) -> dict[str, Any]:
    entry: dict[str, Any] = spec["template"]["roles"][role]["entryTemplate"]
    return entry


def _set(path: list[Any], value: Any) -> Any:
    def edit(spec: dict[str, Any]) -> None:
        node: Any = spec
        for key in path[:-1]:
            node = node[key] if isinstance(key, int) else node.setdefault(key, {})
        node[path[-1]] = value

    return edit


_ENTRY = ["template", "roles", 0, "entryTemplate"]
_CONTAINER = [*_ENTRY, "spec", "containers", 0]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_set([*_CONTAINER, "image"], "img:2"), None),
        (_set(["template", "roles", 0, "workerTemplate", "spec", "containers", 0, "image"], "img:2"), None),
        (_set(["template", "roles", 0, "replicas"], 5), None),
        (_set([*_CONTAINER, "env"], [{"name": "A", "value": "1"}]), "role prefill entryTemplate container main: env"),
        (_set([*_ENTRY, "metadata"], {"labels": {"tier": "gold"}}), "entryTemplate metadata.labels.tier changed"),
        (_set([*_CONTAINER, "name"], "engine"), "container names changed (main -> engine)"),
        (
            _set([*_ENTRY, "spec", "initContainers"], [{"name": "init", "image": "init:1"}]),
            "entryTemplate init containers changed",
        ),
        (_set([*_CONTAINER, "image"], "img"), "effective imagePullPolicy changed (IfNotPresent -> Always)"),
        (_set([*_ENTRY, "spec", "restartPolicy"], "Never"), "restartPolicy is Never, not Always"),
        (_set(["template", "roles", 0, "workerReplicas"], 2), "workerReplicas changed (1 -> 2)"),
        (_set(["schedulerName"], "default-scheduler"), "schedulerName changed (volcano -> default-scheduler)"),
        (_set(["plugins"], [{"name": "lws-standard-labels"}]), "plugins changed"),
        (_set([*_ENTRY, "spec", "nodeSelector"], {"gpu": "h100"}), "entryTemplate spec.nodeSelector.gpu changed"),
    ],
)
def test_eligibility_only_regular_container_images(edit: Any, expected: str | None) -> None:
    old = _two_roles()
    new = _edit(old, edit)
    new["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0].setdefault("image", "img:2")
    reason = ineligibility(_data(old), _data(new))
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


def test_role_eligibility_looks_at_its_own_role_only() -> None:
    old = _two_roles()
    new = _edit(old, _set(["template", "roles", 1, "entryTemplate", "spec", "containers", 0, "env"], []))
    new["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = "img:2"
    assert ineligibility(_data(old), _data(new), "prefill") is None
    assert "role decode" in (ineligibility(_data(old), _data(new), "decode") or "")
    assert "role decode" in (ineligibility(_data(old), _data(new)) or "")
    assert "cannot be resolved" in (ineligibility(None, _data(new)) or "")


# --- the state record ---------------------------------------------------------------------------------------------


def test_state_round_trip_and_excused_restarts() -> None:
    state = InPlaceState("uid-1", "a", "b", "Patched", 1_700_000_000.0, {"main": 2}, excused_before=1)
    annotations = {ANNOTATION_INPLACE_STATE: state.to_json()}
    assert parse_state(annotations, "uid-1") == state
    assert parse_state(annotations, "uid-2") is None  # another pod's record is ignored
    assert parse_state({ANNOTATION_INPLACE_STATE: "{not json"}, "uid-1") is None
    assert parse_state({ANNOTATION_INPLACE_STATE: json.dumps({"version": "v9"})}, "uid-1") is None
    # while patched: every restart since the patch (and the earlier excused one)
    assert excused_restarts(state, {"main": 4}) == 3
    done = state.done({"main": 3})
    # once verified: only the restart of the update window; a later crash counts
    assert excused_restarts(done, {"main": 5}) == 2
    assert excused_restarts(state.failed("late"), {"main": 5}) == 1
    assert excused_restarts(None, {"main": 5}) == 0


def test_verified_needs_ready_on_the_spec_image() -> None:
    pod = {
        "spec": {"containers": [{"name": "main", "image": "nginx:1.28"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "image": "docker.io/library/nginx:1.28", "ready": True}],
        },
    }
    assert verified(pod)
    stale = copy.deepcopy(pod)
    stale["status"]["containerStatuses"][0]["image"] = "nginx:1.27"
    assert not verified(stale)
    not_ready = copy.deepcopy(pod)
    not_ready["status"]["conditions"][0]["status"] = "False"
    assert not verified(not_ready)


# --- rollouts in place ------------------------------------------------------------------------------------------


def _in_place(replicas: int, *roles: dict[str, Any], policy: str | None = None, **config: Any) -> dict[str, Any]:
    doc = ms_doc(*(roles or (role_doc("decode", workers=1),)), replicas=replicas, policy=policy)
    doc["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "updateMethod": "InPlace",
        "progressDeadlineSeconds": 60,
        "rollingUpdateConfiguration": config,
    }
    return doc


def _started(doc: dict[str, Any]) -> Fleet:
    fleet = Fleet(doc)
    fleet.settle()
    assert fleet.ready_groups() == doc["spec"]["replicas"]
    return fleet


def _reasons(fleet: Fleet) -> set[str]:
    return {e[1] for e in fleet.events}


def test_image_change_patches_the_same_pods_within_the_budget() -> None:
    fleet = _started(_in_place(4, maxUnavailable=2))
    uids = fleet.uids()
    fleet.set_image("img:2")
    fleet.watch()
    fleet.settle()
    assert fleet.uids() == uids
    assert set(fleet.images().values()) == {"img:2"}
    assert fleet.min_available == 2
    status = fleet.doc["status"]
    assert status["currentRevision"] == status["updateRevision"] and status["updatedReplicas"] == 4
    condition = fleet.condition()
    assert condition is not None and condition["reason"] == "RolloutComplete"
    for pod in fleet.cluster.pods().values():
        labels = pod["metadata"]["labels"]
        assert labels[naming.LABEL_REVISION] == status["updateRevision"]
        record = parse_state(pod["metadata"]["annotations"], pod["metadata"]["uid"])
        assert record is not None and record.phase == "Done" and record.target_revision == status["updateRevision"]
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    # every pod was patched exactly once; the restarts never triggered recovery
    assert set(fleet.patches.values()) == {1} and len(fleet.patches) == 8
    assert not _reasons(fleet) & {"RoleRecreating", "ServingGroupRecreating", "InPlaceUpdateFallback"}
    assert "ServingGroupUpdating" in _reasons(fleet)
    # converged: nothing more to do
    assert not fleet.reconcile()


def test_condition_says_verifying_while_patched_pods_are_not_ready() -> None:
    fleet = _started(_in_place(2, maxUnavailable=1))
    fleet.set_image("img:2")
    fleet.reconcile()
    condition = fleet.condition()
    assert condition is not None and "in place" in condition["message"]
    fleet.tick()  # the patched pods restart: not Ready yet
    fleet.reconcile()
    condition = fleet.condition()
    assert condition is not None and condition["reason"] == "InPlaceVerifying", condition
    assert "llama-1" in condition["message"] and "deadline" in condition["message"]
    ms = parse(fleet.doc)
    plan = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now + 10)
    assert plan.requeue_after == pytest.approx(50, abs=1)


def test_any_other_difference_recreates_with_a_fallback_event() -> None:
    fleet = _started(_in_place(2))
    uids = fleet.uids()
    fleet.set_image("img:2")
    fleet.edit_role(0, "metadata", {"labels": {"tier": "gold"}})
    fleet.settle()
    assert not set(fleet.uids().values()) & set(uids.values())
    assert set(fleet.images().values()) == {"img:2"}
    fallback = [e for e in fleet.events if e[1] == "InPlaceUpdateFallback"]
    assert fallback and all(e[0] == "Warning" for e in fallback)
    assert "recreated instead of updated in place" in fallback[0][2]
    assert "metadata.labels.tier changed" in fallback[0][2]
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]


def test_env_change_falls_back_too() -> None:
    fleet = _started(_in_place(1))
    uids = fleet.uids()
    fleet.edit_role(0, "spec.containers.0.env", [{"name": "MODE", "value": "fast"}])
    fleet.settle()
    assert not set(fleet.uids().values()) & set(uids.values())
    assert any("env" in e[2] for e in fleet.events if e[1] == "InPlaceUpdateFallback")


@pytest.mark.parametrize(
    ("policy", "survivors"),
    [("RoleRecreate", 0), ("ServingGroupRecreate", 0), ("None", 1)],
)
def test_deadline_exceeded_is_handled_by_recovery_policy(policy: str, survivors: int) -> None:
    # prefill (1 pod) gets a bad image; decode keeps its image; workers: prefill has a good worker image
    doc = _in_place(1, role_doc("decode", workers=1), policy=policy)
    fleet = _started(doc)
    uids = fleet.uids()
    fleet.set_spec("template.roles.0.entryTemplate.spec.containers.0.image", "img:bad")
    fleet.set_spec("template.roles.0.workerTemplate.spec.containers.0.image", "img:2")
    fleet.settle()
    # before the deadline: patched in place, the bad pod is not Ready, nothing recreated
    assert fleet.uids() == uids
    assert fleet.condition()["reason"] == "InPlaceVerifying"  # type: ignore[index]
    fleet.advance(61)
    fleet.settle()
    assert "ProgressDeadlineExceeded" in _reasons(fleet)
    now = fleet.uids()
    kept = {n for n in now if now[n] == uids.get(n)}
    # the worker was verified on its new image; what else survives depends on the policy
    assert len(kept) == survivors, (policy, kept)
    if policy == "None":
        assert kept == {"llama-0-decode-0-1"}
    entry = fleet.cluster.pods()["llama-0-decode-0-0"]
    assert entry["spec"]["containers"][0]["image"] == "img:bad"
    assert parse_state(entry["metadata"].get("annotations"), entry["metadata"]["uid"]) is None  # a fresh pod
    condition = fleet.condition()
    assert condition is not None and condition["status"] == "True" and condition["reason"] == "GroupsUpdating"


def test_restart_caused_by_the_patch_never_triggers_recovery() -> None:
    fleet = _started(_in_place(1, role_doc("decode", workers=1), policy="RoleRecreate"))
    fleet.set_image("img:2")
    fleet.reconcile()  # patched
    fleet.tick()  # restarted: restartCount 1, Ready False
    pods = fleet.cluster.pods()
    assert all(p["status"]["containerStatuses"][0]["restartCount"] == 1 for p in pods.values())
    ms = parse(fleet.doc)
    plan = plan_servinggroups(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
    assert not plan.deletes
    # the same restart without an in-place record is a failure under RoleRecreate
    for pod in pods.values():
        pod["metadata"]["annotations"].pop(ANNOTATION_INPLACE_STATE)
        fleet.cluster.put("Pod", pod)
    plan = plan_servinggroups(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
    assert plan.deletes


def test_a_crash_after_the_update_still_counts() -> None:
    fleet = _started(_in_place(1, role_doc("decode"), policy="RoleRecreate"))
    fleet.set_image("img:2")
    fleet.settle()
    pod = fleet.cluster.pods()["llama-0-decode-0-0"]
    uid = pod["metadata"]["uid"]
    pod["status"]["containerStatuses"][0]["restartCount"] = 2
    pod["status"]["conditions"][0]["status"] = "False"
    fleet.cluster.put("Pod", pod)
    observed = parse_observed("llama", fleet.cluster.observed())
    assert observed.groups[0].instances[("decode", 0)].pods[0].restarts == 1
    fleet.settle()
    assert fleet.cluster.pods()["llama-0-decode-0-0"]["metadata"]["uid"] != uid


def test_half_patched_unit_resumes_without_patching_a_pod_twice() -> None:
    """A manager killed after patching some pods of a group: the next step patches only the rest."""
    fleet = _started(_in_place(1, role_doc("decode", workers=2)))
    uids = fleet.uids()
    fleet.set_image("img:2")
    ms = parse(fleet.doc)
    plan = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
    assert len(plan.updates) == 3
    # only the first patch reached the API server
    first = plan.updates[0]
    fleet.cluster.apply(type(plan)(updates=(first,)), fleet.now)
    fleet.patches[(first.uid, first.patch["metadata"]["labels"][naming.LABEL_REVISION])] = 1
    fleet.tick()
    plan = plan_rollout(parse(fleet.doc), ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
    patched = {u.name for u in plan.updates if "spec" in u.patch}
    assert first.name not in patched and len(patched) == 2
    fleet.settle()
    assert fleet.uids() == uids
    assert set(fleet.patches.values()) == {1}
    assert set(fleet.images().values()) == {"img:2"}


def test_role_rolling_update_in_place_keeps_other_roles() -> None:
    p = role_doc("prefill", replicas=3) | {"maxUnavailable": 1}
    doc = ms_doc(p, role_doc("decode", workers=1))
    doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate", "updateMethod": "InPlace"}
    fleet = _started(doc)
    uids = fleet.uids()
    fleet.set_image("img:2", role=0)
    fleet.settle()
    assert fleet.uids() == uids
    images = fleet.images()
    assert {i for n, i in images.items() if "-prefill-" in n} == {"img:2"}
    assert {i for n, i in images.items() if "-decode-" in n} == {"img:1"}
    assert "RoleUpdating" in _reasons(fleet)
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]
