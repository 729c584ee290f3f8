"""The applier's write rules: creation steps, and the status left to the reconcile its own writes trigger.

A fake client stands in for the API server and, like a synced informer, puts what it wrote into the cache,
so the applier's read-your-writes wait completes. The real thing is exercised in the cluster tier.
"""

from __future__ import annotations

import itertools
from typing import Any

from kthena_py.controllers.modelserving.apply import PlanApplier
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import AlreadyExists, NotFound
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS, SERVICES
from kthena_py.plan.modelserving.types import Delete, Plan
from kthena_py.runtime.cache import SharedCache

_RV = itertools.count(100)


class FakeClient:
    def __init__(
        self, cache: SharedCache, *, exists: frozenset[str] = frozenset(), gone: frozenset[str] = frozenset()
    ) -> None:
        self.cache = cache
        self.exists = set(exists)
        self.gone = set(gone)
        self.calls: list[tuple[str, str, str]] = []

    async def create(self, rt: Any, body: dict[str, Any], namespace: str | None = None, **_: Any) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self.calls.append(("create", body["kind"], name))
        if name in self.exists:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        obj = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}", "resourceVersion": str(next(_RV))}}
        self.cache.informer(rt).store.upsert(obj)
        return obj

    async def delete(self, rt: Any, name: str, namespace: str | None = None, **_: Any) -> None:
        self.calls.append(("delete", rt.kind, name))
        if name in self.gone:
            raise NotFound(404, "NotFound", "gone")
        obj = self.cache.get(rt, name, namespace)
        if obj is not None:
            self.cache.informer(rt).store.delete(obj)

    async def patch(self, rt: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        self.calls.append(("patch", f"{rt.kind}/{kw.get('subresource') or ''}", name))
        obj = dict(self.cache.get(rt, name, namespace) or {})
        obj["status"] = body["status"]
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(next(_RV))}
        self.cache.informer(rt).store.upsert(obj)
        return obj


class NoEvents:
    def event(self, *_: Any) -> None:
        raise AssertionError("no events planned")


MS: dict[str, Any] = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "ms", "namespace": "ns", "uid": "ms-uid", "resourceVersion": "1"},
    "status": {"replicas": 0},
}
STATUS = {"replicas": 1}


def obj(kind: str, name: str) -> dict[str, Any]:
    api = {"Pod": "v1", "Service": "v1", "ControllerRevision": "apps/v1"}[kind]
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ns"}}


def setup(**kw: Any) -> tuple[PlanApplier, FakeClient]:
    cache = SharedCache(None)  # type: ignore[arg-type]  # never started: the fake client fills it
    for rt in (MODELSERVINGS, PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    cache.informer(MODELSERVINGS).store.upsert(MS)
    client = FakeClient(cache, **kw)
    return PlanApplier(client, NoEvents(), "test", cache, sync_timeout=1.0), client  # type: ignore[arg-type]


async def test_revision_first_then_everything_else() -> None:
    applier, client = setup()
    plan = Plan(creates=(obj("ControllerRevision", "ms-r"), obj("Service", "s"), obj("Pod", "w"), obj("Pod", "e")))
    assert await applier.apply(plan, MS) == 4
    assert client.calls[0] == ("create", "ControllerRevision", "ms-r")
    assert {c[2] for c in client.calls[1:]} == {"s", "w", "e"}


async def test_status_waits_for_the_reconcile_that_creations_trigger() -> None:
    applier, client = setup()
    await applier.apply(Plan(creates=(obj("Pod", "w"),), status=STATUS), MS)
    assert [c[0] for c in client.calls] == ["create"]


async def test_status_waits_for_the_reconcile_that_deletions_trigger() -> None:
    applier, client = setup()
    await applier.apply(Plan(creates=(obj("Pod", "w"),)), MS)
    client.calls.clear()
    await applier.apply(Plan(deletes=(Delete("Pod", "w", "uid-w"),), status=STATUS), MS)
    assert [c[0] for c in client.calls] == ["delete"]


async def test_status_is_written_by_a_quiet_reconcile() -> None:
    applier, client = setup()
    assert await applier.apply(Plan(status=STATUS), MS) == 1
    assert client.calls == [("patch", "ModelServing/status", "ms")]


async def test_status_is_written_when_no_write_took_effect() -> None:
    # Nothing created or deleted means no watch event, hence no follow-up reconcile: write it now.
    applier, client = setup(exists=frozenset({"w"}), gone=frozenset({"x"}))
    await applier.apply(Plan(creates=(obj("Pod", "w"),), deletes=(Delete("Pod", "x", "uid-x"),), status=STATUS), MS)
    assert client.calls[-1] == ("patch", "ModelServing/status", "ms")


async def test_unchanged_status_is_not_written() -> None:
    applier, client = setup()
    assert await applier.apply(Plan(status=dict(MS["status"])), MS) == 0
    assert client.calls == []
