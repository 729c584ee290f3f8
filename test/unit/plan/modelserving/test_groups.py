"""Observed-state parsing (kthena_py.plan.modelserving.core.groups)."""

from __future__ import annotations

from typing import Any

from kthena_py.plan.modelserving.core.groups import parse_observed, parse_timestamp
from kthena_py.plan.modelserving.core.types import Observed


def _pod(name: str, group: str, role: str, role_id: str, **extra: Any) -> dict[str, Any]:
    labels = {
        "modelserving.volcano.sh/name": "llama",
        "modelserving.volcano.sh/group-name": group,
        "modelserving.volcano.sh/role": role,
        "modelserving.volcano.sh/role-id": role_id,
        "modelserving.volcano.sh/revision": extra.pop("revision", "r1"),
    }
    metadata = {"name": name, "uid": f"u-{name}", "labels": labels, **extra.pop("metadata", {})}
    return {"metadata": metadata, "status": extra.pop("status", {})}


def test_parse_timestamp() -> None:
    assert parse_timestamp("1970-01-01T00:01:00Z") == 60.0
    assert parse_timestamp("2024-01-01T00:00:00+01:00") == 1704063600.0
    for bad in (None, "", "yesterday", 5, "2024-01-01T00:00:00"):
        assert parse_timestamp(bad) is None


def test_pods_are_grouped_and_foreign_ones_ignored() -> None:
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:00:10Z"}],
        "containerStatuses": [{"restartCount": 2}, {"restartCount": True}],
        "initContainerStatuses": [{"restartCount": 1}],
    }
    pods = (
        _pod("llama-1-p-0-0", "llama-1", "p", "p-0", status=status),
        _pod(
            "llama-1-p-0-1",
            "llama-1",
            "p",
            "p-0",
            revision="r2",
            metadata={
                "deletionTimestamp": "x",
                "annotations": {"controller.kubernetes.io/pod-deletion-cost": "7"},
            },
        ),
        _pod("llama-1-p-0-2", "llama-1", "p", "p-0", revision="r2"),
        _pod("llama-1-p-1-0", "llama-1", "q", "p-1"),  # role id of another role
        _pod("other-1-p-0-0", "other-1", "p", "p-0"),  # another ModelServing's group name
        _pod("llama-2-p-0-0", "llama-1", "p", "p-0"),  # name does not match its labels
        {"metadata": {"name": "llama-0-p-0-0", "labels": {"app": "x"}}},
    )
    service = {
        "metadata": {
            "name": "llama-1-p-0-0",
            "uid": "s1",
            "labels": {
                "modelserving.volcano.sh/name": "llama",
                "modelserving.volcano.sh/group-name": "llama-1",
                "modelserving.volcano.sh/role": "p",
                "modelserving.volcano.sh/role-id": "p-0",
            },
        }
    }
    groups = parse_observed("llama", Observed(pods=pods, services=(service,)))
    assert list(groups.groups) == [1]
    group = groups.groups[1]
    assert list(group.instances) == [("p", 0)]
    instance = group.instances[("p", 0)]
    assert sorted(instance.pods) == [0, 1, 2]
    entry = instance.pods[0]
    assert entry.healthy_ready and entry.is_entry and entry.restarts == 3 and entry.ready_changed_at == 10.0
    assert instance.pods[1].terminating and instance.pods[1].cost == 7 and instance.cost == 7
    assert instance.service is not None and instance.service.uid == "s1"
    assert instance.live and instance.terminating and group.live
    assert not instance.complete_and_ready(2)
    # r2 is on two pods, but only one of them is not terminating: r1 and r2 tie, the smallest wins
    assert instance.revision() == "r1"
    assert group.revision(prefer="r2") == "r2"


def test_a_pod_object_is_parsed_once_and_a_new_object_anew() -> None:
    import copy

    from kthena_py.plan.modelserving.core import groups as groups_module

    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pod = _pod("llama-0-p-0-0", "llama-0", "p", "p-0", status=ready)
    first = parse_observed("llama", Observed(pods=(pod,))).groups[0].instances[("p", 0)].pods[0]
    again = parse_observed("llama", Observed(pods=(pod,))).groups[0].instances[("p", 0)].pods[0]
    assert again is first  # the same object: not parsed again
    changed = copy.deepcopy(pod)  # what the cache holds after the pod changed: a new object
    changed["status"]["phase"] = "Failed"
    fresh = parse_observed("llama", Observed(pods=(changed,))).groups[0].instances[("p", 0)].pods[0]
    assert fresh.phase == "Failed" and first.phase == "Running"
    # the same object read for another ModelServing's name is not its pod there
    assert parse_observed("other", Observed(pods=(pod,))).groups == {}
    for i in range(groups_module.POD_STATE_MEMO + 10):  # bounded: the oldest objects are let go
        parse_observed("llama", Observed(pods=(_pod(f"llama-{i}-p-0-0", f"llama-{i}", "p", "p-0"),)))
    assert len(groups_module._POD_STATES) == groups_module.POD_STATE_MEMO


def test_a_service_object_is_read_once_and_a_new_object_anew() -> None:
    import copy

    from kthena_py.plan.modelserving.core import groups as groups_module

    labels = {
        "modelserving.volcano.sh/name": "llama",
        "modelserving.volcano.sh/group-name": "llama-0",
        "modelserving.volcano.sh/role": "p",
        "modelserving.volcano.sh/role-id": "p-0",
    }
    service = {"metadata": {"name": "llama-0-p-0-0", "uid": "s1", "labels": labels}}

    def read(obj: dict[str, Any], ms: str = "llama") -> Any:
        found = list(parse_observed(ms, Observed(services=(obj,))).groups.values())
        return found[0].instances[("p", 0)].service if found else None

    first = read(service)
    assert first is not None and first.uid == "s1" and not first.terminating
    assert read(service) is first  # the same object: not read again
    deleting = copy.deepcopy(service)  # the cache's next version of it: a new object
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert read(deleting).terminating and not first.terminating
    assert read(service, "other") is None  # the same object, read for another ModelServing
    misnamed = copy.deepcopy(service)
    misnamed["metadata"]["name"] = "llama-0-p-0-1"  # labels and name disagree: not the instance's Service
    assert read(misnamed) is None
    for i in range(groups_module.POD_STATE_MEMO):  # bounded: the oldest objects are let go
        read(
            {
                "metadata": {
                    "name": f"llama-{i}-p-0-0",
                    "labels": {**labels, "modelserving.volcano.sh/group-name": f"llama-{i}"},
                }
            }
        )
    assert len(groups_module._SERVICE_STATES) == groups_module.POD_STATE_MEMO // 2
