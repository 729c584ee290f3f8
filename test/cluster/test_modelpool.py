"""ModelPool swaps end to end in the cluster tier: one kwok node with 1 GPU labelled for the pool.

The ModelServing controller creates the members' pods, Volcano schedules them on the pool's node, kwok runs them
with IPs in 127.100.0.0/16, and :class:`~test.cluster.poolutil.PoolEngines` serves each pod's ``/metrics`` with
settable running/waiting request gauges. Demand is written by the test as the activator writes it (the pool's
demand annotation, refreshed every 10 s while "held"). A watch on the namespace's pods
(:class:`~test.cluster.poolutil.PodTimeline`) proves that no two members have pods at once (one slot).

What it shows:

* a cold pool warms its default; a held request for the other member swaps: the idle resident to 0, its pods
  gone, then the target to 1 and Ready; the phase goes Swapping then Ready; ``lastSwap`` has each step's time;
* a busy resident defers the swap (``SwapDeferred/PodsBusy``) with no replica change, and the swap proceeds once
  it is idle;
* unreadable engine metrics defer it (``SwapDeferred/IdleCheckFailed``), the resident stays;
* sticky: requests for the resident, and demand that has expired, never swap;
* two slots, three members: the free slot is used first, then the least recently used idle resident goes;
* the manager killed with SIGKILL at each step of a swap (Draining, Releasing, Loading) resumes from the pool's
  status and never runs both members at once;
* a target that never gets Ready degrades the pool past its ``swapBudget`` (``Ready/SwapStalled`` naming the
  target's pod, one ``SwapStalled`` Warning) while the controller keeps waiting: the old member stays at 0, and
  the swap completes once the target is Ready.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.crdgen import build_crds
from kthena_py.api.modelpool import (
    CONDITION_READY,
    CONDITION_SWAP_DEFERRED,
    PHASE_DEGRADED,
    PHASE_READY,
    PHASE_SWAPPING,
    REASON_IDLE_CHECK_FAILED,
    REASON_PODS_BUSY,
    STEP_DRAINING,
    STEP_LOADING,
    STEP_RELEASING,
)
from kthena_py.controllers.resources import MODELPOOLS, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import EVENTS, PODS
from kthena_py.plan.modelpool.demand import DEMAND_LIVE_SECONDS, parse_demand_time
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.controlplane import ClusterTier, FakeNode
from kthena_py.testing.controlplane.kwokstages import HOLD_READY, HOLD_READY_ANNOTATION, RELEASED
from kthena_py.testing.wait import eventually
from kthena_py.vocab.conditions import REASON_SWAP_STALLED
from kthena_py.vocab.labels import SERVING_NAME

from .poolutil import (
    POOL_LABEL,
    HeldDemand,
    PodTimeline,
    PoolEngines,
    condition,
    manager,
    pool_manifest,
    pool_status,
    serving_manifest,
    start_manager_process,
    write_demand,
)

pytestmark = pytest.mark.cluster

POOL = "pool"
HOLD_FINALIZER = "test.kthena-py.io/hold"
QUIET = 4.0
"""Seconds a test watches for a change that must not happen (the controller re-probes every 2 s)."""


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


def _slot_node(cluster: ClusterTier, namespace: str, gpus: int) -> Iterator[str]:
    node = cluster.add_node(FakeNode(f"slot-{namespace}"[:60], gpus=gpus, labels={POOL_LABEL: namespace}))
    try:
        yield namespace
    finally:
        cluster.remove_node(node.name)


@pytest.fixture
def slot(cluster: ClusterTier, namespace: str, crds: None) -> Iterator[str]:
    yield from _slot_node(cluster, namespace, 1)


@pytest.fixture
def two_slots(cluster: ClusterTier, namespace: str, crds: None) -> Iterator[str]:
    yield from _slot_node(cluster, namespace, 2)


async def replicas(kube: KubeClient, namespace: str) -> dict[str, int]:
    return {
        ms["metadata"]["name"]: int(ms["spec"].get("replicas", 1))
        for ms in (await kube.list(MODELSERVINGS, namespace)).items
    }


async def pods_of(kube: KubeClient, namespace: str, member: str) -> list[dict[str, Any]]:
    return (await kube.list(PODS, namespace, label_selector=f"{SERVING_NAME}={member}")).items


async def reasons(kube: KubeClient, namespace: str) -> set[str]:
    return {e.get("reason", "") for e in (await kube.list(EVENTS, namespace)).items}


async def has_events(kube: KubeClient, namespace: str, wanted: set[str]) -> None:
    """The Events with these reasons are recorded (the recorder writes them a moment later)."""

    async def recorded() -> bool:
        return wanted <= await reasons(kube, namespace)

    await eventually(recorded, timeout=30, interval=0.5, description=f"Events {sorted(wanted)}")


async def create_pool(
    kube: KubeClient,
    namespace: str,
    slot: str,
    members: tuple[str, ...] = ("alpha", "beta"),
    *,
    slots: int = 1,
    held: tuple[str, ...] = (),
    swap_budget: str | None = None,
) -> None:
    """Members at 0 replicas (those in ``held`` start not Ready), then the pool; wait until its default is Ready."""
    for member in members:
        manifest = serving_manifest(member, slot)
        if member in held:
            entry = manifest["spec"]["template"]["roles"][0]["entryTemplate"]
            entry["metadata"] = {"annotations": {HOLD_READY_ANNOTATION: HOLD_READY}}
        await kube.create(MODELSERVINGS, manifest, namespace)
    await kube.create(
        MODELPOOLS,
        pool_manifest(POOL, members, slot=slot, default=members[0], slots=slots, swap_budget=swap_budget),
        namespace,
    )

    async def default_ready() -> bool:
        status = await pool_status(kube, namespace, POOL)
        return status.get("residentMembers") == [members[0]] and status.get("phase") == PHASE_READY

    await eventually(default_ready, timeout=120, interval=0.2, description="default member resident and Ready")


async def wait_resident(kube: KubeClient, namespace: str, member: str, phases: list[str], timeout: float = 120) -> None:
    async def resident() -> bool:
        status = await pool_status(kube, namespace, POOL)
        if not phases or phases[-1] != status.get("phase"):
            phases.append(str(status.get("phase")))
        return status.get("residentMember") == member and status.get("phase") == PHASE_READY

    await eventually(resident, timeout=timeout, interval=0.1, description=f"{member} resident")


async def stays(kube: KubeClient, namespace: str, expected: dict[str, int], seconds: float = QUIET) -> None:
    """No replica change for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert await replicas(kube, namespace) == expected
        await asyncio.sleep(0.5)


def report_swap(status: dict[str, Any]) -> dict[str, float]:
    """The steps of ``lastSwap`` in seconds (printed: the measured swap time on kwok)."""
    last = status["lastSwap"]
    times = {k: parse_demand_time(last.get(k)) for k in ("started", "drained", "released", "ready")}
    assert all(v is not None for v in times.values()), last
    t: dict[str, float] = {k: float(v) for k, v in times.items() if v is not None}
    assert t["started"] <= t["drained"] <= t["released"] <= t["ready"], last
    steps = {
        "draining": t["drained"] - t["started"],
        "releasing": t["released"] - t["drained"],
        "loading": t["ready"] - t["released"],
        "total": float(last["durationSeconds"]),
    }
    print(f"\nswap {last['from']} -> {last['to']}: " + ", ".join(f"{k} {v:.2f}s" for k, v in steps.items()))
    return steps


async def test_a_held_request_swaps_the_idle_resident_out(
    kube: KubeClient, namespace: str, kubeconfig: Path, slot: str
) -> None:
    async with (
        PoolEngines(kube, namespace, ["alpha", "beta"]),
        PodTimeline(kube, namespace) as timeline,
        manager(kubeconfig, namespace),
    ):
        await create_pool(kube, namespace, slot)
        assert await replicas(kube, namespace) == {"alpha": 1, "beta": 0}
        assert (await pool_status(kube, namespace, POOL))["residentMember"] == "alpha"
        phases: list[str] = []
        held_at = time.time()
        async with HeldDemand(kube, namespace, POOL, "beta"):
            await wait_resident(kube, namespace, "beta", phases)
        answered = time.time() - held_at
        status = await pool_status(kube, namespace, POOL)
        assert status["residentMembers"] == ["beta"] and "swap" not in status and "pendingMember" not in status
        assert phases[-2:] == [PHASE_SWAPPING, PHASE_READY], phases
        assert await replicas(kube, namespace) == {"alpha": 0, "beta": 1}
        assert not await pods_of(kube, namespace, "alpha")
        assert status["lastSwap"]["from"] == "alpha" and status["lastSwap"]["to"] == "beta"
        steps = report_swap(status)
        print(f"demand written -> beta resident and Ready: {answered:.2f}s")
        assert steps["total"] <= answered + 1
        assert timeline.overlaps == [], timeline.overlaps
        ups = [up for _, up in timeline.history]
        assert frozenset({"alpha"}) in ups and ups[-1] == frozenset({"beta"})
        last_alpha = max(i for i, up in enumerate(ups) if "alpha" in up)
        first_beta = min(i for i, up in enumerate(ups) if "beta" in up)
        assert last_alpha < first_beta and ups[first_beta - 1] == frozenset(), ups
        await has_events(kube, namespace, {"SwapStarted", "MemberReleased", "MemberLoading", "SwapCompleted"})
        # the cold pool's warm-up and the swap, each counted once
        labels = {"namespace": namespace, "pool": POOL, "result": "completed"}
        assert REGISTRY.get_sample_value("kthena_modelpool_swaps_total", labels) == 2


async def test_a_busy_resident_defers_the_swap_until_idle(
    kube: KubeClient, namespace: str, kubeconfig: Path, slot: str
) -> None:
    async with (
        PoolEngines(kube, namespace, ["alpha", "beta"]) as engines,
        PodTimeline(kube, namespace) as timeline,
        manager(kubeconfig, namespace),
    ):
        await create_pool(kube, namespace, slot)
        engines.running["alpha"] = 2
        engines.waiting["alpha"] = 1
        async with HeldDemand(kube, namespace, POOL, "beta"):

            async def deferred() -> dict[str, Any]:
                status = await pool_status(kube, namespace, POOL)
                cond = condition(status, CONDITION_SWAP_DEFERRED)
                return status if cond.get("status") == "True" and cond.get("reason") == REASON_PODS_BUSY else {}

            status = await eventually(deferred, timeout=60, interval=0.2)
            assert "3 requests running or waiting" in condition(status, CONDITION_SWAP_DEFERRED)["message"]
            assert status["phase"] == PHASE_SWAPPING and status["pendingMember"] == "beta"
            assert status["swap"]["step"] == STEP_DRAINING and status["evictingMember"] == "alpha"
            await stays(kube, namespace, {"alpha": 1, "beta": 0})
            engines.running["alpha"] = 0
            engines.waiting["alpha"] = 0
            await wait_resident(kube, namespace, "beta", [])
        status = await pool_status(kube, namespace, POOL)
        assert condition(status, CONDITION_SWAP_DEFERRED)["status"] == "False"
        report_swap(status)
        assert timeline.overlaps == []
        await has_events(kube, namespace, {REASON_PODS_BUSY})


async def test_unreadable_engine_metrics_keep_the_resident(
    kube: KubeClient, namespace: str, kubeconfig: Path, slot: str
) -> None:
    async with PoolEngines(kube, namespace, ["alpha", "beta"]) as engines, manager(kubeconfig, namespace):
        await create_pool(kube, namespace, slot)
        engines.broken.add("alpha")
        async with HeldDemand(kube, namespace, POOL, "beta"):

            async def failed() -> dict[str, Any]:
                status = await pool_status(kube, namespace, POOL)
                cond = condition(status, CONDITION_SWAP_DEFERRED)
                return status if cond.get("reason") == REASON_IDLE_CHECK_FAILED else {}

            status = await eventually(failed, timeout=60, interval=0.2)
            assert "HTTP 500" in condition(status, CONDITION_SWAP_DEFERRED)["message"]
            assert engines.scrapes.get("alpha", 0) >= 1
            await stays(kube, namespace, {"alpha": 1, "beta": 0})
            status = await pool_status(kube, namespace, POOL)
            assert status["residentMember"] == "alpha"
            assert condition(status, CONDITION_SWAP_DEFERRED)["reason"] == REASON_IDLE_CHECK_FAILED


async def test_sticky_requests_for_the_resident_and_expired_demand_never_swap(
    kube: KubeClient, namespace: str, kubeconfig: Path, slot: str
) -> None:
    async with PoolEngines(kube, namespace, ["alpha", "beta"]), manager(kubeconfig, namespace):
        await create_pool(kube, namespace, slot)
        await write_demand(kube, namespace, POOL, "alpha")
        await write_demand(kube, namespace, POOL, "beta", when=time.time() - DEMAND_LIVE_SECONDS - 5)
        await stays(kube, namespace, {"alpha": 1, "beta": 0})
        await write_demand(kube, namespace, POOL, "alpha")
        await stays(kube, namespace, {"alpha": 1, "beta": 0}, seconds=2)
        status = await pool_status(kube, namespace, POOL)
        assert status["residentMembers"] == ["alpha"] and "swap" not in status
        assert status["lastSwap"]["to"] == "alpha" and "from" not in status["lastSwap"]  # the cold pool's warm-up
        members = {m["name"]: m for m in status["members"]}
        assert members["alpha"]["resident"] is True and members["beta"]["phase"] == "Stopped"
        assert "lastRequestTime" in members["alpha"]


async def test_two_slots_three_members_the_least_recently_used_idle_resident_goes(
    kube: KubeClient, namespace: str, kubeconfig: Path, two_slots: str
) -> None:
    members = ("alpha", "beta", "gamma")
    async with (
        PoolEngines(kube, namespace, members),
        PodTimeline(kube, namespace, slots=2) as timeline,
        manager(kubeconfig, namespace),
    ):
        await create_pool(kube, namespace, two_slots, members, slots=2)
        async with HeldDemand(kube, namespace, POOL, "beta"):
            await wait_resident(kube, namespace, "beta", [])
        status = await pool_status(kube, namespace, POOL)
        assert status["residentMembers"] == ["alpha", "beta"] and "from" not in status["lastSwap"]
        # alpha is used after beta: beta is now the least recently used resident
        await write_demand(kube, namespace, POOL, "alpha")
        async with HeldDemand(kube, namespace, POOL, "gamma"):
            await wait_resident(kube, namespace, "gamma", [])
        status = await pool_status(kube, namespace, POOL)
        assert status["residentMembers"] == ["alpha", "gamma"]
        assert status["lastSwap"]["from"] == "beta"
        assert await replicas(kube, namespace) == {"alpha": 1, "beta": 0, "gamma": 1}
        assert timeline.overlaps == []
        assert max(len(up) for _, up in timeline.history) == 2


async def _step(kube: KubeClient, namespace: str, step: str) -> dict[str, Any]:
    async def at() -> dict[str, Any]:
        status = await pool_status(kube, namespace, POOL)
        return status if (status.get("swap") or {}).get("step") == step else {}

    result: dict[str, Any] = await eventually(at, timeout=90, interval=0.05, description=f"swap step {step}")
    return result


async def _kill_and_restart(proc: asyncio.subprocess.Process, kubeconfig: Path, namespace: str) -> Any:
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    return await start_manager_process(kubeconfig, namespace)


async def _set_finalizer(kube: KubeClient, namespace: str, pod: str, on: bool) -> None:
    await kube.patch(PODS, pod, {"metadata": {"finalizers": [HOLD_FINALIZER] if on else None}}, namespace)


async def test_manager_killed_at_each_swap_step_resumes_from_the_status(
    kube: KubeClient, namespace: str, kubeconfig: Path, slot: str
) -> None:
    proc = await start_manager_process(kubeconfig, namespace)
    held_pod = ""
    try:
        async with (
            PoolEngines(kube, namespace, ["alpha", "beta"]) as engines,
            PodTimeline(kube, namespace) as timeline,
        ):
            await create_pool(kube, namespace, slot, held=("beta",))
            engines.running["alpha"] = 1
            async with HeldDemand(kube, namespace, POOL, "beta"):
                # Draining (deferred: alpha busy)
                await _step(kube, namespace, STEP_DRAINING)
                proc = await _kill_and_restart(proc, kubeconfig, namespace)
                await stays(kube, namespace, {"alpha": 1, "beta": 0})
                assert (await _step(kube, namespace, STEP_DRAINING))["pendingMember"] == "beta"
                # Releasing: alpha's pod held by a finalizer after its scale-down
                (pod,) = await pods_of(kube, namespace, "alpha")
                held_pod = pod["metadata"]["name"]
                await _set_finalizer(kube, namespace, held_pod, True)
                engines.running["alpha"] = 0
                await _step(kube, namespace, STEP_RELEASING)
                proc = await _kill_and_restart(proc, kubeconfig, namespace)
                await stays(kube, namespace, {"alpha": 0, "beta": 0})
                assert await pods_of(kube, namespace, "alpha") and not await pods_of(kube, namespace, "beta")
                await _set_finalizer(kube, namespace, held_pod, False)
                held_pod = ""
                # Loading: beta's pod is kept not Ready
                await _step(kube, namespace, STEP_LOADING)
                await eventually(lambda: pods_of(kube, namespace, "beta"), timeout=60)
                proc = await _kill_and_restart(proc, kubeconfig, namespace)
                await stays(kube, namespace, {"alpha": 0, "beta": 1}, seconds=2)
                assert (await _step(kube, namespace, STEP_LOADING))["swap"]["from"] == "alpha"
                (beta_pod,) = await pods_of(kube, namespace, "beta")
                await kube.patch(
                    PODS,
                    beta_pod["metadata"]["name"],
                    {"metadata": {"annotations": {HOLD_READY_ANNOTATION: RELEASED}}},
                    namespace,
                )
                await wait_resident(kube, namespace, "beta", [])
            status = await pool_status(kube, namespace, POOL)
            report_swap(status)
            assert timeline.overlaps == [], timeline.overlaps
    finally:
        if held_pod:
            await _set_finalizer(kube, namespace, held_pod, False)
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


async def test_a_target_never_ready_degrades_the_pool_past_its_swap_budget(
    kube: KubeClient, namespace: str, kubeconfig: Path, slot: str
) -> None:
    async with (
        PoolEngines(kube, namespace, ["alpha", "beta"]),
        PodTimeline(kube, namespace) as timeline,
        manager(kubeconfig, namespace),
    ):
        await create_pool(kube, namespace, slot, held=("beta",), swap_budget="3s")
        async with HeldDemand(kube, namespace, POOL, "beta"):

            async def stalled() -> bool:
                status = await pool_status(kube, namespace, POOL)
                return status.get("phase") == PHASE_DEGRADED

            await eventually(stalled, timeout=120, interval=0.2, description="pool Degraded by a stalled swap")
            status = await pool_status(kube, namespace, POOL)
            ready = condition(status, CONDITION_READY)
            (beta_pod,) = await pods_of(kube, namespace, "beta")
            assert ready["status"] == "False" and ready["reason"] == REASON_SWAP_STALLED, ready
            assert beta_pod["metadata"]["name"] in ready["message"] and "3s" in ready["message"], ready
            assert status["swap"]["to"] == "beta" and status["swap"]["step"] == STEP_LOADING
            # still waiting: nothing brings alpha back
            await stays(kube, namespace, {"alpha": 0, "beta": 1})
            assert (await pool_status(kube, namespace, POOL))["phase"] == PHASE_DEGRADED
            await has_events(kube, namespace, {REASON_SWAP_STALLED})
            stalled_events = [
                e for e in (await kube.list(EVENTS, namespace)).items if e.get("reason") == REASON_SWAP_STALLED
            ]
            assert len(stalled_events) == 1 and int(stalled_events[0].get("count") or 1) == 1, stalled_events
            await kube.patch(
                PODS,
                beta_pod["metadata"]["name"],
                {"metadata": {"annotations": {HOLD_READY_ANNOTATION: RELEASED}}},
                namespace,
            )
            await wait_resident(kube, namespace, "beta", [])
        assert await replicas(kube, namespace) == {"alpha": 0, "beta": 1}
        assert timeline.overlaps == [], timeline.overlaps
