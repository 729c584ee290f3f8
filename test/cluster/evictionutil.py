"""Helpers for the eviction budget tests: in-process manager replicas serving the eviction webhook, the webhook
configuration of ``manifests/eviction`` pointed at them, evictions through the API, a ready-group watcher."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kthena_py.controllers import eviction, register_all
from kthena_py.controllers.eviction import EVICTION_PATH, EvictionWebhook
from kthena_py.kube import KubeClient, NotFound, TooManyRequests
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import NODES, PODS, VALIDATING_WEBHOOKS
from kthena_py.runtime.certs import generate
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.webhook import AdmissionRequest, AdmissionResponse, WebhookServer
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.cluster import FakeNode
from kthena_py.testing.evictionstorm import pod_ready
from kthena_py.testing.proxy import TcpProxy
from kthena_py.testing.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
NAME_LABEL = "modelserving.volcano.sh/name"
GROUP_LABEL = "modelserving.volcano.sh/group-name"
CERTS = generate(["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
PAIR = (CERTS.serving.cert, CERTS.serving.key)


@dataclass
class Replica:
    """One manager replica with its webhook server."""

    manager: Manager
    server: WebhookServer
    handler: EvictionWebhook
    calls: int = 0
    answers: list[AdmissionResponse] = field(default_factory=list)

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port


@contextlib.asynccontextmanager
async def replica(
    kubeconfig: str,
    namespace: str,
    *,
    enabled: bool = True,
    ttl: float = 60.0,
    leader_elect: bool = False,
    identity: str | None = None,
) -> AsyncIterator[Replica]:
    """A manager scoped to ``namespace`` (every controller, the eviction reconciler when enabled) serving the
    eviction endpoint on 127.0.0.1 with the test certificate, as ``kthena-py manager --enable-eviction-webhook``."""
    client = await KubeClient.from_kubeconfig(kubeconfig)
    options = ManagerOptions(
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        leader_elect=leader_elect,
        leader_election_namespace=namespace,
        leader_election_id="kthena-py-eviction-test",
        lease_duration=4.0,
        renew_deadline=3.0,
        retry_period=0.5,
    )
    if identity:
        options.identity = identity
    manager = Manager(client, options)
    register_all(manager, workers=4, eviction_budget=enabled)
    server = WebhookServer(lambda: PAIR, host="127.0.0.1", port=0)
    handler = eviction.add_webhook(server, manager, enabled=enabled, ttl=ttl)
    this = Replica(manager, server, handler)

    async def counted(request: AdmissionRequest) -> AdmissionResponse:
        this.calls += 1
        answer = await handler(request)
        this.answers.append(answer)
        return answer

    server.handlers[EVICTION_PATH] = counted
    manager.add_runnable(server.run, needs_leader=False)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: server.started.is_set() or task.done(), timeout=60, description="webhook listening")
        await eventually(lambda: manager.cache.synced or task.done(), timeout=60, description="cache synced")
        assert not task.done(), task.result()
        if not leader_elect:
            await eventually(lambda: manager.leading.is_set(), timeout=60, description="controllers started")
        yield this
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()


class RoundRobinProxy(TcpProxy):
    """A loopback TCP proxy that sends each new connection to the next of ``targets`` (a stable webhook URL
    in front of one or more replicas whose ports change)."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__("127.0.0.1", ports[0])
        self.ports = ports
        self._next = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.target = ("127.0.0.1", self.ports[self._next % len(self.ports)])
        self._next += 1
        await super()._handle(reader, writer)


def webhook_configuration(namespace: str, port: int) -> KubeObject:
    """``manifests/eviction``'s webhook, pointed at 127.0.0.1:<port> and selecting only ``namespace``."""
    patch = yaml.safe_load((ROOT / "manifests" / "eviction" / "validating_webhook_configuration.yaml").read_text())
    (hook,) = patch["webhooks"]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{port}{hook['clientConfig']['service']['path']}",
        "caBundle": base64.b64encode(CERTS.ca_bundle).decode(),
    }
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return {"metadata": {"name": f"kthena-py-eviction-{namespace}"}, "webhooks": [hook]}


@contextlib.asynccontextmanager
async def webhook_installed(
    kube: KubeClient, namespace: str, port: int, replicas: list[Replica]
) -> AsyncIterator[None]:
    """Install the eviction webhook for ``namespace`` and wait until the API server calls it."""
    config = webhook_configuration(namespace, port)
    await kube.create(VALIDATING_WEBHOOKS, config)
    try:

        async def called() -> bool:
            before = sum(r.calls for r in replicas)
            with contextlib.suppress(NotFound):
                await evict(kube, namespace, "no-such-pod", dry_run=True)
            return sum(r.calls for r in replicas) > before

        await eventually(called, timeout=60, interval=0.2, description="the eviction webhook is called")
        yield
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(VALIDATING_WEBHOOKS, config["metadata"]["name"])


async def evict(kube: KubeClient, namespace: str, pod: str, *, dry_run: bool = False) -> str | None:
    """Evict ``pod`` through ``policy/v1``; ``None`` when granted, else the 429 message."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": namespace},
    }
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    try:
        await kube.request("POST", PODS.path(namespace, pod, "eviction"), body=body)
    except TooManyRequests as exc:
        return exc.message
    return None


def ready_groups(pods: list[KubeObject], ms: str, pods_per_group: int) -> int:
    """ServingGroups of ``ms`` with all ``pods_per_group`` pods Running, Ready and not terminating."""
    per_group: dict[str, int] = {}
    broken: set[str] = set()
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(NAME_LABEL) != ms:
            continue
        group = labels.get(GROUP_LABEL, "")
        if pod_ready(pod):
            per_group[group] = per_group.get(group, 0) + 1
        else:
            broken.add(group)
    return sum(1 for group, count in per_group.items() if count >= pods_per_group and group not in broken)


class ReadyWatcher:
    """Watches the pods of a namespace and keeps the fewest ready groups of each ModelServing seen after any event."""

    def __init__(self, kube: KubeClient, namespace: str, groups: dict[str, int]) -> None:
        self.kube = kube
        self.namespace = namespace
        self.groups = groups
        """ModelServing -> pods per group."""
        self.minimum: dict[str, int] = {}
        self.events = 0
        self._pods: dict[str, KubeObject] = {}
        self._task: asyncio.Task[None] | None = None
        self.started = asyncio.Event()

    def _observe(self) -> None:
        pods = list(self._pods.values())
        for ms, size in self.groups.items():
            count = ready_groups(pods, ms, size)
            self.minimum[ms] = min(self.minimum.get(ms, count), count)

    async def _run(self) -> None:
        listed = await self.kube.list(PODS, self.namespace)
        self._pods = {p["metadata"]["name"]: p for p in listed.items}
        self._observe()
        self.started.set()
        version = listed.resource_version
        while True:
            async for event in self.kube.watch(PODS, self.namespace, resource_version=version, timeout_seconds=60):
                if event.type == "BOOKMARK":
                    version = event.object["metadata"]["resourceVersion"]
                    continue
                name = event.object["metadata"]["name"]
                version = event.object["metadata"]["resourceVersion"]
                if event.type == "DELETED":
                    self._pods.pop(name, None)
                else:
                    self._pods[name] = event.object
                self.events += 1
                self._observe()

    async def __aenter__(self) -> ReadyWatcher:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.started.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def kubectl(kubeconfig: str, *args: str, timeout: float = 300) -> tuple[int, str]:
    """Run kubectl; return its exit code and combined output."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", kubeconfig, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return int(proc.returncode or 0), out.decode()


PIN_LABEL = "kthena-py/eviction-test"


@contextlib.asynccontextmanager
async def dedicated_node(cluster: ClusterTier, *, gpus: int = 8) -> AsyncIterator[str]:
    """A fake node only pods pinned with :func:`pin` go to (label and taint ``kthena-py/eviction-test=<name>``);
    yields its name, removes it (and its pods) afterwards."""
    name = f"ev-{uuid.uuid4().hex[:8]}"
    node = FakeNode(
        name, gpus=gpus, labels={PIN_LABEL: name}, taints=[{"key": PIN_LABEL, "value": name, "effect": "NoSchedule"}]
    )
    await asyncio.to_thread(cluster.add_node, node)
    try:
        yield name
    finally:
        await asyncio.to_thread(cluster.remove_node, name)


def pin(roles: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    """Pin the roles' pods to the :func:`dedicated_node` ``node``."""
    for r in roles:
        for key in ("entryTemplate", "workerTemplate"):
            if key in r:
                spec = r[key]["spec"]
                spec["nodeSelector"] = {PIN_LABEL: node}
                spec["tolerations"] = [{"key": PIN_LABEL, "operator": "Equal", "value": node, "effect": "NoSchedule"}]
    return roles


async def cordon(kube: KubeClient, node: str, *, on: bool = True) -> None:
    """Mark ``node`` (un)schedulable: replacements of evicted pods then stay Pending, so records stay."""
    await kube.patch(NODES, node, {"spec": {"unschedulable": on}})
