"""``helm install`` of charts/kthena-py, then a ModelServing becoming Available, with what the chart installed.

How it runs:

* A cluster-tier control plane of its own, started *without* our CRDs (only Volcano's), so the
  ModelServing, AutoscalingPolicy and ModelBooster CRDs are the ones ``helm install`` puts there.
* ``helm install`` (the helm ``hack/build-controlplane.sh`` builds) into namespace ``kthena-system`` with
  ``replicaCount=0`` and ``webhook.url=https://127.0.0.1:<port>``: kwok's fake nodes run no containers, so a
  manager pod would never start; the manager runs as a local process instead, reachable by URL.
* That process has the chart's identity and flags: a client certificate for the user the API server gives
  the chart's ServiceAccount (``system:serviceaccount:kthena-system:kthena-py-controller-manager``, in its
  groups), so only the chart's RBAC authorizes it; the args of the Deployment ``helm get manifest`` reports,
  with only the three bind addresses moved to free loopback ports; ``POD_NAMESPACE`` as the Deployment sets it.

What it proves: the chart's CRDs install and are served; its ClusterRole and Roles allow everything the
manager does (Lease, certificate Secret, ``caBundle`` of the chart's two webhook configurations, pods,
Services, PodGroups, ControllerRevisions, status, Events); the manager accepts the chart's flags; the chart's
webhook configurations (rules, paths) reach the manager, so an invalid ModelServing is refused with the
webhook's message; ``helm uninstall`` removes what it installed but the CRDs. With ``activator.enabled``, the
activator runs likewise as a local process with the chart's activator identity and Deployment args: the chart's
activator RBAC lets its informers sync and its 0 -> 1 scale write through. Not proven here: the Deployments'
pods under a real kubelet (image, probes, security context, mounts) and routing through the webhook Service;
those objects are compared with manifests/default in test/unit/test_chart.py.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import ApiError, Forbidden, KubeClient, NotFound
from kthena_py.kube.resources import CRDS, LEASES, MUTATING_WEBHOOKS, NAMESPACES, SECRETS, VALIDATING_WEBHOOKS
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.wait import eventually

from .msutil import modelserving, role, wait_available

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kthena-py"
RELEASE_NS = "kthena-system"
SA_USER = f"system:serviceaccount:{RELEASE_NS}:kthena-py-controller-manager"
SA_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{RELEASE_NS}")
ACTIVATOR_USER = f"system:serviceaccount:{RELEASE_NS}:kthena-py-activator"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterTier]:
    if os.environ.get("KTHENA_PY_SKIP_CONTROLPLANE") == "1":
        pytest.skip("KTHENA_PY_SKIP_CONTROLPLANE=1")
    with ClusterTier(tmp_path_factory.mktemp("chart"), crds=[], nodes=2) as started:
        yield started


def _helm(helm_path: Path, tier: ClusterTier, *args: str) -> str:
    result = subprocess.run(
        [str(helm_path), "--kubeconfig", str(tier.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def release(helm_path: Path, tier: ClusterTier, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The chart installed and a manager with its identity running; yields ports and the installed manifest."""
    webhook_port, metrics_port, probe_port = _free_port(), _free_port(), _free_port()
    _helm(
        helm_path,
        tier,
        "install",
        "kthena-py",
        str(CHART),
        "--namespace",
        RELEASE_NS,
        "--create-namespace",
        "--set",
        f"replicaCount=0,webhook.url=https://127.0.0.1:{webhook_port},manager.logFormat=console,"
        "activator.enabled=true,activator.replicas=0",
    )
    manifest = [
        d for d in yaml.safe_load_all(_helm(helm_path, tier, "get", "manifest", "kthena-py", "-n", RELEASE_NS)) if d
    ]
    deployment = next(
        d for d in manifest if d["kind"] == "Deployment" and d["metadata"]["name"] == "kthena-py-controller-manager"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    run_dir = tmp_path_factory.mktemp("chart-manager")
    kubeconfig = tier.write_kubeconfig(run_dir / "sa.kubeconfig", SA_USER, SA_GROUPS)
    args = [
        *container["args"],
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
        f"--webhook-port={webhook_port}",
        "--webhook-bind-address=127.0.0.1",
    ]
    assert args[0] == "manager" and "--webhook-host=127.0.0.1" in args
    env = {**os.environ, "POD_NAMESPACE": RELEASE_NS}
    log = (run_dir / "manager.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "kthena_py.main", *args], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 180
        while not _ready(probe_port) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert process.poll() is None and _ready(probe_port), (run_dir / "manager.log").read_text()[-4000:]
        yield {"manifest": manifest, "args": args, "log": run_dir / "manager.log", "kubeconfig": kubeconfig}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture
async def admin(tier: ClusterTier) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


async def _namespace(kube: KubeClient, name: str) -> str:
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    return name


async def test_the_chart_crds_are_installed_and_served(release: dict[str, Any], admin: KubeClient) -> None:
    for plural in ("modelservings", "autoscalingpolicies", "modelboosters"):
        crd = await admin.get(CRDS, f"{plural}.workload.serving.volcano.sh")
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"


async def test_the_manager_with_the_charts_identity_injects_its_ca_and_holds_the_lease(
    release: dict[str, Any], admin: KubeClient
) -> None:
    async def injected() -> bool:
        for resource, name in (
            (VALIDATING_WEBHOOKS, "kthena-py-validating-webhook-configuration"),
            (MUTATING_WEBHOOKS, "kthena-py-mutating-webhook-configuration"),
        ):
            configuration = await admin.get(resource, name)
            if not all(w["clientConfig"].get("caBundle") for w in configuration["webhooks"]):
                return False
        return True

    await eventually(injected, timeout=120, description="caBundle injected into the chart's webhooks")
    secret = await admin.get(SECRETS, "kthena-py-webhook-server-cert", RELEASE_NS)
    assert base64.b64decode(secret["data"]["tls.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
    lease = await eventually(lambda: _holder(admin), timeout=120, description="the chart's Lease held by the manager")
    assert lease


async def test_the_managers_identity_is_only_what_the_chart_grants(release: dict[str, Any]) -> None:
    client = await KubeClient.from_kubeconfig(str(release["kubeconfig"]))
    try:
        with pytest.raises(Forbidden):
            await client.list(SECRETS, "default")
        with pytest.raises(Forbidden):
            await client.get(SECRETS, "some-other-secret", RELEASE_NS)
        await client.get(SECRETS, "kthena-py-webhook-server-cert", RELEASE_NS)  # its own one, by name
    finally:
        await client.close()


async def _holder(admin: KubeClient) -> str | None:
    try:
        lease = await admin.get(LEASES, "kthena-py-controller-manager", RELEASE_NS)
    except NotFound:
        return None
    holder = lease.get("spec", {}).get("holderIdentity")
    return str(holder) if holder else None


async def test_an_invalid_modelserving_is_refused_by_the_charts_webhook(
    release: dict[str, Any], admin: KubeClient
) -> None:
    namespace = await _namespace(admin, "chart-invalid")
    bad = modelserving("bad", roles=[role("decode", workers=1)])
    bad["spec"]["template"]["roles"][0]["workerReplicas"] = -1

    async def refused() -> ApiError | None:
        try:
            await admin.create(MODELSERVINGS, bad, namespace)
        except ApiError as exc:
            # Until the caBundle is in place the API server cannot call the webhook ("failed calling").
            return exc if "denied the request" in str(exc) else None
        raise AssertionError("a ModelServing with workerReplicas -1 was admitted")

    error = await eventually(refused, timeout=120, description="the webhook refusing workerReplicas -1")
    assert error.status == 422
    assert 'admission webhook "vmodelserving.workload.serving.volcano.sh" denied the request' in str(error)
    assert "workerReplicas must be a non-negative integer" in str(error)


async def test_a_modelserving_becomes_available(release: dict[str, Any], admin: KubeClient) -> None:
    namespace = await _namespace(admin, "chart-serving")

    async def create() -> bool:
        try:
            await admin.create(MODELSERVINGS, modelserving("llm", replicas=2), namespace)
        except ApiError as exc:
            if "failed calling webhook" in str(exc):
                return False  # the caBundle is not injected yet
            raise
        return True

    await eventually(create, timeout=120, description="a ModelServing admitted")
    ms = await wait_available(admin, namespace, "llm", 2, timeout=240)
    assert {c["type"]: c["status"] for c in ms["status"]["conditions"]}["Available"] == "True"
    assert "forbidden" not in release["log"].read_text().lower(), "the chart's RBAC refused the manager something"


@pytest.fixture(scope="module")
def activator(
    release: dict[str, Any], tier: ClusterTier, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The activator with the chart's identity and its Deployment's args (bind addresses on free loopback ports)."""
    deployment = next(
        d for d in release["manifest"] if d["kind"] == "Deployment" and d["metadata"]["name"] == "kthena-py-activator"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "kthena-py-activator"
    run_dir = tmp_path_factory.mktemp("chart-activator")
    kubeconfig = tier.write_kubeconfig(run_dir / "sa.kubeconfig", ACTIVATOR_USER, SA_GROUPS)
    port, probe_port = _free_port(), _free_port()
    args = [
        *container["args"],
        f"--kubeconfig={kubeconfig}",
        f"--listen=127.0.0.1:{port}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
    ]
    assert args[0] == "activator"
    log = (run_dir / "activator.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "kthena_py.main", *args], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while not _ready(probe_port) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert process.poll() is None and _ready(probe_port), (run_dir / "activator.log").read_text()[-4000:]
        yield {"port": port, "log": run_dir / "activator.log", "kubeconfig": kubeconfig}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


async def test_the_activator_with_the_charts_identity_wakes_a_modelserving(
    activator: dict[str, Any], admin: KubeClient
) -> None:
    import asyncio

    import aiohttp

    from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER, ACTIVATOR_SCALE_FROM_ZERO

    namespace = await _namespace(admin, "chart-activator")
    sleeping = modelserving("sleepy", replicas=0)
    sleeping["metadata"]["annotations"] = {ACTIVATOR_SCALE_FROM_ZERO: "true"}

    async def create() -> bool:
        try:
            await admin.create(MODELSERVINGS, sleeping, namespace)
        except ApiError as exc:
            if "failed calling webhook" in str(exc):
                return False  # the caBundle is not injected yet
            raise
        return True

    await eventually(create, timeout=120, description="a ModelServing at zero admitted")
    async with aiohttp.ClientSession(trust_env=False) as session:
        base = f"http://127.0.0.1:{activator['port']}/v1"

        async def routed() -> bool:  # until its informer has the ModelServing, the activator answers 404
            async with session.get(f"{base}/models") as answer:
                return any(card.get("id") == "sleepy" for card in (await answer.json()).get("data", []))

        await eventually(routed, timeout=30, description="the activator routing the new model")
        held = asyncio.create_task(session.post(f"{base}/completions", json={"model": "sleepy", "prompt": "wake up"}))

        async def woken() -> dict[str, Any] | None:
            ms = await admin.get(MODELSERVINGS, "sleepy", namespace)
            return ms if ms["spec"].get("replicas") == 1 else None

        ms = await eventually(woken, timeout=60, description="the activator scaling the ModelServing 0 -> 1")
        managers = {entry.get("manager") for entry in ms["metadata"].get("managedFields") or []}
        assert ACTIVATOR_FIELD_MANAGER in managers
        held.cancel()
    log = activator["log"].read_text().lower()
    assert "forbidden" not in log, "the chart's RBAC refused the activator something"


async def test_helm_uninstall_removes_everything_but_the_crds(
    release: dict[str, Any], helm_path: Path, tier: ClusterTier, admin: KubeClient
) -> None:
    _helm(helm_path, tier, "uninstall", "kthena-py", "-n", RELEASE_NS, "--wait")
    with pytest.raises(NotFound):
        await admin.get(VALIDATING_WEBHOOKS, "kthena-py-validating-webhook-configuration")
    await admin.get(CRDS, "modelservings.workload.serving.volcano.sh")
