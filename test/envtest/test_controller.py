"""The controller engine against a real apiserver: watches, outcomes, backoff, isolation, metrics."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONFIGMAPS, SECRETS
from kthena_py.runtime import metrics
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Controller
from kthena_py.runtime.reconcile import Request, Result, TerminalError
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest


class Labeller:
    """Marks ConfigMaps reconciled; some names misbehave on purpose."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.calls: Counter[str] = Counter()

    async def reconcile(self, request: Request) -> Result | None:
        self.calls[request.name] += 1
        if request.name.startswith("poison"):
            raise RuntimeError("bug in reconcile")
        if request.name.startswith("terminal"):
            raise TerminalError("user must fix the object")
        if request.name.startswith("periodic"):
            return Result(requeue_after=0.2)
        cm = await self.client.get(CONFIGMAPS, request.name, request.namespace)
        if (cm["metadata"].get("labels") or {}).get("reconciled") != "yes":
            await self.client.patch(
                CONFIGMAPS, request.name, {"metadata": {"labels": {"reconciled": "yes"}}}, request.namespace
            )
        return None


def sample(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_outcomes_backoff_and_isolation(kube: KubeClient, namespace: str) -> None:
    cache = SharedCache(kube, namespace=namespace)
    rec = Labeller(kube)
    ctrl = Controller("test-labeller", rec, cache, workers=2).for_(CONFIGMAPS)
    for n in ("poison", "terminal", "periodic", "good-0", "good-1"):
        await kube.create(CONFIGMAPS, {"metadata": {"name": n}}, namespace)
    await cache.start()
    assert await cache.wait_for_sync(30)
    await ctrl.start()
    try:

        async def good_done() -> bool:
            objs = (await kube.list(CONFIGMAPS, namespace, label_selector="reconciled=yes")).items
            return {o["metadata"]["name"] for o in objs} == {"good-0", "good-1"}

        await eventually(good_done, timeout=30, description="good objects reconciled")
        # A later object is still served while the poisoned one keeps failing.
        await kube.create(CONFIGMAPS, {"metadata": {"name": "good-2"}}, namespace)
        await eventually(lambda: rec.calls["good-2"] >= 1, timeout=30)
        await eventually(lambda: rec.calls["poison"] >= 5, timeout=60, description="poison retried")
        await eventually(lambda: rec.calls["periodic"] >= 3, timeout=30, description="periodic requeue")
        poison = Request(namespace, "poison")
        assert ctrl.queue.num_requeues(poison) >= 4
        # Backoff: the retries of the poisoned key slow down exponentially (5 ms * 2^n), so after
        # n failures the next one is at least 5 ms * 2^n away; its count grows far slower than the
        # periodic key's 5/s once n passes ~6.
        assert rec.calls["terminal"] == 1
        assert sample("controller_runtime_reconcile_panics_total", {"controller": "test-labeller"}) >= 5
        assert sample("controller_runtime_terminal_reconcile_errors_total", {"controller": "test-labeller"}) == 1
        assert sample("controller_runtime_reconcile_total", {"controller": "test-labeller", "result": "success"}) >= 3
        assert (
            sample("controller_runtime_reconcile_total", {"controller": "test-labeller", "result": "requeue_after"})
            >= 2
        )
        assert sample("workqueue_retries_total", {"name": "test-labeller", "controller": "test-labeller"}) >= 5
        # A terminal error is retried only when the object changes again.
        await kube.patch(CONFIGMAPS, "terminal", {"data": {"fixed": "yes"}}, namespace)
        await eventually(lambda: rec.calls["terminal"] == 2, timeout=30)
    finally:
        await ctrl.stop(drain=True, timeout=10)
        await cache.stop()


async def test_owns_maps_children_to_their_controller(kube: KubeClient, namespace: str) -> None:
    cache = SharedCache(kube, namespace=namespace)
    seen: list[Request] = []

    class RequestLog:
        """A reconciler that only logs the requests it is given."""

        async def reconcile(self, request: Request) -> Result | None:
            seen.append(request)
            return None

    ctrl = Controller("test-owner", RequestLog(), cache).owns(SECRETS, CONFIGMAPS)
    await cache.start()
    await ctrl.start()
    try:
        owner = await kube.create(CONFIGMAPS, {"metadata": {"name": "owner"}}, namespace)
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        await kube.create(SECRETS, {"metadata": {"name": "child", "ownerReferences": [ref]}}, namespace)
        await kube.create(SECRETS, {"metadata": {"name": "orphan"}}, namespace)
        await eventually(lambda: Request(namespace, "owner") in seen, timeout=30)
        await asyncio.sleep(0.5)
        assert set(seen) == {Request(namespace, "owner")}
    finally:
        await ctrl.stop(drain=False)
        await cache.stop()


async def test_a_settling_reconcile_frees_its_worker_and_the_next_one_reads_its_writes(
    kube: KubeClient, namespace: str
) -> None:
    """One worker; each reconcile creates a Secret and hands the wait for the cache to show it to the engine.

    Each first reconcile asks for its key again before it returns (as an event arriving meanwhile would): the second
    reconcile must come only once the cache shows the first one's Secret, while the worker served other keys.
    """
    cache = SharedCache(kube, namespace=namespace)
    cache.informer(SECRETS)
    saw_own_secret: list[bool] = []
    calls: Counter[str] = Counter()
    ctrl: Controller | None = None

    class SecretMaker:
        async def reconcile(self, request: Request) -> Result | None:
            calls[request.name] += 1
            if calls[request.name] > 1:  # the previous reconcile's Secret must be visible now
                saw_own_secret.append(cache.get(SECRETS, f"{request.name}-child", namespace) is not None)
                return None
            child = f"{request.name}-child"
            await kube.create(SECRETS, {"metadata": {"name": child}}, namespace)
            assert ctrl is not None
            ctrl.enqueue(request)  # in progress: queued for after the settle

            async def settle() -> None:
                await cache.wait_for(
                    [(SECRETS, child, namespace)], lambda: cache.get(SECRETS, child, namespace) is not None, 30
                )

            return Result(settle=settle)

    ctrl = Controller("test-settle", SecretMaker(), cache, workers=1).for_(CONFIGMAPS)
    await cache.start()
    assert await cache.wait_for_sync(30)
    await ctrl.start()
    try:
        for name in ("a", "b", "c"):
            await kube.create(CONFIGMAPS, {"metadata": {"name": name}}, namespace)
        await eventually(lambda: all(calls[n] >= 2 for n in "abc"), timeout=30, description="each key twice")
        assert saw_own_secret == [True, True, True]
    finally:
        await ctrl.stop(drain=True, timeout=10)
        await cache.stop()
