"""The eviction budget under a storm: four clients evict every live pod of a protected ModelServing over and over
for a minute, while a LIST+WATCH of the namespace checks every pod state the API server reports.

A unit is counted ready by the user's definition (:mod:`kthena_py.testing.evictionstorm`: every pod it should
have exists, Running, Ready, not terminating). The budget holds when no observed state has fewer ready units than
``minAvailable``; the storm must also grant evictions (a webhook that denies everything keeps the budget too, and
is useless). Three shapes: ServingGroup level with one webhook replica, the same with two replicas behind a
round-robin proxy whose connections are dropped every half second, and Role level.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.testing.evictionstorm import StormReport, run_storm

from .evictionutil import Replica, RoundRobinProxy, replica, webhook_installed
from .msutil import modelserving, role, wait_available

pytestmark = pytest.mark.cluster

STORM_SECONDS = float(os.environ.get("KTHENA_PY_STORM_SECONDS", "60"))
CLIENTS = 4


@contextlib.asynccontextmanager
async def storm_clients(kubeconfig: Path, count: int) -> AsyncIterator[list[KubeClient]]:
    made = [await KubeClient.from_kubeconfig(str(kubeconfig)) for _ in range(count + 1)]
    try:
        yield made
    finally:
        for client in made:
            await client.close()


@contextlib.asynccontextmanager
async def webhook_replicas(
    kube: KubeClient, kubeconfig: Path, namespace: str, count: int
) -> AsyncIterator[tuple[list[Replica], RoundRobinProxy]]:
    """``count`` manager replicas serving the eviction webhook behind one round-robin proxy."""
    async with contextlib.AsyncExitStack() as stack:
        replicas = [
            await stack.enter_async_context(
                replica(str(kubeconfig), namespace, leader_elect=count > 1, identity=f"storm-{i}")
            )
            for i in range(count)
        ]
        proxy = await RoundRobinProxy([r.port for r in replicas]).start()
        stack.push_async_callback(proxy.stop)
        await stack.enter_async_context(webhook_installed(kube, namespace, proxy.port, replicas))
        yield replicas, proxy


async def storm(
    kube: KubeClient, kubeconfig: Path, namespace: str, ms: dict[str, Any], groups: int, *, webhooks: int = 1
) -> tuple[StormReport, list[Replica]]:
    async with webhook_replicas(kube, kubeconfig, namespace, webhooks) as (replicas, proxy):
        await kube.create(MODELSERVINGS, ms, namespace)
        await wait_available(kube, namespace, ms["metadata"]["name"], groups, timeout=180)
        stored = await kube.get(MODELSERVINGS, ms["metadata"]["name"], namespace)
        async with storm_clients(kubeconfig, CLIENTS) as made:
            report = await run_storm(
                made[:CLIENTS],
                made[CLIENTS],
                stored,
                seconds=STORM_SECONDS,
                on_tick=proxy.drop_connections if webhooks > 1 else None,
            )
        return report, replicas


def check(report: StormReport) -> None:
    print(report.summary())
    assert report.errors == 0, report.error_samples
    assert report.granted > 0 and report.denied > 0, "the storm must both spend and hit the budget"
    assert report.held, f"ready units fell below minAvailable: {report.summary()}; first: {report.first_below_pods}"


async def test_serving_group_budget_holds_under_an_eviction_storm(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    strategy = {"protectionLevel": "ServingGroup", "minAvailable": 2}
    ms = modelserving("llm", 3, [role("main", workers=1, gpu=0)], rolloutStrategy={"evictionStrategy": strategy})
    report, _ = await storm(kube, kubeconfig, namespace, ms, 3)
    check(report)


async def test_serving_group_budget_holds_under_a_storm_served_by_two_webhook_replicas(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    strategy = {"protectionLevel": "ServingGroup", "minAvailable": 2}
    ms = modelserving("llm", 3, [role("main", workers=1, gpu=0)], rolloutStrategy={"evictionStrategy": strategy})
    report, replicas = await storm(kube, kubeconfig, namespace, ms, 3, webhooks=2)
    check(report)
    assert all(r.calls > 0 for r in replicas), [r.calls for r in replicas]


async def test_role_budget_holds_under_an_eviction_storm(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    strategy = {"protectionLevel": "Role", "roleMinAvailable": {"main": 2}}
    ms = modelserving(
        "llm", 2, [role("main", replicas=3, workers=1, gpu=0)], rolloutStrategy={"evictionStrategy": strategy}
    )
    report, _ = await storm(kube, kubeconfig, namespace, ms, 2)
    check(report)
