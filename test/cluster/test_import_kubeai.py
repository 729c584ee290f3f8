"""A KubeAI Model, imported: ``minReplicas: 0`` and a ``cacheProfile`` become a gated, scale-from-zero ModelServing
that stages its weights once and answers a request through the activator.

The Model is translated by the real ``kthena-py import kubeai`` and applied as written, plus what the import's
report asks the user to provide: the claim ``shared-model-cache-<cacheProfile>`` (a hostPath volume here), a
Secret for the source (``HF_ENDPOINT`` of the loopback fake Hugging Face hub) and a download placement on the
mini-kubelet node. The engine is the cluster tier's fake one (on the pod IPs kwok assigns, port
:data:`ENGINE_PORT`, named by the activator port annotation). The manager (ModelCache and ModelServing
controllers) runs as a process, the activator in-process. A request sent while the weights still download is
held: the activator wakes the ModelServing to one replica, the gate keeps its pod from being created until the
cache is Ready, then the request is answered.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELCACHES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PERSISTENT_VOLUME_CLAIMS, PODS
from kthena_py.testing.artifacts import ArtifactServer
from kthena_py.testing.kubelet import MiniKubelet
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import (
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
    IMPORTED_PEER,
    MODEL_CACHE,
)

from .engineutil import ENGINE_PORT, EngineFarm
from .mcutil import HUB_SECRET, RUNNER, hub_secret, placement, running_manager, three_file_repo, throttle, wait_cache
from .mcutil import wait_ms_condition as wait_condition
from .test_activator import activator, crds  # noqa: F401  (crds is a fixture)

pytestmark = pytest.mark.cluster

NAME = "qwen"
CACHE_PROFILE = "fs"
CLAIM = f"shared-model-cache-{CACHE_PROFILE}"

MODEL = f"""
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: {NAME}
spec:
  url: hf://acme/qwen-tiny
  cacheProfile: {CACHE_PROFILE}
  engine: VLLM
  features: [TextGeneration]
  minReplicas: 0
  maxReplicas: 2
  targetRequests: 4
"""


def _import(namespace: str) -> dict[str, dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "kthena_py", "import", "kubeai", "-f", "-", "--namespace", namespace],
        input=MODEL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return {obj["kind"]: obj for obj in yaml.safe_load_all(result.stdout)}


async def _claim(kube: KubeClient, namespace: str, make_hostpath_volume: Callable[..., str]) -> None:
    make_hostpath_volume(namespace, CLAIM, "/exports/import-kubeai")
    claim = {
        "metadata": {"name": CLAIM},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    await kube.create(PERSISTENT_VOLUME_CLAIMS, claim, namespace)

    async def bound() -> bool:
        return ((await kube.get(PERSISTENT_VOLUME_CLAIMS, CLAIM, namespace)).get("status") or {}).get(
            "phase"
        ) == "Bound"

    await eventually(bound, timeout=120, description=f"claim {CLAIM} Bound")


async def _serving_pods(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    pods = (await kube.list(PODS, namespace)).items
    return [
        p
        for p in pods
        if p["metadata"]["name"].startswith(f"{NAME}-") and "job-name" not in p["metadata"].get("labels", {})
    ]


async def test_a_cached_scale_from_zero_model_is_gated_then_woken_and_answers(
    crds: None,  # noqa: F811
    kube: KubeClient,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    objects = _import(namespace)
    assert set(objects) == {"ModelServing", "ModelCache", "AutoscalingPolicy"}
    serving, cache, policy = objects["ModelServing"], objects["ModelCache"], objects["AutoscalingPolicy"]
    annotations = serving["metadata"]["annotations"]
    assert serving["spec"]["replicas"] == 0
    assert annotations[MODEL_CACHE] == NAME and annotations[ACTIVATOR_SCALE_FROM_ZERO] == "true"
    assert cache["spec"]["storage"] == {"persistentVolumeClaim": {"claimName": CLAIM}}

    kubelet = make_mini_kubelet(runner=RUNNER)
    await _claim(kube, namespace, make_hostpath_volume)
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/qwen-tiny"))
        # Slow weights (512 KiB at 8 KiB/s, about a minute): the request below is woken and gated while the cache
        # is still downloading, with room to spare on a loaded 2-core machine.
        throttle(server, repo, "model.safetensors", 8 * 1024)
        await hub_secret(kube, namespace, server)
        # What the report asks the user for: the source's Secret; here also where the download may run.
        cache["spec"]["sourceSecretRef"] = {"name": HUB_SECRET}
        cache["spec"]["placement"] = placement([kubelet.node.name])
        # The cluster tier's fake engine listens on ENGINE_PORT, not on the engine's 8000; a long hold budget, since
        # the request waits for the whole download on a shared 2-core machine.
        annotations[ACTIVATOR_PORT] = str(ENGINE_PORT)
        annotations[ACTIVATOR_HOLD_BUDGET] = "600s"
        await kube.create(MODELSERVINGS, serving, namespace)
        await kube.create(MODELCACHES, cache, namespace)
        await kube.create(AUTOSCALINGPOLICIES, policy, namespace)

        async with (
            running_manager(kubeconfig, namespace, tmp_path / "manager.log"),
            EngineFarm(kube, namespace) as farm,
            activator(kubeconfig, namespace) as act,
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http,
        ):
            await wait_cache(kube, namespace, NAME, "Downloading", timeout=240)
            stored = await kube.get(MODELSERVINGS, NAME, namespace)
            assert stored["spec"]["replicas"] == 0
            assert stored["metadata"]["labels"][IMPORTED_PEER] == "kubeai"

            body = {"model": NAME, "messages": [{"role": "user", "content": "hello from KubeAI"}]}
            call = asyncio.create_task(http.post(f"http://127.0.0.1:{act.port}/v1/chat/completions", json=body))
            await eventually(lambda: _replicas_are(kube, namespace, 1), timeout=60, description="woken to 1")
            # Woken, but gated: no pod until the weights are staged and verified.
            await wait_condition(kube, namespace, NAME, "ModelCached", "False", "WaitingForModelCache", timeout=60)
            assert (await kube.get(MODELCACHES, NAME, namespace))["status"]["phase"] == "Downloading"
            assert await _serving_pods(kube, namespace) == []
            assert not call.done()

            answer = await asyncio.wait_for(call, 600)
            assert answer.status == 200, await answer.text()
            assert (await answer.json())["echo"] == body
            assert len(farm.bodies) == 1
            assert (await kube.get(MODELCACHES, NAME, namespace))["status"]["phase"] == "Ready"

        pods = await _serving_pods(kube, namespace)
        assert len(pods) == 1
        engine = pods[0]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in engine.get("env") or []}
        assert "--model=$(KTHENA_MODEL_PATH)" in engine["args"]
        assert env["KTHENA_MODEL_CACHE"] == NAME


async def _replicas_are(kube: KubeClient, namespace: str, count: int) -> bool:
    return bool((await kube.get(MODELSERVINGS, NAME, namespace))["spec"]["replicas"] == count)
