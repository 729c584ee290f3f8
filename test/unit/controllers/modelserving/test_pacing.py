"""Progress-only status changes wait a moment; everything else is written at once (pacing, the applier, the
ServingGroup reconciler through FakeKube). The real apiserver's side: test/envtest/test_status_pacing.py."""

from __future__ import annotations

from typing import Any

from kthena_py.controllers.modelserving.apply import PlanApplier
from kthena_py.controllers.modelserving.pacing import PROGRESS_DELAY_SECONDS, ProgressPacer
from kthena_py.controllers.modelserving.servinggroups import ServingGroupReconciler
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core.types import Plan
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.clock import FakeClock
from kthena_py.testing.fake import FakeKube, RecordedEvents

from .scene import NOW, REQUEST, ms_doc, scene

KEY = ("ns", "ms")


def test_the_wait_begins_at_the_first_sight_and_ends_after_the_delay() -> None:
    clock = FakeClock(100.0)
    pacer = ProgressPacer(1.0, clock)
    assert pacer.wait(KEY) == 1.0
    clock.advance(0.4)
    left = pacer.wait(KEY)
    assert left is not None and abs(left - 0.6) < 1e-9  # the wait began at the first sight, not now
    clock.advance(0.6)
    assert pacer.wait(KEY) is None  # due
    pacer.settled(KEY)
    assert len(pacer) == 0
    assert pacer.wait(KEY) == 1.0  # a new change waits anew


def test_no_delay_never_waits() -> None:
    pacer = ProgressPacer(0.0, FakeClock())
    assert pacer.wait(KEY) is None and len(pacer) == 0


def _condition(type_: str, status: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": "R", "message": message, "lastTransitionTime": "t"}


def _status(available: int, ready: str = "False") -> dict[str, Any]:
    return {"replicas": 3, "availableReplicas": available, "conditions": [_condition("Available", ready, "m")]}


MS: dict[str, Any] = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "ms", "namespace": "ns", "uid": "ms-uid", "resourceVersion": "1"},
    "status": _status(0),
}


def _applier() -> tuple[PlanApplier, FakeKube, FakeClock]:
    kube = FakeKube()
    kube.put(MODELSERVINGS, MS)
    cache = SharedCache(kube)
    cache.informer(MODELSERVINGS)
    kube.attach(cache)
    clock = FakeClock()
    applier = PlanApplier(kube, RecordedEvents(), "test", cache, sync_timeout=1.0, pacer=ProgressPacer(1.0, clock))
    return applier, kube, clock


def _status_writes(kube: FakeKube) -> list[dict[str, Any]]:
    return [c.body["status"] for c in kube.calls_of("patch", MODELSERVINGS) if c.subresource == "status"]


async def test_the_applier_holds_progress_until_it_is_due() -> None:
    applier, kube, clock = _applier()
    outcome = await applier.apply(Plan(status=_status(1)), MS)
    assert outcome.writes == 0 and outcome.status_due_in == 1.0
    clock.advance(1.0)
    outcome = await applier.apply(Plan(status=_status(1)), MS)
    assert outcome.writes == 1 and outcome.status_due_in is None
    assert _status_writes(kube) == [_status(1)]
    assert applier.pacer is not None and len(applier.pacer) == 0


async def test_a_change_that_moves_a_condition_is_written_at_once_with_the_progress_that_waited() -> None:
    applier, kube, _ = _applier()
    assert (await applier.apply(Plan(status=_status(1)), MS)).writes == 0
    outcome = await applier.apply(Plan(status=_status(3, "True")), MS)
    assert outcome.writes == 1 and outcome.status_due_in is None
    assert _status_writes(kube) == [_status(3, "True")]
    assert applier.pacer is not None and len(applier.pacer) == 0


async def test_a_change_that_went_away_ends_the_wait() -> None:
    applier, kube, _ = _applier()
    await applier.apply(Plan(status=_status(1)), MS)
    outcome = await applier.apply(Plan(status=_status(0)), MS)  # the group lost readiness again
    assert outcome.writes == 0 and outcome.status_due_in is None
    assert applier.pacer is not None and len(applier.pacer) == 0 and _status_writes(kube) == []


def _ready(kube: FakeKube, pod_name: str) -> None:
    pod = kube.peek(PODS, pod_name, "ns")
    assert pod is not None
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": format_time(NOW)}
    kube.put(PODS, {**pod, "status": {"phase": "Running", "conditions": [ready]}})


def _reconciler(kube: FakeKube, cache: SharedCache, clock: FakeClock) -> ServingGroupReconciler:
    return ServingGroupReconciler(kube, cache, RecordedEvents(), wall_clock=lambda: NOW, podgroup_wait=0.0, clock=clock)


async def test_the_reconciler_asks_to_run_again_when_a_lone_groups_progress_is_due() -> None:
    kube, plain, _ = scene(ms_doc(replicas=2))
    clock = FakeClock()
    reconciler = _reconciler(kube, plain.cache, clock)
    for _ in range(2):  # pods created, then the status that reports them
        await reconciler.reconcile(REQUEST)
    kube.calls.clear()
    _ready(kube, "llama-0-prefill-0-0")
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after == PROGRESS_DELAY_SECONDS
    assert _status_writes(kube) == []
    clock.advance(PROGRESS_DELAY_SECONDS)
    await reconciler.reconcile(REQUEST)
    assert [s["availableReplicas"] for s in _status_writes(kube)] == [1]


async def test_the_reconciler_writes_the_last_group_at_once() -> None:
    kube, plain, _ = scene(ms_doc(replicas=2))
    reconciler = _reconciler(kube, plain.cache, FakeClock())
    for _ in range(2):
        await reconciler.reconcile(REQUEST)
    kube.calls.clear()
    _ready(kube, "llama-0-prefill-0-0")
    await reconciler.reconcile(REQUEST)
    _ready(kube, "llama-1-prefill-0-0")
    result = await reconciler.reconcile(REQUEST)
    (written,) = _status_writes(kube)
    assert written["availableReplicas"] == 2
    assert {c["type"]: c["status"] for c in written["conditions"]}["Available"] == "True"
    assert result is None or result.requeue_after is None
