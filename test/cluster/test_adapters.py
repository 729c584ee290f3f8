"""LoRA adapters on the cluster tier: the adapter reconciler loads a ModelServing's adapter set into its Ready
entry pods through fake sidecar/engine endpoints served on the pod IPs kwok assigns (test/cluster/adapterutil.py).

Routing requests by adapter is the activator's (test_activator_adapters.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.crdgen import build_crds
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.plan.adapters.desired import adapter_label, source_digest
from kthena_py.plan.adapters.endpoint import ADAPTER_DIR
from kthena_py.plan.adapters.plan import INTENT_GRACE_SECONDS
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.kwokstages import HOLD_READY, HOLD_READY_ANNOTATION, RELEASED
from kthena_py.testing.wait import eventually
from kthena_py.vocab.conditions import (
    ADAPTERS_LOADED,
    REASON_ADAPTER_LOAD_FAILED,
    REASON_ADAPTERS_LOADED,
)
from kthena_py.vocab.labels import ADAPTER_LABEL_PREFIX, LORA_ADAPTERS, LORA_LOADING, LORA_PORT
from kthena_py.vocab.times import parse_time

from .adapterutil import FakeAdapters, adapter_farm, events_of, labels_of_pods
from .engineutil import ENGINE_PORT
from .msutil import container, live_pods, modelserving, running_manager, start_manager_process, wait_available

pytestmark = pytest.mark.cluster


def fin(namespace: str) -> dict[str, str]:
    """The adapter ``fin``; its source names the test's namespace (see adapterutil: other sessions' calls)."""
    return {"name": "fin", "source": f"hf://acme/fin-lora-{namespace}"}


def law(namespace: str) -> dict[str, str]:
    return {"name": "law", "source": f"s3://adapters/law-{namespace}"}


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    cluster.install_crds(list(build_crds().values()))


def lora_modelserving(
    name: str, adapters: list[dict[str, str]], *, replicas: int, hold_ready: bool = False, **spec: Any
) -> dict[str, Any]:
    engine = container(gpu=0) | {"ports": [{"containerPort": ENGINE_PORT}]}
    entry: dict[str, Any] = {"spec": {"containers": [engine]}}
    if hold_ready:
        entry["metadata"] = {"annotations": {HOLD_READY_ANNOTATION: HOLD_READY}}
    ms = modelserving(
        name,
        replicas=replicas,
        roles=[{"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": entry}],
        **spec,
    )
    # The fake sidecar listens on the farm's port (the default endpoint kind, sidecar, with its port moved).
    ms["metadata"]["annotations"] = {LORA_ADAPTERS: json.dumps(adapters), LORA_PORT: str(ENGINE_PORT)}
    return ms


async def set_adapters(kube: KubeClient, namespace: str, name: str, adapters: list[dict[str, str]]) -> None:
    await kube.patch(
        MODELSERVINGS, name, {"metadata": {"annotations": {LORA_ADAPTERS: json.dumps(adapters)}}}, namespace
    )


def expected(*adapters: dict[str, str]) -> dict[str, str]:
    return {adapter_label(a["name"]): source_digest(a["source"]) for a in adapters}


async def condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    for c in (ms.get("status") or {}).get("conditions") or []:
        if c.get("type") == ADAPTERS_LOADED:
            return dict(c)
    return None


async def labelled(kube: KubeClient, namespace: str, want: dict[str, str], pods: int) -> dict[str, dict[str, str]]:
    async def check() -> dict[str, dict[str, str]] | None:
        found = await labels_of_pods(kube, namespace, ADAPTER_LABEL_PREFIX)
        return found if len(found) == pods and all(v == want for v in found.values()) else None

    result: dict[str, dict[str, str]] = await eventually(check, timeout=60, description=f"pods labelled {want}")
    return result


async def condition_is(kube: KubeClient, namespace: str, name: str, status: str, reason: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        c = await condition(kube, namespace, name)
        return c if c is not None and c["status"] == status and c["reason"] == reason else None

    result: dict[str, Any] = await eventually(check, timeout=60, description=f"{ADAPTERS_LOADED} {status}/{reason}")
    return result


async def test_two_adapters_on_three_pods_then_one_removed(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    fake = FakeAdapters(namespace, delay=0.3)
    await kube.create(MODELSERVINGS, lora_modelserving("llm", [fin(namespace), law(namespace)], replicas=3), namespace)
    async with running_manager(str(kubeconfig), namespace), adapter_farm(kube, namespace, fake):
        await wait_available(kube, namespace, "llm", 3)
        pods = await labelled(kube, namespace, expected(fin(namespace), law(namespace)), 3)
        c = await condition_is(kube, namespace, "llm", "True", REASON_ADAPTERS_LOADED)
        assert c["message"] == "adapters loaded on 3/3 pods", c
        loads = fake.loads()
        assert sorted((x.pod, x.name) for x in loads) == sorted((p, n) for p in pods for n in ("fin", "law"))
        assert fake.loads(ok=False) == []
        # The sidecar's body: the source to download and where to put it.
        call = next(x for x in loads if x.name == "fin")
        assert call.body == {
            "lora_name": "fin",
            "source": fin(namespace)["source"],
            "output_dir": f"{ADAPTER_DIR}/fin-{source_digest(fin(namespace)['source'])}",
        }
        # One load at a time per pod.
        assert max(fake.max_in_flight.values()) == 1, fake.max_in_flight

        await set_adapters(kube, namespace, "llm", [fin(namespace)])
        await labelled(kube, namespace, expected(fin(namespace)), 3)
        assert sorted((x.pod, x.name) for x in fake.unloads()) == sorted((p, "law") for p in pods)
        assert len(fake.loads()) == 6  # nothing reloaded
        assert {p: set(v) for p, v in fake.loaded.items()} == {p: {"fin"} for p in pods}
        await condition_is(kube, namespace, "llm", "True", REASON_ADAPTERS_LOADED)


async def test_a_new_pod_gets_the_set_once_ready_and_a_restart_reloads(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    fake = FakeAdapters(namespace, delay=0.1)
    await kube.create(
        MODELSERVINGS,
        lora_modelserving("llm", [fin(namespace), law(namespace)], replicas=1, hold_ready=True, recoveryPolicy="None"),
        namespace,
    )
    async with running_manager(str(kubeconfig), namespace), adapter_farm(kube, namespace, fake):
        first = await release_next(kube, namespace, set())
        await labelled(kube, namespace, expected(fin(namespace), law(namespace)), 1)
        await kube.patch(MODELSERVINGS, "llm", {"spec": {"replicas": 2}}, namespace)
        second = await eventually(
            lambda: running_not_ready(kube, namespace, exclude={first}), timeout=60, description="a second pod"
        )
        # Running, with an IP the fake serves, but not Ready: nothing is loaded into it.
        await asyncio.sleep(3.0)
        assert [c for c in fake.calls if c.pod == second] == []
        c = await condition(kube, namespace, "llm")
        assert c is not None and c["status"] == "True" and c["message"] == "adapters loaded on 1/1 pods", c
        await release_next(kube, namespace, {first})
        await labelled(kube, namespace, expected(fin(namespace), law(namespace)), 2)
        ready_at = await ready_time(kube, namespace, second)
        second_loads = [x for x in fake.loads() if x.pod == second]
        assert sorted(x.name for x in second_loads) == ["fin", "law"]
        assert all(x.at >= ready_at for x in second_loads)
        await condition_is(kube, namespace, "llm", "True", REASON_ADAPTERS_LOADED)

        # A restart of the first pod's engine (an in-place image change restarts its container; recoveryPolicy None
        # keeps the pod): its labels go, and the set is loaded again once it is Ready.
        fake.restart(first)
        image = {"spec": {"containers": [{"name": "engine", "image": "nginx:1.28"}]}}
        await kube.patch(PODS, first, image, namespace, patch_type="strategic")

        async def reloaded() -> bool:
            return len([x for x in fake.loads() if x.pod == first]) == 4

        await eventually(reloaded, timeout=60, description="the restarted pod reloaded")
        await labelled(kube, namespace, expected(fin(namespace), law(namespace)), 2)
        assert len([x for x in fake.loads() if x.pod == second]) == 2
        assert fake.loads(ok=False) == []


async def test_a_refused_load_backs_off_with_an_event_then_a_fixed_source_loads(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    bad = {"name": "fin", "source": f"hf://acme/missing-{namespace}"}
    fake = FakeAdapters(
        namespace, delay=0.05, refuse={bad["source"]: f"adapter_config.json not found in {bad['source']}"}
    )
    await kube.create(MODELSERVINGS, lora_modelserving("llm", [bad], replicas=2), namespace)
    async with running_manager(str(kubeconfig), namespace), adapter_farm(kube, namespace, fake):
        await wait_available(kube, namespace, "llm", 2)
        pods = sorted(await live_pods(kube, namespace, "llm"))
        refused = f"adapter_config.json not found in {bad['source']}"

        # (The first attempt may meet a connection error: the fake starts serving a pod's IP a moment after the
        # pod is Ready. That is a failure too, and reported; the engine's refusal comes with the next attempt.)
        async def refused_condition() -> dict[str, Any] | None:
            c = await condition(kube, namespace, "llm")
            ok = c is not None and c["status"] == "False" and refused in c["message"] and "0/2 pods" in c["message"]
            return c if ok else None

        c = await eventually(refused_condition, timeout=60, description="the condition naming the refusal")
        assert c["reason"] == REASON_ADAPTER_LOAD_FAILED, c
        assert c["message"].startswith("adapters loaded on 0/2 pods; load failed on "), c
        assert any(f"{p}: fin: {refused}" in c["message"] for p in pods), c

        async def warning() -> list[str]:
            messages = await events_of(kube, namespace, REASON_ADAPTER_LOAD_FAILED)
            return [m for m in messages for p in pods if f"pod {p}:" in m and "adapter fin" in m and refused in m]

        await eventually(warning, timeout=30, description="a Warning naming the pod, the adapter and the message")

        # Backoff: the refused loads of one pod come further and further apart (1 s, 2 s, 4 s...).
        async def three_tries() -> list[float] | None:
            times = [x.at for x in fake.loads(ok=False) if x.pod == pods[0]]
            return times if len(times) >= 4 else None

        times = await eventually(three_tries, timeout=60, description="four refused loads on one pod")
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps[0] >= 0.9 and gaps[1] >= 1.8 and gaps[2] >= 3.6, gaps
        assert await labels_of_pods(kube, namespace, ADAPTER_LABEL_PREFIX) == {p: {} for p in pods}

        await set_adapters(kube, namespace, "llm", [fin(namespace)])
        await labelled(kube, namespace, expected(fin(namespace)), 2)
        c = await condition_is(kube, namespace, "llm", "True", REASON_ADAPTERS_LOADED)
        assert c["message"] == "adapters loaded on 2/2 pods"


async def test_kill_9_mid_load_never_loads_twice(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    fake = FakeAdapters(namespace, delay=3.0)
    await kube.create(MODELSERVINGS, lora_modelserving("llm", [fin(namespace), law(namespace)], replicas=2), namespace)
    async with adapter_farm(kube, namespace, fake), manager_process(kubeconfig, namespace) as proc:
        await eventually(lambda: len(fake.started) >= 2, timeout=90, description="loads under way")
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        async with manager_process(kubeconfig, namespace):
            await labelled(kube, namespace, expected(fin(namespace), law(namespace)), 2)
            await condition_is(kube, namespace, "llm", "True", REASON_ADAPTERS_LOADED)
    pairs = [(pod, name) for pod, name in fake.started]
    assert len(pairs) == len(set(pairs)) == 4, fake.started
    assert fake.loads(ok=False) == []


async def test_kill_9_after_the_intent_before_the_request_sends_once_after_the_grace(
    crds: None, kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    """A manager killed right after writing its intents: the request for ``fin`` never left; the one for ``law``
    did and landed, and ``law`` left the set meanwhile. The intents are written here, as that manager left them
    (the moment between the intent and the request cannot be hit by a signal reliably)."""
    fake = FakeAdapters(namespace, delay=0.1)
    await kube.create(MODELSERVINGS, lora_modelserving("llm", [], replicas=2), namespace)
    async with adapter_farm(kube, namespace, fake):
        async with manager_process(kubeconfig, namespace) as proc:
            await wait_available(kube, namespace, "llm", 2)
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        first, second = sorted(await live_pods(kube, namespace, "llm"))
        since = time.time()
        intent_fin = {"digest": source_digest(fin(namespace)["source"]), "since": since, "owner": "killed"}
        intent_law = {"digest": source_digest(law(namespace)["source"]), "since": since, "owner": "killed"}
        for pod, intents in ((first, {"fin": intent_fin}), (second, {"fin": intent_fin, "law": intent_law})):
            body = {"metadata": {"annotations": {LORA_LOADING: json.dumps(intents)}}}
            await kube.patch(PODS, pod, body, namespace)
        law_dir = f"{ADAPTER_DIR}/law-{source_digest(law(namespace)['source'])}"
        fake.loaded[second] = {"law": law_dir}  # the killed manager's law request landed
        await set_adapters(kube, namespace, "llm", [fin(namespace)])
        async with manager_process(kubeconfig, namespace):
            await labelled(kube, namespace, expected(fin(namespace)), 2)
            await condition_is(kube, namespace, "llm", "True", REASON_ADAPTERS_LOADED)

            async def intents_gone() -> bool:
                pods = await live_pods(kube, namespace, "llm")
                return all(LORA_LOADING not in (p["metadata"].get("annotations") or {}) for p in pods.values())

            await eventually(intents_gone, timeout=60, description="the intents removed")
    # fin sent once per pod, and only once the 30 s grace of the killed manager's intent was over.
    assert sorted(fake.started) == [(first, "fin"), (second, "fin")], fake.started
    assert all(c.at >= since + INTENT_GRACE_SECONDS for c in fake.loads()), fake.calls
    assert fake.loads(ok=False) == []
    # law, loaded in doubt and no longer wanted, was unloaded, never labelled.
    assert [(c.pod, c.name) for c in fake.unloads()] == [(second, "law")]
    assert {p: set(v) for p, v in fake.loaded.items()} == {first: {"fin"}, second: {"fin"}}


@contextlib.asynccontextmanager
async def manager_process(kubeconfig: Path, namespace: str) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await start_manager_process(kubeconfig, namespace)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


async def release_next(kube: KubeClient, namespace: str, done: set[str]) -> str:
    pod = await eventually(
        lambda: running_not_ready(kube, namespace, exclude=done), timeout=60, description="a held pod"
    )
    await kube.patch(PODS, pod, {"metadata": {"annotations": {HOLD_READY_ANNOTATION: RELEASED}}}, namespace)
    return str(pod)


async def running_not_ready(kube: KubeClient, namespace: str, *, exclude: set[str]) -> str | None:
    for name, pod in sorted((await live_pods(kube, namespace, "llm")).items()):
        status = pod.get("status") or {}
        if name not in exclude and status.get("phase") == "Running" and status.get("podIP"):
            return name
    return None


async def ready_time(kube: KubeClient, namespace: str, name: str) -> float:
    """When the pod turned Ready (its Ready condition's lastTransitionTime, whole seconds, rounded down)."""
    pod = await kube.get(PODS, name, namespace)
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    since = parse_time(ready["lastTransitionTime"])
    assert since is not None
    return since
