"""Faults against a real apiserver: refused writes, dead connections, a cache that lags after a partition.

The manager runs in this process with a client that counts its requests per object, so that a hot loop
shows as a count (and the reconcile counter of the controller-runtime metrics as a second one); the
tests bound those counts generously instead of timing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers import register_all
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import ApiUnavailable, KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS, EVENTS, PODS, ResourceType
from kthena_py.runtime import metrics
from kthena_py.runtime.informer import Informer
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.counting import CountingClient
from kthena_py.testing.proxy import proxy_kubeconfig
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

NAME_LABEL = "modelserving.volcano.sh/name"
RESOURCE_QUOTAS = ResourceType("", "v1", "ResourceQuota", "resourcequotas")


def reconciles(controller: str = "modelserving") -> float:
    return sum(
        metrics.REGISTRY.get_sample_value("controller_runtime_reconcile_total", {"controller": controller, "result": r})
        or 0.0
        for r in ("success", "error", "requeue", "requeue_after")
    )


@contextlib.asynccontextmanager
async def manager_with(client: KubeClient, namespace: str) -> AsyncIterator[Manager]:
    manager = Manager(
        client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    register_all(manager, workers=2)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: manager.leading.is_set() or task.done(), timeout=60)
        yield manager
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)


def modelserving(name: str, entry: dict[str, Any], worker: dict[str, Any] | None = None, **role: Any) -> KubeObject:
    r: dict[str, Any] = {
        "name": role.pop("role", "prefill"),
        "replicas": role.pop("replicas", 1),
        "workerReplicas": 1 if worker is not None else 0,
        "entryTemplate": {"spec": entry},
        **role,
    }
    if worker is not None:
        r["workerTemplate"] = {"spec": worker}
    return {
        "metadata": {"name": name},
        "spec": {"replicas": 1, "schedulerName": "default-scheduler", "template": {"roles": [r]}},
    }


GOOD = {"containers": [{"name": "engine", "image": "nginx:1.27"}]}
REFUSED_TEMPLATES = {
    "empty-image": ({"containers": [{"name": "engine", "image": ""}]}, "Required value"),
    "invalid-volume": (
        {
            "containers": [{"name": "engine", "image": "nginx:1.27"}],
            "volumes": [{"name": "v", "configMap": {"name": ""}}],
        },
        "spec.volumes[0].configMap.name",
    ),
    "mount-of-undefined-volume": (
        {
            "containers": [
                {"name": "engine", "image": "nginx:1.27", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}
            ]
        },
        "volumeMounts[0].name: Not found",
    ),
}


async def _live(kube: KubeClient, namespace: str, ms: str) -> dict[str, KubeObject]:
    items = (await kube.list(PODS, namespace, label_selector=f"{NAME_LABEL}={ms}")).items
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def _condition(ms: KubeObject, type_: str) -> KubeObject | None:
    return next((c for c in (ms.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)


async def _warnings(kube: KubeClient, namespace: str, reason: str) -> list[KubeObject]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelServing")).items
    return [e for e in items if e["reason"] == reason and e["type"] == "Warning"]


@pytest.mark.parametrize("case", sorted(REFUSED_TEMPLATES))
async def test_a_partly_refused_role_instance_is_completed_without_a_hot_loop(
    kubeconfig: Path, kube: KubeClient, namespace: str, case: str
) -> None:
    """The entry pod is accepted, the worker refused (422): the entry stays, the worker is retried with
    backoff, a Warning event and the ReplicaFailure condition carry the API server's message."""
    worker, cause = REFUSED_TEMPLATES[case]
    client = await CountingClient.from_kubeconfig(str(kubeconfig))
    try:
        async with manager_with(client, namespace):
            await kube.create(MODELSERVINGS, modelserving("bad", GOOD, worker), namespace)
            entry, refused = "bad-0-prefill-0-0", "bad-0-prefill-0-1"

            async def entry_pod() -> KubeObject | None:
                return (await _live(kube, namespace, "bad")).get(entry)

            entry_uid = (await eventually(entry_pod, timeout=60, description="the entry pod"))["metadata"]["uid"]
            # Watch it for a while: a hot loop makes hundreds of requests and reconciles here.
            before_requests, before_reconciles = Counter(client.requests), reconciles()
            await asyncio.sleep(20)
            requests = client.requests - before_requests
            print(
                f"{case}: {sum(requests.values())} requests, {reconciles() - before_reconciles:.0f} reconciles in 20 s"
            )
            assert requests[("DELETE", entry)] == 0, f"entry torn down {requests[('DELETE', entry)]} times"
            live = await _live(kube, namespace, "bad")
            assert entry in live and live[entry]["metadata"]["uid"] == entry_uid, "entry torn down"
            assert 1 <= requests[("POST", refused)] <= 7, requests  # 1, 2, 4, 8 s ... backoff
            assert reconciles() - before_reconciles <= 40
            assert sum(requests.values()) <= 120, requests

            cond = _condition(await kube.get(MODELSERVINGS, "bad", namespace), "ReplicaFailure")
            assert cond is not None and cond["status"] == "True" and cond["reason"] == "FailedCreate"
            assert f"create Pod {refused}" in cond["message"] and cause in cond["message"]
            events = await eventually(lambda: _warnings(kube, namespace, "FailedCreate"), timeout=30)
            assert any(refused in e["message"] and cause in e["message"] for e in events)
    finally:
        await client.close()


async def test_quota_refusal_is_retried_and_succeeds_once_the_quota_is_gone(
    kubeconfig: Path, kube: KubeClient, namespace: str
) -> None:
    """A ResourceQuota admits one of two pods; the other is refused (403) and retried with backoff (never
    torn down); after the quota is deleted it is created at the next retry."""
    await kube.create(RESOURCE_QUOTAS, {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}}, namespace)
    # No quota controller runs in this tier: publish the usage it would compute, the admission plugin
    # then enforces and updates it.
    await kube.patch(
        RESOURCE_QUOTAS,
        "pods",
        {"status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}},
        namespace,
        subresource="status",
    )
    client = await CountingClient.from_kubeconfig(str(kubeconfig))
    try:
        async with manager_with(client, namespace):
            await kube.create(MODELSERVINGS, modelserving("quota", GOOD, GOOD), namespace)

            async def refused() -> KubeObject | None:
                cond = _condition(await kube.get(MODELSERVINGS, "quota", namespace), "ReplicaFailure")
                return cond if cond is not None and "exceeded quota" in cond["message"] else None

            cond = await eventually(refused, timeout=60, description="one pod refused by the quota")
            assert cond["reason"] == "FailedCreate"
            (accepted,) = await _live(kube, namespace, "quota")
            uid = (await _live(kube, namespace, "quota"))[accepted]["metadata"]["uid"]
            events = await eventually(lambda: _warnings(kube, namespace, "FailedCreate"), timeout=30)
            assert any("exceeded quota" in e["message"] for e in events)
            await asyncio.sleep(5)  # a few backoff steps
            assert (await _live(kube, namespace, "quota"))[accepted]["metadata"]["uid"] == uid, "torn down"

            await kube.delete(RESOURCE_QUOTAS, "pods", namespace)
            await eventually(
                lambda: _count_is(kube, namespace, "quota", 2), timeout=120, description="both pods once quota gone"
            )
            missing = ({"quota-0-prefill-0-0", "quota-0-prefill-0-1"} - {accepted}).pop()
            ms = await eventually(
                lambda: _without(kube, namespace, "quota", "ReplicaFailure"), timeout=60, description="cleared"
            )
            assert (ms.get("status") or {}).get("replicas") == 1
            assert client.requests[("DELETE", accepted)] == 0
            assert client.requests[("POST", missing)] <= 12  # paced: 1, 2, 4 ... 60 s
    finally:
        await client.close()


async def _count_is(kube: KubeClient, namespace: str, ms: str, n: int) -> bool:
    return len(await _live(kube, namespace, ms)) == n


async def _without(kube: KubeClient, namespace: str, name: str, type_: str) -> KubeObject | None:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    cond = _condition(ms, type_)
    return ms if cond is None or cond["status"] != "True" else None


async def test_status_is_written_when_every_reconcile_fails(kubeconfig: Path, kube: KubeClient, namespace: str) -> None:
    """An upper-case role name makes every pod name invalid: nothing can be created, yet the status says why."""
    client = await CountingClient.from_kubeconfig(str(kubeconfig))
    try:
        async with manager_with(client, namespace):
            await kube.create(MODELSERVINGS, modelserving("upper", GOOD, role="Prefill"), namespace)

            async def status() -> KubeObject | None:
                st = (await kube.get(MODELSERVINGS, "upper", namespace)).get("status") or {}
                return st if _condition({"status": st}, "ReplicaFailure") and st.get("observedGeneration") else None

            st = await eventually(status, timeout=60, description="a status despite every create failing")
            failure = _condition({"status": st}, "ReplicaFailure")
            assert failure is not None and "upper-0-Prefill-0-0" in failure["message"]
            assert "Invalid" in failure["message"]
            available = _condition({"status": st}, "Available")
            assert available is not None and available["status"] == "False"
            assert st.get("replicas") == 0
            before = Counter(client.requests)
            await asyncio.sleep(10)
            assert (client.requests - before)[("POST", "upper-0-Prefill-0-0")] <= 5
    finally:
        await client.close()


# -- connections ----------------------------------------------------------------------------------------------


async def test_a_silently_dropped_watch_is_noticed(kubeconfig: Path, kube: KubeClient, namespace: str) -> None:
    """The watch's connection goes silent (packets held, nothing refused, new connections fine): the
    informer must notice and re-watch well before the old 5-minute watch timeout."""
    proxy, proxied_cfg = await proxy_kubeconfig(kubeconfig, f"dropped-{namespace}")
    proxied = await KubeClient.from_kubeconfig(str(proxied_cfg))
    inf = Informer(proxied, CONFIGMAPS, namespace=namespace)
    task = asyncio.create_task(inf.run())
    try:
        assert await inf.wait_for_sync(30)
        await kube.create(CONFIGMAPS, {"metadata": {"name": "before"}}, namespace)
        await eventually(lambda: inf.store.get(f"{namespace}/before") is not None, timeout=30)
        proxy.stall(new_connections=False)  # the open watch is dead from now on
        stalled = time.monotonic()
        await kube.create(CONFIGMAPS, {"metadata": {"name": "after"}}, namespace)
        await eventually(
            lambda: inf.store.get(f"{namespace}/after") is not None,
            timeout=120,
            description="the change made after the watch died",
        )
        print(f"dead watch replaced after {time.monotonic() - stalled:.1f}s")  # measured in bench/faults.py
        assert inf.failures >= 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await proxied.close()
        await proxy.stop()


async def test_a_request_on_a_dead_pooled_connection_fails_instead_of_hanging(kubeconfig: Path, namespace: str) -> None:
    proxy, proxied_cfg = await proxy_kubeconfig(kubeconfig, f"pooled-{namespace}")
    proxied = await KubeClient.from_kubeconfig(str(proxied_cfg))
    try:
        await proxied.list(CONFIGMAPS, namespace)  # leaves a pooled keep-alive connection
        proxy.stall(new_connections=False)
        with pytest.raises(ApiUnavailable):
            # Before: the request hung until its 60 s total timeout (TimeoutError here).
            await asyncio.wait_for(proxied.list(CONFIGMAPS, namespace), 55)
        await proxied.list(CONFIGMAPS, namespace)  # a fresh connection works
    finally:
        await proxied.close()
        await proxy.stop()


async def test_no_children_for_an_owner_deleted_while_the_cache_lagged(
    kubeconfig: Path, kube: KubeClient, namespace: str
) -> None:
    """After a partition the pod informer catches up before the ModelServing one: the pods' deletions
    trigger a reconcile of a ModelServing that is gone but still cached. It must create nothing."""
    proxy, proxied_cfg = await proxy_kubeconfig(kubeconfig, f"lag-{namespace}")
    client = await KubeClient.from_kubeconfig(str(proxied_cfg))
    try:
        async with manager_with(client, namespace) as manager:
            await kube.create(MODELSERVINGS, modelserving("gone", GOOD, GOOD), namespace)
            await eventually(lambda: _count_is(kube, namespace, "gone", 2), timeout=60)
            old = {p["metadata"]["uid"] for p in (await _live(kube, namespace, "gone")).values()}
            # The partition: every connection cut, new ones refused.
            proxy.refusing = True
            proxy.drop_connections()
            await kube.delete(MODELSERVINGS, "gone", namespace)
            for name in await _live(kube, namespace, "gone"):
                await kube.delete(PODS, name, namespace, grace_period_seconds=0)
            # The ModelServing informer stays behind (its watch is slow to come back).
            ms_informer = manager.cache.informer(MODELSERVINGS)
            lagging = next(t for key, t in manager.cache._tasks.items() if key.rt == MODELSERVINGS)
            lagging.cancel()
            await asyncio.gather(lagging, return_exceptions=True)
            assert ms_informer.store.get(f"{namespace}/gone") is not None
            before = reconciles()
            proxy.refusing = False
            pods = manager.cache.informer(PODS)

            def caught_up() -> bool:
                return not old & {p["metadata"]["uid"] for p in pods.store.values()}

            await eventually(caught_up, timeout=120, description="the pod informer saw the deletions")
            await eventually(lambda: reconciles() > before, timeout=60, description="a reconcile of the stale owner")
            await asyncio.sleep(2)
            assert await _live(kube, namespace, "gone") == {}, "children created for a deleted owner"
    finally:
        await client.close()
        await proxy.stop()
