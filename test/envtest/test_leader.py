"""Leader election with two managers against one apiserver.

Manager A reaches the API through a proxy the test can cut or stall; its reconciler writes through a
separate, uncut connection, so if A kept reconciling after losing the lease its writes would land.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONFIGMAPS, LEASES
from kthena_py.runtime import metrics
from kthena_py.runtime.controller import Controller
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.testing.proxy import proxy_kubeconfig
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

LEASE = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5}
# A wide margin between the renew deadline and the lease duration, so that a loaded machine's
# scheduling delays cannot eat it (the bound itself is measured in bench/faults.py).
STALL_LEASE = {"lease_duration": 8.0, "renew_deadline": 4.0, "retry_period": 1.0}


class Stamper:
    """Writes its identity onto every ConfigMap, again every 0.2 s, and logs when it wrote."""

    def __init__(self, identity: str, client: KubeClient, writes: list[tuple[str, float]]) -> None:
        self.identity = identity
        self.client = client
        self.writes = writes
        self.wall: list[tuple[str, float]] = []

    async def reconcile(self, request: Request) -> Result | None:
        await self.client.patch(
            CONFIGMAPS, request.name, {"metadata": {"annotations": {"holder": self.identity}}}, request.namespace
        )
        self.writes.append((self.identity, time.monotonic()))
        self.wall.append((self.identity, time.time()))
        return Result(requeue_after=0.2)


def manager(client: KubeClient, identity: str, namespace: str, lease: dict[str, float] | None = None) -> Manager:
    return Manager(
        client,
        ManagerOptions(
            namespace=namespace,
            leader_elect=True,
            leader_election_id="test-leader",
            leader_election_namespace=namespace,
            identity=identity,
            metrics_bind_address="0",
            health_probe_bind_address="0",
            **(lease or LEASE),
        ),
    )


async def test_one_leader_takeover_and_no_writes_after_loss(kubeconfig: Path, kube: KubeClient, namespace: str) -> None:
    proxy, proxied_cfg = await proxy_kubeconfig(kubeconfig, f"leader-{namespace}")

    a_client = await KubeClient.from_kubeconfig(str(proxied_cfg))
    b_client = await KubeClient.from_kubeconfig(str(kubeconfig))
    writes: list[tuple[str, float]] = []
    for n in ("x", "y"):
        await kube.create(CONFIGMAPS, {"metadata": {"name": n}}, namespace)

    a = manager(a_client, "a", namespace)
    a.add_controller(Controller("stamp-a", Stamper("a", kube, writes), a.cache).for_(CONFIGMAPS))
    b = manager(b_client, "b", namespace)
    b.add_controller(Controller("stamp-b", Stamper("b", kube, writes), b.cache).for_(CONFIGMAPS))
    stop = asyncio.Event()
    a_task = asyncio.create_task(a.run(stop))
    try:
        await eventually(lambda: a.leading.is_set(), timeout=30, description="a leads")
        b_task = asyncio.create_task(b.run(stop))
        await eventually(lambda: len([w for w in writes if w[0] == "a"]) >= 6, timeout=30)
        await asyncio.sleep(1.0)
        assert not b.leading.is_set()
        assert {w[0] for w in writes} == {"a"}
        assert metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": "test-leader"}) is not None

        # A loses its connection to the API: it must stop reconciling before B can take over.
        proxy.refusing = True
        proxy.drop_connections()
        assert await asyncio.wait_for(a_task, 30) == 1
        a_stopped = time.monotonic()
        await eventually(lambda: b.leading.is_set(), timeout=30, description="b takes over")
        await eventually(lambda: len([w for w in writes if w[0] == "b"]) >= 4, timeout=30)
        a_writes = [t for who, t in writes if who == "a"]
        b_writes = [t for who, t in writes if who == "b"]
        assert max(a_writes) <= a_stopped, "a wrote after losing the lease"
        assert min(b_writes) > max(a_writes), "a and b reconciled at the same time"
        lease = await kube.get(LEASES, "test-leader", namespace)
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] >= 1

        # A graceful stop releases the lease.
        stop.set()
        assert await asyncio.wait_for(b_task, 30) == 0
        lease = await kube.get(LEASES, "test-leader", namespace)
        assert lease["spec"]["holderIdentity"] == ""
    finally:
        stop.set()
        a_task.cancel()
        await asyncio.gather(a_task, return_exceptions=True)
        await a_client.close()
        await b_client.close()
        await proxy.stop()


def _micro(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def test_stalled_leader_stops_within_the_renew_deadline(
    kubeconfig: Path, kube: KubeClient, namespace: str
) -> None:
    """A's connection stalls (packets held, nothing refused): its renews hang, yet it must stop leading
    at the renew deadline, before B can take the lease, and write nothing after B acquired it."""
    proxy, proxied_cfg = await proxy_kubeconfig(kubeconfig, f"stall-{namespace}")
    a_client = await KubeClient.from_kubeconfig(str(proxied_cfg))
    b_client = await KubeClient.from_kubeconfig(str(kubeconfig))
    writes: list[tuple[str, float]] = []
    await kube.create(CONFIGMAPS, {"metadata": {"name": "x"}}, namespace)
    a_stamper, b_stamper = Stamper("a", kube, writes), Stamper("b", kube, writes)
    a = manager(a_client, "a", namespace, STALL_LEASE)
    a.add_controller(Controller("stall-a", a_stamper, a.cache).for_(CONFIGMAPS))
    b = manager(b_client, "b", namespace, STALL_LEASE)
    b.add_controller(Controller("stall-b", b_stamper, b.cache).for_(CONFIGMAPS))
    stop = asyncio.Event()
    a_task = asyncio.create_task(a.run(stop))
    b_task: asyncio.Task[int] | None = None
    try:
        await eventually(lambda: len(a_stamper.wall) >= 4, timeout=30, description="a leads and writes")
        b_task = asyncio.create_task(b.run(stop))
        await asyncio.sleep(1.0)
        assert not b.leading.is_set()

        proxy.stall()
        await eventually(lambda: len(b_stamper.wall) >= 3, timeout=60, description="b takes over and writes")
        lease = await kube.get(LEASES, "test-leader", namespace)
        assert lease["spec"]["holderIdentity"] == "b"
        b_acquired = _micro(lease["spec"]["acquireTime"])  # B's clock, read before it sent the takeover
        a_after = [t - b_acquired for _, t in a_stamper.wall if t >= b_acquired]
        assert not a_after, f"a wrote {len(a_after)} time(s) after b acquired the lease (up to {max(a_after):.2f}s)"
        assert min(t for _, t in b_stamper.wall) > max(t for _, t in a_stamper.wall), "a and b overlapped"
        assert a_task.done() and a_task.result() == 1, "a must have given up leading while its renews hung"
    finally:
        proxy.resume()
        stop.set()
        a_task.cancel()
        await asyncio.gather(a_task, return_exceptions=True)
        if b_task is not None:
            await asyncio.wait_for(asyncio.gather(b_task, return_exceptions=True), 30)
        await a_client.close()
        await b_client.close()
        await proxy.stop()
