"""Which Pod changes wake the ServingGroup reconciler (the cache is seeded by hand, never started)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_py.controllers.modelserving.predicates import pod_change_matters
from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import became_ready_only
from kthena_py.testing.fake import FakeKube

GROUP = "modelserving.volcano.sh/group-name"


def pod(name: str, *, ready: bool = False, group: str = "ms-0", owner: str = "u1", restarts: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if ready:
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "containerStatuses": [{"name": "c", "restartCount": restarts, "ready": True}],
        }
    elif restarts:
        status["containerStatuses"] = [{"name": "c", "restartCount": restarts, "ready": False}]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {GROUP: group},
            "ownerReferences": [
                {
                    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                    "kind": "ModelServing",
                    "name": "ms",
                    "uid": owner,
                    "controller": True,
                }
            ],
        },
        "status": status,
    }


def make_cache(*pods: dict[str, Any]) -> SharedCache:
    cache = SharedCache(FakeKube())  # never started: the store is filled by the test
    for p in pods:
        cache.informer(PODS).store.upsert(p)
    return cache


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (pod("a"), pod("a", ready=True), True),
        (pod("a", ready=True), pod("a", ready=True), False),  # no change
        (pod("a", ready=True), pod("a"), False),  # readiness lost
        (pod("a", restarts=1), pod("a", ready=True, restarts=2), False),  # also restarted
        (pod("a"), pod("a", ready=True, group="other"), False),  # also relabelled
    ],
)
def test_became_ready_only(old: dict[str, Any], new: dict[str, Any], expected: bool) -> None:
    assert became_ready_only(old, new) is expected


def test_ready_pod_in_a_group_still_starting_is_dropped() -> None:
    new = pod("a", ready=True)
    cache = make_cache(new, pod("b"))
    assert pod_change_matters(cache)(pod("a"), new) is False


def test_last_pod_of_a_group_becoming_ready_passes() -> None:
    new = pod("a", ready=True)
    cache = make_cache(new, pod("b", ready=True))
    assert pod_change_matters(cache)(pod("a"), new) is True


def test_siblings_of_another_owner_or_terminating_do_not_count() -> None:
    new = pod("a", ready=True)
    leftover = pod("b", owner="old-uid")
    terminating = pod("c")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cache = make_cache(new, leftover, terminating)
    assert pod_change_matters(cache)(pod("a"), new) is True


@pytest.mark.parametrize(
    "change",
    ["add", "lost readiness", "restart", "deletion", "label"],
)
def test_other_changes_always_pass(change: str) -> None:
    old = pod("a", ready=True)
    new = copy.deepcopy(old)
    if change == "add":
        assert pod_change_matters(make_cache(new, pod("b")))(None, new) is True
        return
    if change == "lost readiness":
        new = pod("a")
    elif change == "restart":
        new["status"]["containerStatuses"][0]["restartCount"] = 1
    elif change == "deletion":
        new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    else:
        new["metadata"]["labels"]["x"] = "y"
    cache = make_cache(new, pod("b"))  # a sibling not ready: would drop a pure readiness gain
    assert pod_change_matters(cache)(old, new) is True


def test_status_noise_is_dropped() -> None:
    old = pod("a")
    new = copy.deepcopy(old)
    new["status"]["podIP"] = "127.100.0.5"
    assert pod_change_matters(make_cache(new))(old, new) is False
