"""A watch's ``urgent`` predicate decides which of its changes go ahead in the queue; ``coalesce`` delays the rest.

The ModelServing controllers' use of both is checked here too (the rollout reconciler's pod watch)."""

from __future__ import annotations

from kthena_py.controllers import modelserving
from kthena_py.controllers.modelserving.predicates import existing_pod_changed
from kthena_py.controllers.modelserving.rollout import ROLLOUT_COALESCE
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.runtime.clock import FakeClock
from kthena_py.runtime.controller import _Handler, _Watch, owner_mapper
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.ratelimit import ItemExponentialFailureRateLimiter
from kthena_py.runtime.reconcile import Request
from kthena_py.runtime.workqueue import RateLimitingQueue
from kthena_py.testing.fake import FakeKube


class Recorded:
    """The queue calls a handler makes."""

    def __init__(self) -> None:
        self.added: list[tuple[Request, bool]] = []
        self.delayed: list[tuple[Request, float, bool]] = []

    def add(self, key: Request, *, urgent: bool = False) -> None:
        self.added.append((key, urgent))

    def add_after(self, key: Request, delay: float, *, retry: bool = True) -> None:
        self.delayed.append((key, delay, retry))


def _pod(name: str, ready: str) -> KubeObject:
    owner = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "name": "ms", "uid": "u"}
    return {
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [{**owner, "controller": True}]},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_updates_of_existing_pods_are_urgent_creations_and_deletions_are_not() -> None:
    queue = Recorded()
    added = queue.added
    watch = _Watch(PODS, owner_mapper(MODELSERVINGS), None, urgent=existing_pod_changed)
    handler = _Handler(watch, queue)
    before, after = _pod("p", "False"), _pod("p", "True")
    handler.on_add(before)
    handler.on_update(before, after)
    handler.on_delete(after)
    key = Request("ns", "ms")
    assert added == [(key, False), (key, True), (key, False)]

    # Without an urgent predicate nothing is urgent.
    added.clear()
    _Handler(_Watch(PODS, owner_mapper(MODELSERVINGS), None), queue).on_update(before, after)
    assert added == [(key, False)]
    assert queue.delayed == []


def test_a_coalescing_watch_delays_what_is_not_urgent_and_counts_no_retry() -> None:
    queue = Recorded()
    watch = _Watch(PODS, owner_mapper(MODELSERVINGS), None, urgent=existing_pod_changed, coalesce=0.5)
    handler = _Handler(watch, queue)
    before, after = _pod("p", "False"), _pod("p", "True")
    handler.on_add(before)
    handler.on_update(before, after)  # urgent: at once, never delayed
    key = Request("ns", "ms")
    assert queue.delayed == [(key, 0.5, False)]
    assert queue.added == [(key, True)]


async def test_a_burst_on_a_coalescing_watch_is_one_reconcile_after_the_delay() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[Request](ItemExponentialFailureRateLimiter(base=1.0, max=8.0), clock=clock)
    handler = _Handler(_Watch(PODS, owner_mapper(MODELSERVINGS), None, coalesce=0.5), queue)
    for i in range(8):
        handler.on_add(_pod(f"p{i}", "False"))
        await clock.run_for(0.05)
    assert len(queue) == 0  # nothing before the first change's deadline
    await clock.run_for(0.2)
    assert len(queue) == 1
    assert await queue.get() == Request("ns", "ms")
    queue.done(Request("ns", "ms"))
    await clock.run_for(5.0)
    assert len(queue) == 0  # the burst cost one reconcile
    queue.shutdown()


def test_the_rollout_looks_once_per_burst_of_pod_changes() -> None:
    manager = Manager(FakeKube(), ManagerOptions(health_probe_bind_address="0", metrics_bind_address="0"))
    (rollout,) = [c for c in modelserving.register(manager, workers=1) if c.name == "modelserving-rollout"]
    queue = Recorded()
    handlers = [_Handler(w, queue) for w in rollout._watches if w.rt == PODS]
    key = Request("ns", "ms")
    pods = [_pod(f"p{i}", "False") for i in range(4)]
    for handler in handlers:
        for pod in pods:
            handler.on_add(pod)  # a unit's pods created together
        handler.on_update(pods[0], _pod("p0", "True"))  # readiness of a one-pod role instance
        handler.on_delete(pods[1])
    assert queue.delayed == [(key, ROLLOUT_COALESCE, False)] * 6
    assert queue.added == []
