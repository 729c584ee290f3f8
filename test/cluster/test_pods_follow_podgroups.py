"""Pods follow their PodGroup within one ServingGroup reconcile (cluster tier: Volcano's PodGroup CRD is served).

Both reconcilers are called by hand on a manager's cache: the ServingGroup reconciler once, for a new ModelServing
whose PodGroups do not exist yet; while it holds the pods back, the gang reconciler creates the PodGroups. That one
ServingGroup reconcile must end with the pods created (it plans again once the PodGroups reach the cache) rather
than leave them to a later reconcile. Its wait is bounded generously here, so a slow machine cannot fail the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kthena_py.controllers.modelserving.gang import PodGroupReconciler
from kthena_py.controllers.modelserving.observe import register_informers
from kthena_py.controllers.modelserving.servinggroups import ServingGroupReconciler
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.wait import eventually

from .msutil import modelserving, role

pytestmark = pytest.mark.cluster


async def test_one_reconcile_creates_the_pods_once_the_podgroups_appear(kubeconfig: Path, namespace: str) -> None:
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    manager = Manager(
        client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    cache = manager.cache
    register_informers(cache)
    recorder = manager.recorder_for("modelserving-controller")
    groups = ServingGroupReconciler(client, cache, recorder, podgroup_wait=120.0)
    gang = PodGroupReconciler(client, cache, recorder)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    request = Request(namespace, "gang")
    try:
        await eventually(lambda: manager.leading.is_set() or task.done(), timeout=60)
        doc = modelserving("gang", replicas=2, roles=[role("prefill"), role("decode", workers=1)])
        await client.create(MODELSERVINGS, doc, namespace)
        await eventually(lambda: cache.get(MODELSERVINGS, "gang", namespace) is not None, timeout=60)

        reconcile = asyncio.create_task(groups.reconcile(request))
        # Its first pass records the revision and holds the pods back: no PodGroup exists yet.
        await eventually(lambda: bool(cache.list(CONTROLLER_REVISIONS)), timeout=60)
        assert not reconcile.done()
        assert (await client.list_all(PODS, namespace)).items == []
        assert (await client.list_all(PODGROUPS, namespace)).items == []

        await gang.reconcile(request)  # the gang reconciler creates the PodGroups meanwhile
        await asyncio.wait_for(reconcile, 120)

        pods = (await client.list_all(PODS, namespace)).items
        assert sorted(p["metadata"]["name"] for p in pods) == [
            "gang-0-decode-0-0",
            "gang-0-decode-0-1",
            "gang-0-prefill-0-0",
            "gang-1-decode-0-0",
            "gang-1-decode-0-1",
            "gang-1-prefill-0-0",
        ]
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()
