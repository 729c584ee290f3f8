"""ModelBooster end to end in the cluster tier: the booster's children, their pods on kwok nodes, its status.

Kthena's networking CRDs (ModelServer, ModelRoute) come from ``test/crds`` and are installed only for the tests
that ask for them (``networking_crds``), then deleted again, so the test without them sees a cluster without
them whatever ran before.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from kthena_py.api.modelcache import MODEL_CACHE_MOUNT_PATH, MODEL_CACHE_VOLUME, model_dir
from kthena_py.controllers import register_all
from kthena_py.controllers.modelbooster import Settings
from kthena_py.controllers.resources import MODELBOOSTERS, MODELCACHES, MODELROUTES, MODELSERVERS, MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound, ResourceType
from kthena_py.kube.metrics import REST_CLIENT_REQUESTS, WRITE_METHODS
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS, SECRETS
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.artifacts import ArtifactServer, HubRepo
from kthena_py.testing.controlplane import ClusterTier, EnvTest
from kthena_py.testing.kubelet import ManualNode, MiniKubelet
from kthena_py.testing.kubelet.runner import CommandMapper
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import BOOSTER_PREFETCH, BOOSTER_PREFETCH_NODE_SELECTOR

from .mbutil import (
    NETWORKING_CRDS,
    booster,
    booster_events,
    children,
    conditions,
    pd_booster,
    remove_networking_crds,
    wait_active,
    wait_observed,
)
from .msutil import live_pods, running_manager, wait_available

pytestmark = pytest.mark.cluster

OWNER_KEYS = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
REPO = Path(__file__).resolve().parents[2]
CLUSTER_ROLES = ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False)
CLUSTER_ROLE_BINDINGS = ResourceType(
    "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False
)


@pytest.fixture
def networking_crds(cluster: EnvTest) -> Iterator[None]:
    """Kthena's ModelServer and ModelRoute CRDs for one test; removed afterwards so no other test sees them."""
    cluster.install_crds(NETWORKING_CRDS)
    try:
        yield
    finally:
        remove_networking_crds(cluster)


@pytest.fixture
def no_networking_crds(cluster: EnvTest) -> None:
    """The networking CRDs are absent, whatever ran before."""
    remove_networking_crds(cluster)


def _writes() -> float:
    return sum(
        s.value
        for m in REST_CLIENT_REQUESTS.collect()
        for s in m.samples
        if s.name.endswith("_total") and s.labels.get("method") in WRITE_METHODS
    )


async def _uids(kube: KubeClient, namespace: str, ms: str) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in (await live_pods(kube, namespace, ms)).items()}


async def _idle(kube: KubeClient, namespace: str, name: str) -> bool:
    conds = conditions(await kube.get(MODELSERVINGS, name, namespace))
    settled = conds.get("Scheduled", {}).get("status") == "True"  # the gang reconciler has caught up too
    return (
        settled
        and conds.get("Progressing", {}).get("status") == "False"
        and conds.get("Available", {}).get("status") == "True"
    )


async def _kubectl(kubeconfig: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def _migrate(kubeconfig: Path, namespace: str, name: str) -> str:
    """Run ``kthena-py modelbooster migrate`` as a user would; return what it printed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "modelbooster",
        "migrate",
        name,
        "-n",
        namespace,
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def _create(kube: KubeClient, namespace: str, body: KubeObject) -> KubeObject:
    created: KubeObject = await kube.create(MODELBOOSTERS, body, namespace)
    return created


async def test_booster_expands_into_one_child_of_each_kind_and_becomes_active(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        llm = await _create(kube, namespace, booster("llm", pods=2))
        pd = await _create(kube, namespace, pd_booster("pd"))
        mb = await wait_active(kube, namespace, "llm")
        ms = await wait_available(kube, namespace, "llm-b1", 1)
        # Active follows the ModelServing's Available, it does not precede it.
        active, available = conditions(mb)["Active"], conditions(ms)["Available"]
        assert active["lastTransitionTime"] >= available["lastTransitionTime"]
        assert active["reason"] == "ModelAvailable" and active["message"] == "ModelBooster is ready"
        assert conditions(mb)["Initialized"]["reason"] == "ModelCreating" and "Failed" not in conditions(mb)
        uid = llm["metadata"]["uid"]
        found = await children(kube, namespace, uid)
        assert {kind: [o["metadata"]["name"] for o in objs] for kind, objs in found.items()} == {
            "ModelServing": ["llm-b1"],
            "ModelServer": ["llm-b1"],
            "ModelRoute": ["llm"],
        }
        for obj in (o for objs in found.values() for o in objs):
            (owner,) = obj["metadata"]["ownerReferences"]
            assert {k: owner[k] for k in OWNER_KEYS} == {
                "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                "kind": "ModelBooster",
                "name": "llm",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
            assert obj["metadata"]["labels"]["workload.serving.volcano.sh/model-name"] == "llm"
            assert obj["metadata"]["labels"]["workload.serving.volcano.sh/managed-by"] == "workload.serving.volcano.sh"
        server = found["ModelServer"][0]["spec"]
        assert server["workloadSelector"]["matchLabels"] == {
            "workload.serving.volcano.sh/model-uid": uid,
            "modelserving.volcano.sh/entry": "true",
        }
        assert found["ModelRoute"][0]["spec"]["rules"][0]["targetModels"] == [
            {"modelServerName": "llm-b1", "weight": 100}
        ]
        # The pods: a Ray leader and its worker, both carrying the booster's labels.
        pods = await live_pods(kube, namespace, "llm-b1")
        assert set(pods) == {"llm-b1-0-leader-0-0", "llm-b1-0-leader-0-1"}
        assert all(p["metadata"]["labels"]["workload.serving.volcano.sh/model-uid"] == uid for p in pods.values())
        # `kubectl wait` works on the Active condition.
        await _kubectl(
            kubeconfig, "-n", namespace, "wait", "--for=condition=Active", "modelbooster/llm", "--timeout=60s"
        )
        # The disaggregated booster: roles prefill and decode, PD groups in its ModelServer.
        await wait_active(kube, namespace, "pd")
        pd_children = await children(kube, namespace, pd["metadata"]["uid"])
        roles = [r["name"] for r in pd_children["ModelServing"][0]["spec"]["template"]["roles"]]
        assert roles == ["prefill", "decode"]
        assert pd_children["ModelServer"][0]["spec"]["workloadSelector"]["pdGroup"]["groupKey"] == (
            "modelserving.volcano.sh/group-name"
        )
        assert set(await live_pods(kube, namespace, "pd-b1")) == {"pd-b1-0-prefill-0-0", "pd-b1-0-decode-0-0"}

        async def creation_events() -> bool:
            reasons = set(await booster_events(kube, namespace, "llm"))
            return {"ModelServingCreated", "ModelServerCreated", "ModelRouteCreated"} <= reasons

        await eventually(creation_events, timeout=30, description="child creation events")
        for ms_name in ("llm-b1", "pd-b1"):
            await eventually(lambda n=ms_name: _idle(kube, namespace, n), timeout=60, description=f"{ms_name} idle")
    # Converged: a restarted manager writes nothing.
    before = _writes()
    async with running_manager(str(kubeconfig), namespace):
        await asyncio.sleep(10)
        assert _writes() == before, "a restarted manager wrote to the API server"


async def test_deleted_children_come_back(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        uid = (await _create(kube, namespace, booster("llm")))["metadata"]["uid"]
        await wait_active(kube, namespace, "llm")
        before = {kind: objs[0]["metadata"]["uid"] for kind, objs in (await children(kube, namespace, uid)).items()}
        await kube.delete(MODELSERVINGS, "llm-b1", namespace)
        await kube.delete(MODELSERVERS, "llm-b1", namespace)
        await kube.delete(MODELROUTES, "llm", namespace)

        async def replaced() -> dict[str, str] | None:
            now = await children(kube, namespace, uid)
            if any(len(objs) != 1 for objs in now.values()):
                return None
            uids = {kind: objs[0]["metadata"]["uid"] for kind, objs in now.items()}
            return uids if all(uids[k] != before[k] for k in before) else None

        await eventually(replaced, timeout=120, description="children recreated")
        await wait_available(kube, namespace, "llm-b1", 1)
        await wait_active(kube, namespace, "llm")


async def test_model_name_change_replaces_the_route_once(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await _create(kube, namespace, booster("llm", model_name="first"))
        await wait_active(kube, namespace, "llm")
        route = await kube.get(MODELROUTES, "llm", namespace)
        assert route["spec"]["modelName"] == "first"
        seen: list[tuple[str, str]] = []

        async def watch() -> None:
            async for event in kube.watch(
                MODELROUTES, namespace, resource_version=route["metadata"]["resourceVersion"], timeout_seconds=120
            ):
                if event.type in ("ADDED", "DELETED") and event.object["metadata"]["name"] == "llm":
                    seen.append((event.type, event.object["metadata"]["uid"]))

        watcher = asyncio.create_task(watch())
        try:
            updated = await kube.patch(MODELBOOSTERS, "llm", {"spec": {"name": "second"}}, namespace)
            await wait_observed(kube, namespace, "llm", updated["metadata"]["generation"])

            async def renamed() -> KubeObject | None:
                live = await kube.get(MODELROUTES, "llm", namespace)
                return live if live["spec"]["modelName"] == "second" else None

            new = await eventually(renamed, timeout=60, description="route with the new modelName")
            await wait_active(kube, namespace, "llm")
            # A later reconcile (any ModelServing status change triggers one) must not replace it again.
            await kube.patch(MODELBOOSTERS, "llm", {"metadata": {"labels": {"touch": "1"}}}, namespace)
            await asyncio.sleep(3)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        assert seen == [("DELETED", route["metadata"]["uid"]), ("ADDED", new["metadata"]["uid"])]

        async def deleted_event() -> list[str] | None:
            return (await booster_events(kube, namespace, "llm")).get("ModelRouteDeleted")

        (message,) = await eventually(deleted_event, timeout=30, description="ModelRouteDeleted event")
        assert "modelName changed from 'first' to 'second'" in message


async def test_image_change_updates_the_modelserving_and_rolls_its_pods(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await _create(kube, namespace, booster("llm"))
        await wait_active(kube, namespace, "llm")
        ms = await wait_available(kube, namespace, "llm-b1", 1)
        revision = ms["status"]["updateRevision"]
        patch = [{"op": "replace", "path": "/spec/backend/workers/0/image", "value": "vllm/vllm-openai:v0.11.0"}]
        updated = await kube.patch(MODELBOOSTERS, "llm", patch, namespace, patch_type="json")
        await wait_observed(kube, namespace, "llm", updated["metadata"]["generation"])

        async def new_revision() -> KubeObject | None:
            live = await kube.get(MODELSERVINGS, "llm-b1", namespace)
            containers = live["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"]
            image = next(c["image"] for c in containers if c["name"] == "engine")
            current = (live.get("status") or {}).get("updateRevision")
            return live if image == "vllm/vllm-openai:v0.11.0" and current not in (None, revision) else None

        await eventually(new_revision, timeout=60, description="template and updateRevision changed")

        async def updated_event() -> bool:
            return "ModelServingUpdated" in await booster_events(kube, namespace, "llm")

        await eventually(updated_event, timeout=30, description="ModelServingUpdated event")

        # The rolling update moves the running ServingGroup's pods to the new image.
        async def pods_rolled() -> bool:
            items = (await kube.list(PODS, namespace, label_selector="modelserving.volcano.sh/name=llm-b1")).items
            live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
            engines = [c["image"] for p in live for c in p["spec"]["containers"] if c["name"] == "engine"]
            return bool(engines) and set(engines) == {"vllm/vllm-openai:v0.11.0"}

        await eventually(pods_rolled, timeout=120, description="pods on the new image")
        await wait_available(kube, namespace, "llm-b1", 1)


async def test_scale_subresource_is_kept_and_scaling_rolls_no_pod(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await _create(kube, namespace, booster("llm", replicas=1))
        await wait_active(kube, namespace, "llm")
        ms = await wait_available(kube, namespace, "llm-b1", 1)
        revision = ms["status"]["updateRevision"]
        first = await _uids(kube, namespace, "llm-b1")
        # An autoscaler scales the ModelServing through its scale subresource ...
        await kube.set_scale(MODELSERVINGS, "llm-b1", namespace, 2)
        await wait_available(kube, namespace, "llm-b1", 2)
        # ... and a booster change that is not about replicas (the route's match) leaves that alone.
        match = {"modelMatch": {"headers": {"x-tenant": {"exact": "gold"}}}}
        updated = await kube.patch(MODELBOOSTERS, "llm", {"spec": match}, namespace)
        await wait_observed(kube, namespace, "llm", updated["metadata"]["generation"])
        route = await kube.get(MODELROUTES, "llm", namespace)
        assert route["spec"]["rules"][0]["modelMatch"] == match["modelMatch"]
        live = await kube.get(MODELSERVINGS, "llm-b1", namespace)
        assert live["spec"]["replicas"] == 2, "the booster reverted a scale made through the scale subresource"
        # The booster's own replicas change is applied, and neither scaling rolled a pod.
        updated = await kube.patch(MODELBOOSTERS, "llm", {"spec": {"backend": {"replicas": 3}}}, namespace)
        await wait_observed(kube, namespace, "llm", updated["metadata"]["generation"])
        ms = await wait_available(kube, namespace, "llm-b1", 3)
        assert ms["status"]["updateRevision"] == revision
        now = await _uids(kube, namespace, "llm-b1")
        assert {name: now.get(name) for name in first} == first, "scaling changed the UID of an existing pod"
        await wait_active(kube, namespace, "llm")


async def test_migrate_then_delete_the_booster_keeps_every_pod(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        uid = (await _create(kube, namespace, booster("llm", replicas=2, pods=2)))["metadata"]["uid"]
        await wait_active(kube, namespace, "llm")
        await wait_available(kube, namespace, "llm-b1", 2)
        pods = await _uids(kube, namespace, "llm-b1")
        assert len(pods) == 4
        before = await children(kube, namespace, uid)
        printed = await _migrate(kubeconfig, namespace, "llm")
        for line in (
            "modelbooster/llm: marked modelbooster.kthena-py.io/migrated=true",
            "modelserving/llm-b1: removed the owner reference to ModelBooster llm",
            "modelserver/llm-b1: removed the owner reference to ModelBooster llm",
            "modelroute/llm: removed the owner reference to ModelBooster llm",
        ):
            assert line in printed, printed
        again = await _migrate(kubeconfig, namespace, "llm")  # idempotent
        assert "already marked" in again and "nothing else to do" in again and "removed" not in again
        after = await children(kube, namespace, uid)
        for kind, objs in after.items():
            assert [o["metadata"]["uid"] for o in objs] == [o["metadata"]["uid"] for o in before[kind]]
            assert all(not o["metadata"].get("ownerReferences") for o in objs)
        # Foreground deletion returns only once the garbage collector has dealt with every dependent.
        await kube.delete(MODELBOOSTERS, "llm", namespace, propagation_policy="Foreground")

        async def booster_gone() -> bool:
            return not (await kube.list(MODELBOOSTERS, namespace)).items

        await eventually(booster_gone, timeout=120, description="ModelBooster deleted")
        await wait_available(kube, namespace, "llm-b1", 2)
        assert await _uids(kube, namespace, "llm-b1") == pods
        remaining = await children(kube, namespace, uid)
        for kind, objs in remaining.items():
            assert [o["metadata"]["uid"] for o in objs] == [o["metadata"]["uid"] for o in before[kind]], kind


async def test_without_networking_crds_the_modelserving_is_created_and_an_event_says_why(
    kube: KubeClient, namespace: str, kubeconfig: Path, no_networking_crds: None
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await _create(kube, namespace, booster("llm"))
        mb = await wait_active(kube, namespace, "llm")
        assert "Failed" not in conditions(mb)
        await wait_available(kube, namespace, "llm-b1", 1)

        async def explained() -> list[str] | None:
            messages = (await booster_events(kube, namespace, "llm")).get("NetworkingCRDsMissing")
            return messages or None

        (message,) = await eventually(explained, timeout=30, description="NetworkingCRDsMissing event")
        assert "modelservers.networking.serving.volcano.sh" in message and "the ModelServing is created" in message


async def test_the_manifest_cluster_role_is_enough_for_the_booster_controller(
    kube: KubeClient, namespace: str, cluster: EnvTest, tmp_path: Path, networking_crds: None
) -> None:
    role = yaml.safe_load((REPO / "manifests" / "rbac" / "cluster_role.yaml").read_text())
    name = f"kthena-py-rbac-{namespace}"
    user = f"manager-{namespace}"
    await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": role["rules"]})
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await kube.create(CLUSTER_ROLE_BINDINGS, binding)
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "manager.kubeconfig", user)
        async with running_manager(str(kubeconfig), namespace):
            uid = (await _create(kube, namespace, booster("llm")))["metadata"]["uid"]
            await wait_active(kube, namespace, "llm")
            found = await children(kube, namespace, uid)
            assert [len(objs) for objs in found.values()] == [1, 1, 1]
    finally:
        await kube.delete(CLUSTER_ROLE_BINDINGS, name)
        await kube.delete(CLUSTER_ROLES, name)


async def test_failed_is_reported_then_clears_once_the_booster_is_fixed(
    kube: KubeClient, namespace: str, kubeconfig: Path, networking_crds: None
) -> None:
    broken = pd_booster("pd")
    decode = broken["spec"]["backend"]["workers"].pop()  # admission does not check for a missing PD role
    async with running_manager(str(kubeconfig), namespace):
        uid = (await _create(kube, namespace, broken))["metadata"]["uid"]

        async def failed() -> KubeObject | None:
            mb = await kube.get(MODELBOOSTERS, "pd", namespace)
            return mb if conditions(mb).get("Failed", {}).get("status") == "True" else None

        mb = await eventually(failed, timeout=60, description="Failed=True")
        failure = conditions(mb)["Failed"]
        assert (failure["reason"], failure["message"]) == ("ModelAbnormal", "decode worker not found in backend")
        assert conditions(mb)["Active"]["status"] == "False"
        assert all(objs == [] for objs in (await children(kube, namespace, uid)).values())
        workers = [*broken["spec"]["backend"]["workers"], decode]
        await kube.patch(MODELBOOSTERS, "pd", {"spec": {"backend": {"workers": workers}}}, namespace)
        mb = await wait_active(kube, namespace, "pd")
        assert conditions(mb)["Failed"]["status"] == "False"
        assert conditions(mb)["Failed"]["reason"] == "ModelReconciled"
        assert [len(objs) for objs in (await children(kube, namespace, uid)).values()] == [1, 1, 1]

        async def invalid_spec_event() -> list[str] | None:
            return (await booster_events(kube, namespace, "pd")).get("InvalidSpec")

        assert await eventually(invalid_spec_event, timeout=30) == ["decode worker not found in backend"]


async def test_a_prefetching_booster_stages_its_model_once_and_its_pods_mount_it_without_a_downloader(
    kube: KubeClient, namespace: str, kubeconfig: Path, mini_kubelet: MiniKubelet, no_networking_crds: None
) -> None:
    """The opt-in end to end: the booster's ModelCache runs ``kthena-py download`` on the mini-kubelet node from
    the fake hub (HF_ENDPOINT from the booster's envFrom Secret), and the gated ModelServing's pods have no
    downloader, mount the cache read-only and are pinned to the node where it is Ready."""
    files = {"config.json": b'{"model_type": "tiny"}', "model.safetensors": bytes(range(256)) * 64}
    place = mini_kubelet.placement()
    async with ArtifactServer() as hub:
        hub.add_repo(HubRepo("org/tiny", files))
        await kube.create(SECRETS, {"metadata": {"name": "hub"}, "stringData": {"HF_ENDPOINT": hub.url}}, namespace)
        mb = booster("pf")
        backend = mb["spec"]["backend"]
        backend.update(
            modelURI="hf://org/tiny", cacheURI="hostpath://srv/models", envFrom=[{"secretRef": {"name": "hub"}}]
        )
        server = backend["workers"][0]
        server["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        if place.get("tolerations"):
            server["tolerations"] = place["tolerations"]
        selector = ",".join(f"{k}={v}" for k, v in place["nodeSelector"].items())
        mb["metadata"]["annotations"] = {BOOSTER_PREFETCH: "true", BOOSTER_PREFETCH_NODE_SELECTOR: selector}
        async with running_manager(str(kubeconfig), namespace):
            await _create(kube, namespace, mb)

            async def cache_ready() -> KubeObject | None:
                try:
                    mc = await kube.get(MODELCACHES, "pf-b1", namespace)
                except NotFound:
                    return None
                return mc if (mc.get("status") or {}).get("phase") == "Ready" else None

            mc = await eventually(cache_ready, timeout=240, description="the booster's ModelCache Ready")
            assert mc["status"]["nodes"] == [mini_kubelet.node.name]
            staged = mini_kubelet.host_path("/srv/models") / model_dir("hf://org/tiny")
            assert {name: (staged / name).read_bytes() for name in files} == files
            downloads = [r for r in hub.requests if r.method == "GET" and "/resolve/" in r.path]
            assert len(downloads) == len(files)  # each file once

            async def gated_pods() -> list[KubeObject] | None:
                found = list((await live_pods(kube, namespace, "pf-b1")).values())
                return found or None

            (pod,) = await eventually(gated_pods, timeout=120, description="the gated ModelServing's pod")
            spec = pod["spec"]
            assert not spec.get("initContainers")
            (volume,) = [v for v in spec["volumes"] if v["name"] == MODEL_CACHE_VOLUME]
            assert volume["hostPath"]["path"] == "/srv/models"
            engine = next(c for c in spec["containers"] if c["name"] == "engine")
            assert {"name": MODEL_CACHE_VOLUME, "mountPath": MODEL_CACHE_MOUNT_PATH, "readOnly": True} in [
                {k: m[k] for k in ("name", "mountPath", "readOnly") if k in m} for m in engine["volumeMounts"]
            ]
            assert f"--model {MODEL_CACHE_MOUNT_PATH}" in " ".join(engine["command"])
            terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert terms["nodeSelectorTerms"][0]["matchExpressions"][-1]["values"] == [mini_kubelet.node.name]
            mb_live = await kube.get(MODELBOOSTERS, "pf", namespace)
            assert conditions(mb_live)["Prefetch"]["status"] == "True"


@contextlib.asynccontextmanager
async def _manager_with_downloader(kubeconfig: str, namespace: str, image: str) -> AsyncIterator[None]:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    manager = Manager(
        client, ManagerOptions(namespace=namespace, metrics_bind_address="0", health_probe_bind_address="0")
    )
    register_all(manager, modelbooster_settings=Settings(downloader_image=image, runtime_image="kthena/runtime:latest"))
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: manager.leading.is_set() or task.done(), timeout=60)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        await client.close()


async def test_the_projects_downloader_in_every_pod_downloads_once_and_a_restarted_pod_downloads_nothing(
    kube: KubeClient, namespace: str, kubeconfig: Path, cluster: ClusterTier, tmp_path: Path, no_networking_crds: None
) -> None:
    """The default path with ``--modelbooster-downloader-image`` pointing at the project's downloader image (its
    entrypoint is ``kthena-py download``): the init container takes Kthena's flags, and after a pod is deleted
    and recreated its downloader finds the completion marker and fetches nothing."""
    image = "registry.example/kthena-py-downloader:test"
    node = ManualNode(f"mini-kubelet-{uuid.uuid4().hex[:6]}")
    # The mini-kubelet runs every container or none: the runtime sidecar idles, the engine (no vLLM here) fails
    # and restarts; only the downloader init container matters.
    idle = ["python3", "-c", "import time; time.sleep(3600)"]
    runner = CommandMapper(images={image: ["kthena-py", "download"], "kthena/runtime": idle})
    kubelet = MiniKubelet(cluster.kubeconfig_path, node, tmp_path / node.name, runner=runner)
    kubelet.start()
    files = {"config.json": b'{"model_type": "tiny"}', "model.safetensors": bytes(range(256)) * 64}
    try:
        async with ArtifactServer() as hub:
            hub.add_repo(HubRepo("org/tiny", files))
            place = kubelet.placement()
            mb = booster("dl")
            backend = mb["spec"]["backend"]
            backend.update(
                modelURI="hf://org/tiny",
                cacheURI="hostpath://srv/weights",
                env=[{"name": "HF_ENDPOINT", "value": hub.url}],
            )
            server = backend["workers"][0]
            server["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
            expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in place["nodeSelector"].items()]
            server["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": expressions}]
                    }
                }
            }
            if place.get("tolerations"):
                server["tolerations"] = place["tolerations"]
            async with _manager_with_downloader(str(kubeconfig), namespace, image):
                await _create(kube, namespace, mb)

                async def downloaded(previous_uid: str | None = None) -> KubeObject | None:
                    for p in (await live_pods(kube, namespace, "dl-b1")).values():
                        if p["metadata"]["uid"] == previous_uid:
                            continue
                        for s in (p.get("status") or {}).get("initContainerStatuses") or []:
                            if (s.get("state") or {}).get("terminated", {}).get("exitCode") == 0:
                                return p
                    return None

                first = await eventually(downloaded, timeout=180, description="the downloader init container done")
                (init,) = first["spec"]["initContainers"]
                assert init["image"] == image and init["args"][:2] == ["--source", "hf://org/tiny"]
                staged = kubelet.host_path("/srv/weights") / model_dir("hf://org/tiny")
                assert {name: (staged / name).read_bytes() for name in files} == files
                fetched = hub.total_requests()
                assert [r for r in hub.requests if "/resolve/" in r.path]  # the first pod downloaded
                await kube.delete(PODS, first["metadata"]["name"], namespace)
                second = await eventually(
                    lambda: downloaded(first["metadata"]["uid"]),
                    timeout=180,
                    description="the recreated pod's downloader",
                )
                assert second["metadata"]["uid"] != first["metadata"]["uid"]
                assert hub.total_requests() == fetched  # the marker answered: not one request
    finally:
        kubelet.stop()
