"""Autoscaling end to end in the cluster tier: real ModelServings, pods on kwok nodes, real /metrics endpoints.

The ModelServing controller creates the pods; kwok makes them Running/Ready with IPs in 127.100.0.0/16 (loopback),
and :class:`LoadFarm` serves ``/metrics`` on every entry pod's IP at the policy's pod-source port (Kthena scrapes
``http://<podIP>:<metricSources.pod.port>/<uri>``), spreading a total load the test sets over the ready entry pods.
The Prometheus scenario runs Debian's ``prometheus`` binary on 127.0.0.1, scraping a loopback endpoint.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import shutil
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kthena_py.api.crdgen import build_crds
from kthena_py.controllers import autoscaling, modelserving
from kthena_py.controllers.autoscaling.history import HISTORY_ANNOTATION
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, PODS
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.cluster

SYNC_PERIOD = 1.0
L = "modelserving.volcano.sh/"


@pytest.fixture
def crds(cluster: ClusterTier) -> None:
    """The project's CRDs, generated from the API models (idempotent)."""
    cluster.install_crds(list(build_crds().values()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def controllers(kubeconfig: Path, namespace: str) -> AsyncIterator[Manager]:
    """The ModelServing and autoscaling controllers, scoped to ``namespace``, with a 1 s autoscaling period."""
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    manager = Manager(
        client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    modelserving.register(manager, workers=2)
    autoscaling.register(manager, workers=2, sync_period=SYNC_PERIOD)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: manager.leading.is_set() or task.done(), timeout=60)
        yield manager
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()


class LoadFarm:
    """Serves ``/metrics`` on the IP of every Running, Ready entry pod of a namespace.

    ``load[group]`` is a total spread evenly over the ready entry pods of that group (``group_of`` maps a pod's
    labels to its group), exposed as the gauge ``load``.
    """

    def __init__(self, kube: KubeClient, namespace: str, group_of: Callable[[dict[str, str]], str]) -> None:
        self.kube = kube
        self.namespace = namespace
        self.group_of = group_of
        self.port = free_port()
        self.load: dict[str, float] = {}
        self.scrapes = 0
        self._pods: dict[str, dict[str, str]] = {}
        self._sites: dict[str, web.TCPSite] = {}
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
        labels = self._pods.get(ip)
        if labels is None:
            return web.Response(status=404)
        self.scrapes += 1
        group = self.group_of(labels)
        peers = sum(1 for other in self._pods.values() if self.group_of(other) == group)
        value = self.load.get(group, 0.0) / max(peers, 1)
        return web.Response(text=f"# TYPE load gauge\nload {value}\n", content_type="text/plain")

    async def sync(self) -> None:
        live: dict[str, dict[str, str]] = {}
        for pod in (await self.kube.list(PODS, self.namespace)).items:
            status, labels = pod.get("status") or {}, pod["metadata"].get("labels") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            ip = status.get("podIP")
            if pod["metadata"].get("deletionTimestamp") or not ip or not ready or labels.get(L + "entry") != "true":
                continue
            live[ip] = labels
        assert self._runner is not None
        for ip in [ip for ip in self._sites if ip not in live]:
            await self._sites.pop(ip).stop()
        for ip in live:
            if ip not in self._sites:
                site = web.TCPSite(self._runner, ip, self.port)
                await site.start()
                self._sites[ip] = site
        self._pods = live

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.sync()
            await asyncio.sleep(0.2)

    async def __aenter__(self) -> LoadFarm:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()

    def serving(self, group: str) -> int:
        return sum(1 for labels in self._pods.values() if self.group_of(labels) == group)


def ms_manifest(name: str, roles: dict[str, int], replicas: int = 1) -> KubeObject:
    container = {
        "name": "engine",
        "image": "registry.invalid/engine:1",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "schedulerName": "volcano",
            "template": {
                "roles": [
                    {
                        "name": role,
                        "replicas": count,
                        "workerReplicas": 0,
                        "entryTemplate": {"spec": {"containers": [container]}},
                    }
                    for role, count in roles.items()
                ]
            },
        },
    }


def policy_manifest(name: str, spec: dict[str, Any]) -> KubeObject:
    return {"metadata": {"name": name}, "spec": spec}


def pod_source(port: int) -> dict[str, Any]:
    return {"pod": {"name": "load", "port": port}}


UNLIMITED = {"scaleUp": {"stablePolicy": {"period": "0s"}}, "scaleDown": {"period": "0s"}}


async def replicas(kube: KubeClient, namespace: str, name: str) -> int:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    return int(ms["spec"].get("replicas", 1))


async def role_replicas(kube: KubeClient, namespace: str, name: str) -> dict[str, int]:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    return {r["name"]: int(r.get("replicas", 1)) for r in ms["spec"]["template"]["roles"]}


async def policy_status(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return (await kube.get(AUTOSCALINGPOLICIES, name, namespace)).get("status") or {}


def condition(status: dict[str, Any], type_: str) -> str | None:
    for c in status.get("conditions") or []:
        if c["type"] == type_:
            return str(c["status"])
    return None


async def rescale_events(kube: KubeClient, namespace: str, policy: str) -> list[KubeObject]:
    events = (await kube.list(EVENTS, namespace)).items
    found = [
        e
        for e in events
        if e.get("reason") == "SuccessfulRescale" and (e.get("involvedObject") or {}).get("name") == policy
    ]
    return sorted(found, key=lambda e: e.get("firstTimestamp") or "")


async def test_homogeneous_panic_step_up_and_stabilized_step_down(
    crds: None, kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    window = 15
    async with (
        controllers(kubeconfig, namespace),
        LoadFarm(kube, namespace, lambda labels: labels.get(L + "name", "")) as farm,
    ):
        await kube.create(MODELSERVINGS, ms_manifest("llm", {"main": 1}), namespace)
        farm.load["llm"] = 5
        await eventually(lambda: farm.serving("llm") == 1, timeout=120, description="the entry pod serving /metrics")
        spec = {
            "tolerancePercent": 10,
            "metrics": [{"name": "load", "targetValue": "10"}],
            "behavior": {
                # Stable scale-up is slow (+1 per minute): reaching 4 quickly can only be panic mode.
                "scaleUp": {
                    "stablePolicy": {"instances": 1, "percent": 0, "period": "60s"},
                    "panicPolicy": {"percent": 1000, "panicThresholdPercent": 200, "panicModeHold": "10s"},
                },
                "scaleDown": {"instances": 4, "percent": 100, "period": "0s", "stabilizationWindow": f"{window}s"},
            },
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 4,
                "target": {"targetRef": {"name": "llm"}, "metricSources": {"load": pod_source(farm.port)}},
            },
        }
        await kube.create(AUTOSCALINGPOLICIES, policy_manifest("llm", spec), namespace)

        async def settled() -> dict[str, Any] | None:
            status = await policy_status(kube, namespace, "llm")
            entry = status.get("homogeneousStatus") or {}
            ok = condition(status, "Ready") == "True" and condition(status, "MetricsAvailable") == "True"
            return status if ok and entry.get("currentReplicas") == 1 and entry.get("desiredReplicas") == 1 else None

        status = await eventually(settled, timeout=60, description="the policy reconciled at 1 replica")
        assert status["observedGeneration"] == 1
        assert condition(status, "TargetFound") == "True"

        # Step up: 4x the target. Panic mode scales straight to the maximum.
        farm.load["llm"] = 40
        await eventually(lambda: _equals(replicas(kube, namespace, "llm"), 4), timeout=120, description="4 replicas")
        ups = await eventually(lambda: rescale_events(kube, namespace, "llm"), timeout=30)
        assert "Panic mode" in ups[0]["message"] and "load=" in ups[0]["message"]
        await eventually(lambda: farm.serving("llm") == 4, timeout=120, description="4 entry pods serving")

        # Step down: back to half the target. Nothing moves before the stabilization window has passed.
        stepped_down = time.time()
        farm.load["llm"] = 5
        await eventually(
            lambda: _equals(replicas(kube, namespace, "llm"), 1), timeout=300, description="scale back to 1"
        )
        downs = [e for e in await rescale_events(kube, namespace, "llm") if "(was 4)" in e["message"]]
        assert downs, "no scale-down event"
        assert "Stable mode" in downs[0]["message"]
        stored = await kube.get(AUTOSCALINGPOLICIES, "llm", namespace)
        history = stored["metadata"]["annotations"][HISTORY_ANNOTATION]
        assert '"homogeneous"' in history
        down_at = _event_time(downs[0])
        # A lower bound implied by the algorithm (not a speed assertion): the window holds the scale-down.
        assert down_at >= stepped_down + window - 2, (down_at - stepped_down, downs[0]["message"])


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


def _event_time(event: KubeObject) -> float:
    stamp = str(event.get("firstTimestamp") or event.get("eventTime"))
    return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))


async def test_disaggregated_keeps_the_ratio(crds: None, kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with (
        controllers(kubeconfig, namespace),
        LoadFarm(kube, namespace, lambda labels: labels.get(L + "role", "")) as farm,
    ):
        await kube.create(MODELSERVINGS, ms_manifest("pd", {"prefill": 1, "decode": 1}), namespace)
        farm.load.update({"prefill": 5, "decode": 5})
        await eventually(
            lambda: farm.serving("prefill") == 1 and farm.serving("decode") == 1, timeout=120, description="pods"
        )

        def role(metric: str, low: int, high: int) -> dict[str, Any]:
            return {
                "minReplicas": low,
                "maxReplicas": high,
                "metrics": [{"name": metric, "targetValue": "10"}],
                "metricSources": {metric: pod_source(farm.port)},
            }

        spec = {
            "tolerancePercent": 0,
            "behavior": UNLIMITED,
            "disaggregatedTarget": {
                "targetRef": {"name": "pd"},
                "roles": {"prefill": role("prefill_load", 1, 4), "decode": role("decode_load", 1, 8)},
                "ratioConstraint": {
                    "numeratorRole": "prefill",
                    "denominatorRole": "decode",
                    "minRatio": "500m",
                    "maxRatio": "1",
                },
            },
        }
        await kube.create(AUTOSCALINGPOLICIES, policy_manifest("pd", spec), namespace)
        seen: list[dict[str, int]] = []

        async def converged() -> bool:
            counts = await role_replicas(kube, namespace, "pd")
            seen.append(counts)
            return counts == {"prefill": 3, "decode": 6}

        # Decode needs 6 (60 / 10); prefill's own load asks for 1, the ratio (>= 0.5) raises it to 3.
        farm.load["decode"] = 60
        await eventually(converged, timeout=180, interval=0.25, description="prefill 3, decode 6")
        for counts in seen:  # every state the ModelServing went through satisfied the constraint
            assert 0.5 <= counts["prefill"] / counts["decode"] <= 1, seen
        status = await eventually(
            lambda: _disaggregated_status(kube, namespace), timeout=60, description="disaggregated status"
        )
        assert status["ratioStatus"] == {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "0.5"}
        roles = {r["name"]: r for r in status["roles"]}
        assert roles["decode"]["desiredReplicas"] == 6 and roles["prefill"]["currentReplicas"] == 3


async def _disaggregated_status(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    status = (await policy_status(kube, namespace, "pd")).get("disaggregatedStatus")
    if not status or {r["name"]: r["currentReplicas"] for r in status["roles"]} != {"prefill": 3, "decode": 6}:
        return None
    return dict(status)


async def test_heterogeneous_spreads_replicas(crds: None, kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with controllers(kubeconfig, namespace), LoadFarm(kube, namespace, lambda labels: "all") as farm:
        for name in ("cheap", "dear"):
            await kube.create(MODELSERVINGS, ms_manifest(name, {"main": 1}), namespace)
        farm.load["all"] = 10
        await eventually(lambda: farm.serving("all") == 2, timeout=120, description="two entry pods serving")
        spec = {
            "tolerancePercent": 0,
            "metrics": [{"name": "load", "targetValue": "10"}],
            "behavior": UNLIMITED,
            "heterogeneousTarget": {
                "costExpansionRatePercent": 100,
                "params": [
                    {
                        "cost": cost,
                        "minReplicas": 1,
                        "maxReplicas": 3,
                        "target": {"targetRef": {"name": name}, "metricSources": {"load": pod_source(farm.port)}},
                    }
                    for name, cost in (("cheap", 10), ("dear", 30))
                ],
            },
        }
        await kube.create(AUTOSCALINGPOLICIES, policy_manifest("mix", spec), namespace)
        # 50 over all replicas of both targets at 10 per replica: 5 replicas, the cheap target filled first.
        farm.load["all"] = 50

        async def split() -> bool:
            return (await replicas(kube, namespace, "cheap"), await replicas(kube, namespace, "dear")) == (3, 2)

        await eventually(split, timeout=180, interval=0.25, description="cheap 3, dear 2")

        async def reported() -> list[dict[str, Any]] | None:
            entries = (await policy_status(kube, namespace, "mix")).get("heterogeneousStatus") or []
            got = {e["name"]: e["desiredReplicas"] for e in entries}
            return entries if got == {f"{namespace}/cheap": 3, f"{namespace}/dear": 2} else None

        await eventually(reported, timeout=60, description="heterogeneousStatus")


PROMETHEUS_CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: app
    static_configs:
      - targets: ["127.0.0.1:{app_port}"]
"""


class CountingApp:
    """A loopback app whose ``app_requests_total`` counter grows at a rate the test sets."""

    def __init__(self) -> None:
        self.port = free_port()
        self._base = 0.0
        self._since = time.monotonic()
        self._rate = 0.0
        self._runner: web.AppRunner | None = None

    def value(self) -> float:
        return self._base + self._rate * (time.monotonic() - self._since)

    def set_rate(self, rate: float) -> None:
        self._base, self._since, self._rate = self.value(), time.monotonic(), rate

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=f"# TYPE app_requests counter\napp_requests_total {self.value()}\n")

    async def __aenter__(self) -> CountingApp:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@contextlib.asynccontextmanager
async def prometheus_server(tmp_path: Path, app_port: int) -> AsyncIterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus binary is not installed (Debian: apt-get install -y prometheus)")
    config = tmp_path / "prometheus.yml"
    config.write_text(PROMETHEUS_CONFIG.format(app_port=app_port))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1h",
        "--log.level=warn",
        stdout=log,
        stderr=asyncio.subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(trust_env=False) as session:

            async def ready() -> bool:
                assert proc.returncode is None, (tmp_path / "prometheus.log").read_text()
                try:
                    async with session.get(f"{url}/-/ready") as resp:
                        return resp.status == 200
                except aiohttp.ClientError:
                    return False

            await eventually(ready, timeout=60, description="prometheus ready")
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()


async def test_prometheus_source(
    crds: None, kube: KubeClient, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    async with CountingApp() as app, prometheus_server(tmp_path, app.port) as url, controllers(kubeconfig, namespace):
        await kube.create(MODELSERVINGS, ms_manifest("web", {"main": 1}), namespace)
        query = "sum(rate(app_requests_total[5s]))"
        spec = {
            "tolerancePercent": 0,
            "metrics": [{"name": "rps", "targetValue": "10"}],
            "behavior": UNLIMITED,
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 5,
                "target": {
                    "targetRef": {"name": "web"},
                    "metricSources": {"rps": {"prometheus": {"serverURL": url, "query": query}}},
                },
            },
        }
        app.set_rate(30)
        await kube.create(AUTOSCALINGPOLICIES, policy_manifest("web", spec), namespace)
        await eventually(lambda: _equals(replicas(kube, namespace, "web"), 3), timeout=120, description="3 replicas")
        status = await policy_status(kube, namespace, "web")
        assert condition(status, "MetricsAvailable") == "True"
        app.set_rate(0)
        await eventually(lambda: _equals(replicas(kube, namespace, "web"), 1), timeout=180, description="1 replica")

        # A query that does not give one sample is reported, and the count holds.
        broken = dict(spec)
        broken["homogeneousTarget"] = {
            **spec["homogeneousTarget"],
            "target": {
                "targetRef": {"name": "web"},
                "metricSources": {
                    "rps": {"prometheus": {"serverURL": url, "query": "app_requests_total or vector(1)"}}
                },
            },
        }
        # A merge patch, not a get-and-replace: the controller writes the policy's history annotation
        # concurrently, so a replace guarded by a stale resourceVersion can lose the race (409).
        await kube.patch(AUTOSCALINGPOLICIES, "web", {"spec": broken}, namespace)

        async def reported() -> str | None:
            for c in (await policy_status(kube, namespace, "web")).get("conditions") or []:
                if c["type"] == "MetricsAvailable" and c["status"] == "False":
                    return str(c["message"])
            return None

        message = await eventually(reported, timeout=60, description="MetricsAvailable=False")
        assert "single sample vector, got 2" in message
        assert await replicas(kube, namespace, "web") == 1
