"""The cluster tier is real: garbage collection runs, Volcano gang-schedules onto kwok nodes."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio.client import ApiClient, ApiException, CoreV1Api, CustomObjectsApi

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.testing.controlplane import ClusterTier, listening_sockets

pytestmark = pytest.mark.cluster

T = TypeVar("T")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


async def eventually(what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 60.0) -> T:
    """Poll ``probe`` until it returns non-None; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = await probe()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.25)


async def test_owner_deletion_garbage_collects_dependents(namespace: str, api_client: ApiClient) -> None:
    core = CoreV1Api(api_client)
    owner = await core.create_namespaced_config_map(
        namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}
    )
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    await core.create_namespaced_config_map(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dependent", "ownerReferences": [ref]},
        },
    )
    await core.delete_namespaced_config_map("owner", namespace)

    async def dependent_gone() -> bool | None:
        try:
            await core.read_namespaced_config_map("dependent", namespace)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return None

    await eventually("the dependent ConfigMap to be garbage-collected", dependent_gone, timeout=120)


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "/".join(VOLCANO),
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def gang_pod(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/never-pulled:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def is_ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(c.type == "Ready" and c.status == "True" for c in conditions)


async def test_gang_scheduling_binds_whole_gangs_only(
    cluster: ClusterTier, namespace: str, api_client: ApiClient
) -> None:
    core = CoreV1Api(api_client)
    custom = CustomObjectsApi(api_client)
    # A gang that can never be complete: minMember 3, only 2 pods.
    await custom.create_namespaced_custom_object(*VOLCANO, namespace, "podgroups", podgroup("short", 3))
    for i in range(2):
        await core.create_namespaced_pod(namespace, gang_pod(f"short-{i}", "short"))
    short_created = time.monotonic()
    # A complete gang: minMember 2, 2 pods.
    await custom.create_namespaced_custom_object(*VOLCANO, namespace, "podgroups", podgroup("full", 2))
    for i in range(2):
        await core.create_namespaced_pod(namespace, gang_pod(f"full-{i}", "full"))

    async def full_gang_ready() -> list[Any] | None:
        pods = [await core.read_namespaced_pod(f"full-{i}", namespace) for i in range(2)]
        return pods if all(is_ready(p) for p in pods) else None

    pods = await eventually("both pods of the complete gang Running and Ready", full_gang_ready, timeout=60)
    node_names = {n.name for n in cluster.nodes}
    pod_cidr = ipaddress.ip_network(cluster.pod_cidr)
    for pod in pods:
        assert pod.spec.node_name in node_names
        assert ipaddress.ip_address(pod.status.pod_ip) in pod_cidr

    async def full_group_running() -> bool | None:
        pg = await custom.get_namespaced_custom_object(*VOLCANO, namespace, "podgroups", "full")
        return True if pg.get("status", {}).get("phase") == "Running" else None

    await eventually("PodGroup full Running", full_group_running, timeout=60)

    # The scheduler did consider the short gang (so the check below is not vacuous)...
    async def short_group_unschedulable() -> dict[str, Any] | None:
        pg = await custom.get_namespaced_custom_object(*VOLCANO, namespace, "podgroups", "short")
        conditions = pg.get("status", {}).get("conditions") or []
        found = any(c["type"] == "Unschedulable" and c["status"] == "True" for c in conditions)
        return pg if found else None

    await eventually("PodGroup short marked Unschedulable", short_group_unschedulable, timeout=60)
    # ...and, after 10 s of scheduling cycles (every 500 ms), bound none of its pods.
    await asyncio.sleep(max(0.0, 10.0 - (time.monotonic() - short_created)))
    short = await custom.get_namespaced_custom_object(*VOLCANO, namespace, "podgroups", "short")
    assert short.get("status", {}).get("phase") != "Running", short.get("status")
    for i in range(2):
        pod = await core.read_namespaced_pod(f"short-{i}", namespace)
        assert pod.spec.node_name is None, f"short-{i} was bound to {pod.spec.node_name}"
        assert pod.status.phase == "Pending"


def test_fake_nodes_are_ready_with_gpus(cluster: ClusterTier) -> None:
    assert len(cluster.nodes) == 4
    for node in cluster.nodes:
        body = cluster.client.get(f"/api/v1/nodes/{node.name}")
        assert body["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert body["metadata"]["labels"]["nvidia.com/gpu.product"] == node.gpu_product
        assert not body["spec"].get("taints")
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in body["status"]["conditions"])


def test_nodes_can_be_added_and_removed(cluster: ClusterTier) -> None:
    node = cluster.add_node("kwok-extra")
    try:
        assert node.name in {n.name for n in cluster.nodes}
    finally:
        cluster.remove_node("kwok-extra")
    assert "kwok-extra" not in {n.name for n in cluster.nodes}
    assert cluster.client.raw("GET", "/api/v1/nodes/kwok-extra")[0] == 404


def test_every_component_listens_on_loopback_only(cluster: ClusterTier) -> None:
    names = set()
    for proc in cluster.processes:
        assert proc.pid is not None
        names.add(proc.name)
        for address, port in listening_sockets(proc.pid):
            assert ipaddress.ip_address(address).is_loopback, (proc.name, address, port)
    assert names == {"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "vc-scheduler"}


def graceful_pod(name: str, node: str) -> dict[str, Any]:
    """A pod bound to a fake node that terminates gracefully (30 s), like a real workload."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "registry.invalid/never-pulled:1"}],
        },
    }


async def test_kwok_deletes_each_terminating_pod_once_so_a_same_named_replacement_survives(
    cluster: ClusterTier, namespace: str, kube: KubeClient
) -> None:
    """A controller that re-creates a pod under its old name the moment it is gone keeps the replacement.

    kwok plays the kubelet's final delete by name, without the UID precondition the kubelet sends. The stock
    pod-delete stage deleted about one pod in ten twice, milliseconds apart (its own grace-0 delete updates the
    pod once more before removing it); the second delete removed whatever pod then had that name.
    """
    count = 40
    node = cluster.nodes[0].name
    names = [f"p-{i}" for i in range(count)]
    for name in names:
        await kube.create(PODS, graceful_pod(name, node), namespace)

    async def all_running() -> bool | None:
        listed = await kube.list(PODS, namespace)
        running = [p for p in listed.items if (p.get("status") or {}).get("phase") == "Running"]
        return True if len(running) == count else None

    await eventually(f"{count} pods Running on {node}", all_running)
    original = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (await kube.list(PODS, namespace)).items}
    start_rv = (await kube.list(PODS, namespace)).resource_version

    async def recreate_as_each_goes() -> None:
        left = set(names)
        async for event in kube.watch(PODS, namespace, resource_version=start_rv):
            name = event.object.get("metadata", {}).get("name")
            if event.type == "DELETED" and name in left:
                left.discard(name)
                await kube.create(PODS, graceful_pod(name, node), namespace)
                if not left:
                    return

    recreating = asyncio.create_task(recreate_as_each_goes())
    await asyncio.sleep(0.2)  # the watch is open
    for name in names:
        await kube.delete(PODS, name, namespace, uid=original[name])
    await asyncio.wait_for(recreating, timeout=60)
    await asyncio.sleep(3)  # a late second delete would have landed by now

    replacements = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace)).items}
    missing = sorted(set(names) - set(replacements))
    assert not missing, f"replacements deleted by a late second delete: {missing}"
    for name, pod in replacements.items():
        assert pod["metadata"]["uid"] != original[name]
        assert not pod["metadata"].get("deletionTimestamp"), f"{name}'s replacement is being deleted"
    kwok_log = (cluster.run_dir / "logs" / "kwok.log").read_text()
    deletes = [line for line in kwok_log.splitlines() if '"msg":"Delete pod"' in line and f'"{namespace}/' in line]
    assert len(deletes) == count, f"kwok sent {len(deletes)} deletes for {count} terminating pods"
