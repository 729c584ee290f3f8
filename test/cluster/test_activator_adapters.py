"""The activator routes LoRA adapter names on the cluster tier, with the adapter reconciler loading them.

The manager (the ModelServing controller and the adapter reconciler) runs in-process; the engines are fake apps on
the pod IPs kwok assigns (test/cluster/engineutil.py), answering the sidecar's LoRA endpoints
(test/cluster/adapterutil.py) and, on ``/v1/completions``, recording which pod got each request. The activator
runs in-process on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import collections
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kthena_py.api.crdgen import build_crds
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.plan.adapters.desired import adapter_label, source_digest
from kthena_py.plan.modelserving.core import naming
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import ACTIVATOR_HOLD_BUDGET, ACTIVATOR_PORT, LORA_ADAPTERS, LORA_PORT

from .adapterutil import FakeAdapters, labels_of_pods
from .engineutil import ENGINE_PORT, EngineFarm
from .msutil import container, live_pods, modelserving, running_manager, wait_available
from .test_activator import activator

pytestmark = pytest.mark.cluster

REFUSED_POD_MESSAGE = "CUDA out of memory while loading the adapter"


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


def fin(namespace: str) -> dict[str, str]:
    """The adapter, its source tagged with the test's namespace (the fake answers only its own test's loads)."""
    return {"name": "fin", "source": f"hf://acme/{namespace}/fin-lora"}


class RoutedAdapters(FakeAdapters):
    """The fake LoRA endpoints, refusing every load on the pods in ``refuse_pods``, plus a completions endpoint
    that records which pod answered and the ``model`` it was sent."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.refuse_pods: set[str] = set()
        self.served: list[tuple[str, str]] = []

    async def _do_load(self, pod: str, name: str, source: str, root: str, body: dict[str, Any]) -> tuple[int, str]:
        if pod in self.refuse_pods:
            return 500, REFUSED_POD_MESSAGE
        return await super()._do_load(pod, name, source, root, body)

    async def _completion(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.served.append((self.pod_of(request), str(body.get("model"))))
        return web.json_response({"object": "text_completion", "model": body.get("model"), "choices": []})

    def routes(self, app: web.Application) -> None:
        super().routes(app)
        app.router.add_post("/v1/completions", self._completion)


def lora_modelserving(name: str, adapters: list[dict[str, str]], *, replicas: int) -> dict[str, Any]:
    engine = container(gpu=0) | {"ports": [{"containerPort": ENGINE_PORT}]}
    roles = [{"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": {"spec": {"containers": [engine]}}}]
    ms = modelserving(name, replicas=replicas, roles=roles)
    ms["metadata"]["annotations"] = {
        LORA_ADAPTERS: json.dumps(adapters),
        LORA_PORT: str(ENGINE_PORT),  # the fake sidecar shares the engine's port
        ACTIVATOR_PORT: str(ENGINE_PORT),
        ACTIVATOR_HOLD_BUDGET: "60s",
    }
    return ms


async def test_a_thousand_requests_for_fin_reach_only_the_labelled_pods(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    fake = RoutedAdapters(tag=namespace, delay=0.1)
    lora = fin(namespace)
    pods = [naming.pod_name("llm", group, "r", 0, 0) for group in range(3)]
    fake.refuse_pods = {pods[0]}  # the engine of one pod cannot load the adapter: that pod stays unlabelled
    await kube.create(MODELSERVINGS, lora_modelserving("llm", [lora], replicas=3), namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        EngineFarm(kube, namespace, routes=fake.routes) as farm,
        activator(kubeconfig, namespace) as act,
        aiohttp.ClientSession() as http,
    ):
        fake.farm = farm
        await wait_available(kube, namespace, "llm", 3)
        assert sorted(await live_pods(kube, namespace, "llm")) == pods

        async def two_labelled() -> dict[str, dict[str, str]] | None:
            found = await labels_of_pods(kube, namespace, adapter_label(""))
            want = {adapter_label("fin"): source_digest(lora["source"])}
            return found if sorted(p for p, labels in found.items() if labels == want) == pods[1:] else None

        labels = await eventually(two_labelled, timeout=60, description="fin labelled on two of three pods")
        assert labels[pods[0]] == {}
        await eventually(lambda: act.catalog.directory().resolve_adapter("fin") is not None or None, timeout=30)
        url = f"http://127.0.0.1:{act.port}/v1/completions"
        limit = asyncio.Semaphore(50)

        async def ask(model: str) -> int:
            async with limit, http.post(url, json={"model": model, "prompt": "q"}) as answer:
                text = await answer.text()
                assert answer.status == 200, text
                return answer.status

        statuses = await asyncio.gather(*(ask("fin" if i % 2 else "llm_fin") for i in range(1000)))
        assert len(statuses) == 1000
        by_pod = collections.Counter(pod for pod, _ in fake.served)
        assert set(by_pod) == set(pods[1:]) and sum(by_pod.values()) == 1000  # none on the unlabelled pod
        assert min(by_pod.values()) > 100  # both labelled pods share the load (least in flight)
        assert {model for _, model in fake.served} == {"fin"}  # llm_fin was rewritten to the adapter's name
        # The base model still uses every Ready entry pod, the unlabelled one included.
        fake.served.clear()
        assert len(await asyncio.gather(*(ask("llm") for _ in range(60)))) == 60
        assert {pod for pod, _ in fake.served} == set(pods)


async def test_an_adapter_loaded_nowhere_yet_is_held_then_served(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    fake = RoutedAdapters(tag=namespace, delay=3.0)  # a slow download and load
    lora = fin(namespace)
    await kube.create(MODELSERVINGS, lora_modelserving("llm", [], replicas=1), namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        EngineFarm(kube, namespace, routes=fake.routes) as farm,
        activator(kubeconfig, namespace) as act,
        aiohttp.ClientSession() as http,
    ):
        fake.farm = farm
        await wait_available(kube, namespace, "llm", 1)
        await kube.patch(
            MODELSERVINGS, "llm", {"metadata": {"annotations": {LORA_ADAPTERS: json.dumps([lora])}}}, namespace
        )
        await eventually(lambda: act.catalog.directory().resolve_adapter("llm_fin") is not None or None, timeout=30)
        loop = asyncio.get_running_loop()
        started = loop.time()
        call = asyncio.create_task(
            http.post(f"http://127.0.0.1:{act.port}/v1/completions", json={"model": "llm_fin", "prompt": "q"})
        )
        await asyncio.sleep(1.0)
        assert not call.done() and fake.served == []  # held: no pod has fin loaded yet
        answer = await asyncio.wait_for(call, 60)
        waited = loop.time() - started
        assert answer.status == 200 and (await answer.json())["model"] == "fin"
        (pod,) = await live_pods(kube, namespace, "llm")
        assert fake.served == [(pod, "fin")]
        assert [c.pod for c in fake.loads()] == [pod]
        assert waited >= 2.5  # it waited for the load (3 s), not answered by a pod without the adapter
        labels = (await labels_of_pods(kube, namespace, adapter_label("")))[pod]
        assert labels == {adapter_label("fin"): source_digest(lora["source"])}
