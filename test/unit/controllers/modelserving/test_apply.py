"""The applier's write rules: creation steps, and the status left to the reconcile its own writes trigger.

FakeKube stands in for the API server and, like a synced informer, delivers what it wrote into the cache, so the
applier's read-your-writes wait completes (or, held, lets the cache lag). The real thing is exercised in the envtest
and cluster tiers (test/envtest/test_faults.py, test/cluster/test_faults.py).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from kthena_py.controllers.modelserving.apply import PlanApplier
from kthena_py.controllers.modelserving.failures import FailureTracker
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import Invalid
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.core.types import Delete, Plan
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.clock import FakeClock
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.testing.fake.faults import refuse


def calls(kube: FakeKube) -> list[tuple[str, str, str]]:
    """Every call to the fake, in order, as (verb, kind or kind/subresource, name)."""
    return [
        (c.verb, f"{c.rt.kind}/{c.subresource or ''}" if c.verb == "patch" else c.rt.kind, c.name) for c in kube.calls
    ]


def refuse_creates(kube: FakeKube, *names: str) -> Callable[[], None]:
    """Creates of objects named ``names`` are refused as invalid (422) until the returned function is called."""
    removers = [
        kube.intercept(
            refuse(
                Invalid(422, "Invalid", f'"{name}" is invalid: spec.containers[0].image: Required value'),
                "create",
                name=name,
            )
        )
        for name in names
    ]

    def free() -> None:
        for remove in removers:
            remove()

    return free


def uid(kube: FakeKube, kind: str, name: str) -> str:
    return str(((kube.peek(KINDS[kind], name, "ns") or {}).get("metadata") or {}).get("uid"))


def recorded(events: RecordedEvents) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in events.events]


KINDS = {"Pod": PODS, "Service": SERVICES, "ControllerRevision": CONTROLLER_REVISIONS}


MS: dict[str, Any] = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "ms", "namespace": "ns", "uid": "ms-uid", "resourceVersion": "1"},
    "status": {"replicas": 0},
}
STATUS = {"replicas": 1}


def obj(kind: str, name: str) -> dict[str, Any]:
    api = {"Pod": "v1", "Service": "v1", "ControllerRevision": "apps/v1"}[kind]
    owner = {"controller": True, "uid": "ms-uid", "kind": "ModelServing", "name": "ms"}
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ns", "ownerReferences": [owner]}}


def setup(**kw: Any) -> tuple[PlanApplier, FakeKube]:
    applier, kube, _ = setup_with_events(**kw)
    return applier, kube


def setup_with_events(
    clock: FakeClock | None = None,
    *,
    exists: frozenset[str] = frozenset(),
    owner_of_existing: str = "someone-else",
) -> tuple[PlanApplier, FakeKube, RecordedEvents]:
    kube = FakeKube()
    kube.put(MODELSERVINGS, MS)
    for name in exists:  # pods of that name already exist, controlled by ``owner_of_existing``
        owner = {"controller": True, "uid": owner_of_existing, "kind": "ModelServing", "name": "ms"}
        kube.put(PODS, {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [owner]}})
    cache = SharedCache(kube)
    for rt in (MODELSERVINGS, PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    kube.attach(cache)
    events = RecordedEvents()
    tracker = FailureTracker(clock or FakeClock())
    applier = PlanApplier(kube, events, "test", cache, sync_timeout=1.0, tracker=tracker)
    return applier, kube, events


async def test_revision_first_then_everything_else() -> None:
    applier, kube = setup()
    plan = Plan(creates=(obj("ControllerRevision", "ms-r"), obj("Service", "s"), obj("Pod", "w"), obj("Pod", "e")))
    assert (await applier.apply(plan, MS)).writes == 4
    assert calls(kube)[0] == ("create", "ControllerRevision", "ms-r")
    assert {c[2] for c in calls(kube)[1:]} == {"s", "w", "e"}


async def test_status_waits_for_the_reconcile_that_creations_trigger() -> None:
    applier, kube = setup()
    await applier.apply(Plan(creates=(obj("Pod", "w"),), status=STATUS), MS)
    assert [c[0] for c in calls(kube)] == ["create"]


async def test_status_waits_for_the_reconcile_that_deletions_trigger() -> None:
    applier, kube = setup()
    await applier.apply(Plan(creates=(obj("Pod", "w"),)), MS)
    kube.calls.clear()
    await applier.apply(Plan(deletes=(Delete("Pod", "w", uid(kube, "Pod", "w")),), status=STATUS), MS)
    assert [c[0] for c in calls(kube)] == ["delete"]


async def test_status_is_written_by_a_quiet_reconcile() -> None:
    applier, kube = setup()
    assert (await applier.apply(Plan(status=STATUS), MS)).writes == 1
    assert calls(kube) == [("patch", "ModelServing/status", "ms")]


async def test_status_is_written_when_no_write_took_effect() -> None:
    # Nothing created or deleted means no watch event, hence no follow-up reconcile: write it now.
    applier, kube = setup(exists=frozenset({"w"}))  # and no pod "x": its delete finds it gone
    await applier.apply(Plan(creates=(obj("Pod", "w"),), deletes=(Delete("Pod", "x", "uid-x"),), status=STATUS), MS)
    assert calls(kube)[-1] == ("patch", "ModelServing/status", "ms")


async def test_unchanged_status_is_not_written() -> None:
    applier, kube = setup()
    assert (await applier.apply(Plan(status=dict(MS["status"])), MS)).writes == 0
    assert calls(kube) == []


# -- refused writes ------------------------------------------------------------------------------------------


async def test_a_refused_create_fails_nothing_else_and_the_status_is_still_written() -> None:
    applier, kube, events = setup_with_events()
    refuse_creates(kube, "w", "e")
    outcome = await applier.apply(Plan(creates=(obj("Pod", "w"), obj("Pod", "e")), status=STATUS), MS)
    assert [f.name for f in sorted(outcome.failures, key=lambda f: f.name)] == ["e", "w"]
    assert calls(kube)[-1] == ("patch", "ModelServing/status", "ms")  # every write refused: status now
    assert outcome.retry_after == 1.0
    assert sorted(r for _, r, _ in recorded(events)) == ["FailedCreate", "FailedCreate"]
    assert all(t == "Warning" and "is invalid" in m for t, _, m in recorded(events))


async def test_refused_creates_back_off_exponentially_whatever_triggers_the_reconcile() -> None:
    clock = FakeClock()
    applier, kube, _ = setup_with_events(clock)
    refuse_creates(kube, "w")
    plan = Plan(creates=(obj("Pod", "w"),))
    attempts: list[float] = []
    for _ in range(400):  # a reconcile every 0.5 s (pod updates, deletes it caused, ...) for 200 s
        before = len([c for c in calls(kube) if c[0] == "create"])
        outcome = await applier.apply(plan, MS)
        if len([c for c in calls(kube) if c[0] == "create"]) > before:
            attempts.append(clock.now())
        assert outcome.failures and outcome.retry_after is not None
        clock.advance(0.5)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps[:6] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    assert set(gaps[6:]) == {60.0}  # capped


async def test_a_refused_create_is_retried_once_its_backoff_ends_and_then_forgotten() -> None:
    clock = FakeClock()
    applier, kube, _ = setup_with_events(clock)
    free = refuse_creates(kube, "w")
    plan = Plan(creates=(obj("Pod", "w"),))
    for _ in range(5):
        outcome = await applier.apply(plan, MS)
        assert outcome.retry_after is not None
        clock.advance(outcome.retry_after)
    free()  # the quota was freed
    outcome = await applier.apply(plan, MS)
    assert outcome.failures == () and outcome.retry_after is None
    assert calls(kube)[-1] == ("create", "Pod", "w")


async def test_a_changed_body_is_tried_at_once() -> None:
    clock = FakeClock()
    applier, kube, _ = setup_with_events(clock)
    free = refuse_creates(kube, "w")
    await applier.apply(Plan(creates=(obj("Pod", "w"),)), MS)
    fixed = obj("Pod", "w")
    fixed["spec"] = {"containers": [{"name": "c", "image": "fixed"}]}
    free()
    outcome = await applier.apply(Plan(creates=(fixed,)), MS)
    assert outcome.failures == ()
    assert [c for c in calls(kube) if c[0] == "create"] == [("create", "Pod", "w")] * 2


async def test_already_exists_of_our_own_object_is_success() -> None:
    applier, _, events = setup_with_events(exists=frozenset({"w"}), owner_of_existing="ms-uid")
    outcome = await applier.apply(Plan(creates=(obj("Pod", "w"),)), MS)
    assert outcome.failures == () and recorded(events) == []


async def test_already_exists_of_another_owners_object_waits_for_it() -> None:
    applier, kube, events = setup_with_events(exists=frozenset({"w"}))
    outcome = await applier.apply(Plan(creates=(obj("Pod", "w"),)), MS)
    assert [(f.verb, f.name) for f in outcome.failures] == [("create", "w")]
    assert "not controlled by this ModelServing" in outcome.failures[0].cause
    assert recorded(events)[0][1] == "FailedCreate"
    again = await applier.apply(Plan(creates=(obj("Pod", "w"),)), MS)
    assert again.failures == outcome.failures  # still backing off: no second request
    assert [c for c in calls(kube) if c[0] == "create"] == [("create", "Pod", "w")]


async def test_a_refused_revision_creates_no_pod() -> None:
    applier, kube, _ = setup_with_events()
    refuse_creates(kube, "ms-r")
    outcome = await applier.apply(Plan(creates=(obj("ControllerRevision", "ms-r"), obj("Pod", "w"))), MS)
    assert [f.name for f in outcome.failures] == ["ms-r"]
    assert [c for c in calls(kube) if c[0] == "create"] == [("create", "ControllerRevision", "ms-r")]


async def test_deferred_observation_hands_the_wait_to_the_caller() -> None:
    applier, kube = setup()
    assert applier.cache is not None
    kube.hold()  # writes that the informer has not delivered yet, until the test delivers them
    plan = Plan(creates=(obj("Pod", "w"),))

    outcome = await applier.apply(plan, MS, defer_observation=True)  # returns although the cache lags
    assert outcome.writes == 1 and outcome.settle is not None
    settling = asyncio.ensure_future(outcome.settle())
    await asyncio.sleep(0.05)
    assert not settling.done()  # the cache does not show the pod yet
    kube.release()  # the informer delivers it
    await asyncio.wait_for(settling, 1)

    # A plan whose writes the cache already shows leaves nothing to wait for.
    assert (await applier.apply(Plan(creates=(obj("Pod", "e"),)), MS, defer_observation=True)).settle is None


async def test_a_status_write_is_read_back_at_once_and_leaves_nothing_to_wait_for() -> None:
    applier, kube = setup()
    assert applier.cache is not None
    stored = applier.cache.informer(MODELSERVINGS).store.get("ns/ms")
    kube.hold()  # status writes the informer has not delivered yet: answered, but kept out of the store
    outcome = await applier.apply(Plan(status=STATUS), MS, defer_observation=True)
    assert outcome.writes == 1
    assert outcome.settle is None  # the next reconcile need not wait for the watch to deliver the write
    cached = applier.cache.get(MODELSERVINGS, "ms", "ns")
    assert cached is not None and cached["status"] == STATUS
    # So the next reconcile, planning the same status, writes nothing.
    again = await applier.apply(Plan(status=STATUS), cached, defer_observation=True)
    assert again.writes == 0
    assert applier.cache.informer(MODELSERVINGS).store.get("ns/ms") == stored  # the store itself is untouched


def test_a_writes_digest_is_computed_once_and_only_when_asked(monkeypatch: Any) -> None:
    from kthena_py.controllers.modelserving import apply

    computed: list[object] = []

    def counting(body: Any) -> str:
        computed.append(body)
        return f"digest-{len(computed)}"

    monkeypatch.setattr(apply, "body_digest", counting)
    body = {"metadata": {"name": "p"}}
    digest = apply._lazy_digest(body)
    assert computed == []  # a write that succeeds never pays for it
    assert digest() == "digest-1"
    assert digest() == "digest-1"
    assert computed == [body]
