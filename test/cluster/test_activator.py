"""The activator on the cluster tier: engines are aiohttp servers on the pod IPs kwok assigns (127.100.0.0/16),
the activator runs in-process on 127.0.0.1, the ModelServing controller creates the pods."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kthena_py.activator import Activator, ActivatorOptions
from kthena_py.api.crdgen import build_crds
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.plan.activator.state import SCALED_TO_ZERO
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.kwokstages import BAD_IMAGE_PREFIX, HOLD_READY, HOLD_READY_ANNOTATION, RELEASED
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import (
    ACTIVATOR_FIELD_MANAGER,
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
    ACTIVATOR_STATE,
)

from .engineutil import ENGINE_PORT, EngineFarm
from .evictionutil import kubectl
from .msutil import NAME_LABEL, container, modelserving, running_manager

pytestmark = pytest.mark.cluster


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


def cold_modelserving(
    name: str, *, hold_ready: bool, replicas: int = 0, image: str = "nginx:1.27", budget: str | None = None
) -> dict[str, Any]:
    engine = container(image=image, gpu=0) | {"ports": [{"containerPort": ENGINE_PORT}]}
    entry: dict[str, Any] = {"spec": {"containers": [engine]}}
    if hold_ready:
        entry["metadata"] = {"annotations": {HOLD_READY_ANNOTATION: HOLD_READY}}
    ms = modelserving(
        name, replicas=replicas, roles=[{"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": entry}]
    )
    ms["metadata"]["annotations"] = {ACTIVATOR_SCALE_FROM_ZERO: "true", ACTIVATOR_PORT: str(ENGINE_PORT)}
    if budget is not None:
        ms["metadata"]["annotations"][ACTIVATOR_HOLD_BUDGET] = budget
    return ms


@contextlib.asynccontextmanager
async def activator(kubeconfig: Path, namespace: str) -> AsyncIterator[Activator]:
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    instance = Activator(
        ActivatorOptions(
            listen="127.0.0.1:0", metrics_bind_address="0", health_probe_bind_address="0", namespaces=(namespace,)
        ),
        client=client,
    )
    await instance.start()
    try:
        assert await instance.wait_for_sync(30)
        yield instance
    finally:
        await instance.stop()
        await client.close()


def scale_managers(ms: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f.get("manager", ""), f.get("subresource", "")) for f in ms["metadata"].get("managedFields") or []]


async def test_cold_request_is_held_until_ready_then_answered(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, cold_modelserving("llm", hold_ready=True), namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        EngineFarm(kube, namespace) as farm,
        activator(kubeconfig, namespace) as act,
        aiohttp.ClientSession() as http,
    ):
        # At zero and opted in, with an activator running: `kubectl get ms` says so.
        await eventually(
            lambda: _state_is(kube, namespace, SCALED_TO_ZERO), timeout=30, description="the state annotation"
        )
        code, out = await kubectl(str(kubeconfig), "get", "ms", "llm", "-n", namespace)
        assert code == 0, out
        header, row = out.splitlines()
        assert "ACTIVATOR" in header.split() and SCALED_TO_ZERO in row, out
        body = {"model": "llm", "messages": [{"role": "user", "content": "wake up"}]}
        call = asyncio.create_task(http.post(f"http://127.0.0.1:{act.port}/v1/chat/completions", json=body))
        ms = await eventually(
            lambda: _replicas_one(kube, namespace), timeout=30, description="spec.replicas written to 1"
        )
        # Woken: the words go.
        await eventually(lambda: _state_is(kube, namespace, None), timeout=30, description="the annotation removed")
        code, out = await kubectl(str(kubeconfig), "get", "ms", "llm", "-n", namespace)
        assert code == 0 and SCALED_TO_ZERO not in out, out
        assert (ACTIVATOR_FIELD_MANAGER, "scale") in scale_managers(ms)
        pod = await eventually(lambda: _running_pod(kube, namespace), timeout=60, description="a Running pod")
        await asyncio.sleep(1.0)
        assert not call.done(), "answered before the pod was Ready"
        assert farm.bodies == []
        await kube.patch(
            PODS, pod["metadata"]["name"], {"metadata": {"annotations": {HOLD_READY_ANNOTATION: RELEASED}}}, namespace
        )
        answer = await asyncio.wait_for(call, 60)
        assert answer.status == 200
        assert (await answer.json())["echo"] == body
        assert [json.loads(b) for b in farm.bodies] == [body]


async def test_twenty_cold_requests_one_scale_write(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, cold_modelserving("llm", hold_ready=False), namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        EngineFarm(kube, namespace) as farm,
        activator(kubeconfig, namespace) as act,
        aiohttp.ClientSession() as http,
    ):
        url = f"http://127.0.0.1:{act.port}/v1/chat/completions"
        start = (await kube.get(MODELSERVINGS, "llm", namespace))["metadata"]["generation"]
        answers = await asyncio.wait_for(
            asyncio.gather(*(http.post(url, json={"model": "llm", "n": i}) for i in range(20))), 120
        )
        assert [a.status for a in answers] == [200] * 20
        assert sorted(json.loads(b)["n"] for b in farm.bodies) == list(range(20))
        ms = await kube.get(MODELSERVINGS, "llm", namespace)
        assert ms["spec"]["replicas"] == 1
        assert ms["metadata"]["generation"] == start + 1  # exactly one spec change: the one scale write


async def test_streamed_chunks_arrive_one_by_one_and_disconnect_cancels(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, cold_modelserving("llm", hold_ready=False, replicas=1), namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        EngineFarm(kube, namespace) as farm,
        activator(kubeconfig, namespace) as act,
    ):
        http = aiohttp.ClientSession()
        try:
            response = await asyncio.wait_for(
                http.post(f"http://127.0.0.1:{act.port}/v1/chat/completions", json={"model": "llm", "stream": True}),
                120,
            )
            assert response.status == 200
            for i in range(3):
                farm.step.set()
                line = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 10)
                received = time.monotonic()
                assert line == f"data: {i}\n\n".encode()
                assert len(farm.chunk_times) == i + 1 and farm.chunk_times[-1] <= received
                await asyncio.sleep(0.3)  # the next chunk is not sent yet: nothing more may be readable
                assert response.content.at_eof() is False and not response.content._buffer
            response.close()
        finally:
            await http.close()
        await asyncio.wait_for(farm.cancelled.wait(), 10)


def written(namespace: str) -> float:
    """Scale writes this process made for the test's ModelServing (every in-process activator counts here)."""
    value = REGISTRY.get_sample_value(
        "kthena_activator_scale_writes_total", {"namespace": namespace, "modelserving": "llm", "result": "written"}
    )
    return value or 0.0


async def test_budget_spent_is_503_naming_the_image_pull_with_bounded_writes(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    ms = cold_modelserving("llm", hold_ready=False, image=BAD_IMAGE_PREFIX + "engine:1", budget="8s")
    await kube.create(MODELSERVINGS, ms, namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        activator(kubeconfig, namespace) as act,
        aiohttp.ClientSession() as http,
    ):
        url = f"http://127.0.0.1:{act.port}/v1/chat/completions"
        start = (await kube.get(MODELSERVINGS, "llm", namespace))["metadata"]["generation"]
        for _ in range(2):
            async with http.post(url, json={"model": "llm"}) as answer:
                assert answer.status == 503
                assert int(answer.headers["Retry-After"]) > 0
                error = (await answer.json())["error"]
                assert "image pull: ImagePullBackOff" in error["message"], error["message"]
                assert error["type"] == "service_unavailable"
        assert written(namespace) == 1
        assert (await kube.get(MODELSERVINGS, "llm", namespace))["metadata"]["generation"] == start + 1


async def test_two_activator_replicas_make_one_scale_write(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, cold_modelserving("llm", hold_ready=False), namespace)
    async with (
        running_manager(str(kubeconfig), namespace),
        EngineFarm(kube, namespace) as farm,
        activator(kubeconfig, namespace) as first,
        activator(kubeconfig, namespace) as second,
        aiohttp.ClientSession() as http,
    ):
        start = (await kube.get(MODELSERVINGS, "llm", namespace))["metadata"]["generation"]
        calls = [
            http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "llm", "n": i})
            for i in range(10)
            for port in (first.port, second.port)
        ]
        answers = await asyncio.wait_for(asyncio.gather(*calls), 120)
        assert [a.status for a in answers] == [200] * 20
        assert len(farm.bodies) == 20
        assert written(namespace) == 1
        assert (await kube.get(MODELSERVINGS, "llm", namespace))["metadata"]["generation"] == start + 1


async def _ready(url: str) -> bool | None:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as answer:
            return True if answer.status == 200 else None
    except aiohttp.ClientError:
        return None


def _spawn(kubeconfig: Path, namespace: str, port: int, probe: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kthena_py",
            "activator",
            "--listen",
            f"127.0.0.1:{port}",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            f"127.0.0.1:{probe}",
            "--log-format",
            "json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_kill_9_with_held_requests_then_a_restart_serves(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, cold_modelserving("llm", hold_ready=True), namespace)
    port, probe = free_port(), free_port()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    process = _spawn(kubeconfig, namespace, port, probe)
    try:
        async with (
            running_manager(str(kubeconfig), namespace),
            EngineFarm(kube, namespace) as farm,
            aiohttp.ClientSession() as http,
        ):
            await eventually(lambda: _ready(f"http://127.0.0.1:{probe}/readyz"), timeout=60, description="ready")
            held = [asyncio.create_task(http.post(url, json={"model": "llm", "n": i})) for i in range(3)]
            await eventually(lambda: _replicas_one(kube, namespace), timeout=30, description="woken")
            pod = await eventually(lambda: _running_pod(kube, namespace), timeout=60, description="a Running pod")
            assert not any(task.done() for task in held)
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            outcomes = await asyncio.gather(*held, return_exceptions=True)
            assert all(isinstance(o, aiohttp.ClientError) for o in outcomes), outcomes
            process = _spawn(kubeconfig, namespace, port, probe)
            await eventually(lambda: _ready(f"http://127.0.0.1:{probe}/readyz"), timeout=60, description="ready")
            await kube.patch(
                PODS,
                pod["metadata"]["name"],
                {"metadata": {"annotations": {HOLD_READY_ANNOTATION: RELEASED}}},
                namespace,
            )
            async with http.post(url, json={"model": "llm", "n": 99}) as answer:
                assert answer.status == 200
                assert (await answer.json())["echo"]["n"] == 99
            assert [json.loads(b)["n"] for b in farm.bodies] == [99]
    finally:
        process.kill()
        process.wait(30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _state_is(kube: KubeClient, namespace: str, expected: str | None) -> bool | None:
    ms = await kube.get(MODELSERVINGS, "llm", namespace)
    return (ms["metadata"].get("annotations") or {}).get(ACTIVATOR_STATE) == expected or None


async def _replicas_one(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    ms = await kube.get(MODELSERVINGS, "llm", namespace)
    return ms if ms["spec"].get("replicas") == 1 else None


async def _running_pod(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    for pod in (await kube.list(PODS, namespace, label_selector=NAME_LABEL)).items:
        if (pod.get("status") or {}).get("phase") == "Running" and pod["status"].get("podIP"):
            return pod
    return None
