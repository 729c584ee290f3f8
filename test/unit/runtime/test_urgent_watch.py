"""A watch's ``urgent`` predicate decides which of its changes go ahead in the queue."""

from __future__ import annotations

from kthena_py.controllers.modelserving.predicates import existing_pod_changed
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.runtime.controller import _Handler, _Watch, owner_mapper
from kthena_py.runtime.reconcile import Request


def _pod(name: str, ready: str) -> KubeObject:
    owner = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "name": "ms", "uid": "u"}
    return {
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [{**owner, "controller": True}]},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_updates_of_existing_pods_are_urgent_creations_and_deletions_are_not() -> None:
    added: list[tuple[Request, bool]] = []

    def enqueue(key: Request, *, urgent: bool = False) -> None:
        added.append((key, urgent))

    watch = _Watch(PODS, owner_mapper(MODELSERVINGS), None, urgent=existing_pod_changed)
    handler = _Handler(watch, enqueue)
    before, after = _pod("p", "False"), _pod("p", "True")
    handler.on_add(before)
    handler.on_update(before, after)
    handler.on_delete(after)
    key = Request("ns", "ms")
    assert added == [(key, False), (key, True), (key, False)]

    # Without an urgent predicate nothing is urgent.
    added.clear()
    _Handler(_Watch(PODS, owner_mapper(MODELSERVINGS), None), enqueue).on_update(before, after)
    assert added == [(key, False)]
