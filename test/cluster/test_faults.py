"""Faults end to end (kube-controller-manager's garbage collector, kwok pods that become Ready, Volcano).

A refused headless Service, a same-named predecessor whose pod lingers behind a finalizer, a role scaled up
from zero under ServingGroupRecreate. The manager's client counts its requests per object, so that a hot
loop shows as a count; the bounds are generous and nothing is timed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, PODS, SERVICES
from kthena_py.runtime import metrics
from kthena_py.testing.counting import CountingClient
from kthena_py.testing.wait import eventually

from .msutil import live_pods, modelserving, role, running_manager, wait_available

pytestmark = pytest.mark.cluster

HOLD = "kthena-py.test/hold"


def reconciles(controller: str = "modelserving") -> float:
    return sum(
        metrics.REGISTRY.get_sample_value("controller_runtime_reconcile_total", {"controller": controller, "result": r})
        or 0.0
        for r in ("success", "error", "requeue", "requeue_after")
    )


def condition(ms: KubeObject, type_: str) -> KubeObject | None:
    return next((c for c in (ms.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)


async def reasons(kube: KubeClient, namespace: str) -> Counter[str]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelServing")).items
    return Counter(e["reason"] for e in items)


def ready(pod: KubeObject) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


async def test_a_refused_headless_service_is_reported_and_never_reported_running(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    name = "long-" + "x" * 45  # 50 characters: the pods are fine, the Service name has 64 (> 63)
    service = f"{name}-0-prefill-0-0"
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving(name, roles=[role("prefill", workers=1)]), namespace)

        async def pods_ready() -> bool:
            pods = await live_pods(kube, namespace, name)
            return len(pods) == 2 and all(ready(p) for p in pods.values())

        await eventually(pods_ready, timeout=120, description="both pods Running and Ready")
        for _ in range(10):  # several reconciles and backoff steps later: still not available, not Running
            ms = await kube.get(MODELSERVINGS, name, namespace)
            available = condition(ms, "Available")
            assert available is None or available["status"] == "False", available
            assert not (ms.get("status") or {}).get("availableReplicas")
            await asyncio.sleep(1)
        seen = await reasons(kube, namespace)
        assert not {"RoleRunning", "ServingGroupRunning"} & set(seen), seen
        assert seen["FailedCreate"] >= 1
        ms = await kube.get(MODELSERVINGS, name, namespace)
        cond = condition(ms, "ReplicaFailure")
        assert cond is not None and f"create Service {service}" in cond["message"] and "63" in cond["message"]
        assert (condition(ms, "Available") or {}).get("status") == "False"
        with pytest.raises(NotFound):
            await kube.get(SERVICES, service, namespace)


async def test_same_name_recreate_waits_for_a_lingering_pod(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    """The old ModelServing's pod lingers behind a finalizer; the new same-named one creates the rest,
    waits for that name without looping, and completes once the old pod is gone."""
    spec = modelserving("same", roles=[role("prefill", workers=1)])
    entry, held = "same-0-prefill-0-0", "same-0-prefill-0-1"
    client = await CountingClient.from_kubeconfig(str(kubeconfig))
    async with running_manager(str(kubeconfig), namespace, client=client):
        await kube.create(MODELSERVINGS, spec, namespace)
        await wait_available(kube, namespace, "same", 1)
        await kube.patch(PODS, held, {"metadata": {"finalizers": [HOLD]}}, namespace)
        old = await kube.get(MODELSERVINGS, "same", namespace)
        await kube.delete(MODELSERVINGS, "same", namespace)

        async def only_the_held_pod_left() -> bool:
            pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace)).items}
            return set(pods) == {held} and bool(pods[held]["metadata"].get("deletionTimestamp"))

        await eventually(only_the_held_pod_left, timeout=120, description="the old pods gone but the held one")
        new = await kube.create(MODELSERVINGS, spec, namespace)
        assert new["metadata"]["uid"] != old["metadata"]["uid"]

        async def new_entry_pod() -> KubeObject | None:
            pod = (await live_pods(kube, namespace, "same")).get(entry)
            ours = pod is not None and pod["metadata"]["ownerReferences"][0]["uid"] == new["metadata"]["uid"]
            return pod if ours else None

        new_entry = await eventually(new_entry_pod, timeout=120, description="the new ModelServing's entry pod")
        before_requests, before_reconciles = Counter(client.requests), reconciles()
        await asyncio.sleep(15)
        requests = client.requests - before_requests
        assert requests[("DELETE", entry)] == 0, f"the new entry pod was torn down {requests[('DELETE', entry)]} times"
        assert (await live_pods(kube, namespace, "same"))[entry]["metadata"]["uid"] == new_entry["metadata"]["uid"]
        assert requests[("POST", held)] <= 3, requests  # the held name is waited for, not hammered
        assert reconciles() - before_reconciles <= 30
        assert sum(requests.values()) <= 80, requests
        cond = condition(await kube.get(MODELSERVINGS, "same", namespace), "ReplicaFailure")
        assert cond is not None and f"create Pod {held}" in cond["message"] and "another owner" in cond["message"]

        await kube.patch(PODS, held, {"metadata": {"finalizers": None}}, namespace)
        await wait_available(kube, namespace, "same", 1, timeout=180)
        pods = await live_pods(kube, namespace, "same")
        assert pods[entry]["metadata"]["uid"] == new_entry["metadata"]["uid"]
        assert pods[held]["metadata"]["ownerReferences"][0]["uid"] == new["metadata"]["uid"]

        async def cleared() -> bool:
            cond = condition(await kube.get(MODELSERVINGS, "same", namespace), "ReplicaFailure")
            return cond is None or cond["status"] == "False"

        await eventually(cleared, timeout=60, description="ReplicaFailure cleared")
        assert (await reasons(kube, namespace))["RoleRecreating"] == 0


async def test_role_scale_up_from_zero_under_serving_group_recreate(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    roles = [role("prefill", workers=1), role("decode", replicas=0)]
    spec = modelserving("zero", roles=roles, recoveryPolicy="ServingGroupRecreate")
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, spec, namespace)
        await wait_available(kube, namespace, "zero", 1)
        before = {n: p["metadata"]["uid"] for n, p in (await live_pods(kube, namespace, "zero")).items()}
        assert set(before) == {"zero-0-prefill-0-0", "zero-0-prefill-0-1"}
        roles[1]["replicas"] = 1
        await kube.patch(MODELSERVINGS, "zero", {"spec": {"template": {"roles": roles}}}, namespace)

        async def scaled() -> bool:
            ms = await kube.get(MODELSERVINGS, "zero", namespace)
            pods = await live_pods(kube, namespace, "zero")
            available = condition(ms, "Available") or {}
            return (
                "zero-0-decode-0-0" in pods
                and all(ready(p) for p in pods.values())
                and available.get("status") == "True"
                and (ms.get("status") or {}).get("observedGeneration") == ms["metadata"]["generation"]
            )

        await eventually(scaled, timeout=120, description="decode added and the group available")
        after = {n: p["metadata"]["uid"] for n, p in (await live_pods(kube, namespace, "zero")).items()}
        assert {n: after[n] for n in before} == before, "the group was recreated"
        assert (await reasons(kube, namespace))["ServingGroupRecreating"] == 0
