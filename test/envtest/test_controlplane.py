"""The envtest tier is a real apiserver: schemas are enforced, RBAC is on, servers are loopback-only."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient, ApiException, Configuration, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.config import load_kube_config

from kthena_py.testing.controlplane import EnvTest, binaries, listening_sockets

pytestmark = pytest.mark.envtest

GROUP = "tests.kthena-py.io"
WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["replicas"],
                                "properties": {"replicas": {"type": "integer", "minimum": 1}},
                            },
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, replicas: int) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
    }


async def test_crd_schema_rejects_invalid_and_accepts_valid(
    envtest: EnvTest, namespace: str, api_client: ApiClient
) -> None:
    envtest.install_crds([WIDGETS_CRD])
    envtest.install_crds([WIDGETS_CRD])  # idempotent: updates in place
    api = CustomObjectsApi(api_client)

    with pytest.raises(ApiException) as rejected:
        await api.create_namespaced_custom_object(GROUP, "v1", namespace, "widgets", widget("bad", 0))
    assert rejected.value.status == 422
    assert "spec.replicas" in rejected.value.body

    created = await api.create_namespaced_custom_object(GROUP, "v1", namespace, "widgets", widget("good", 1))
    assert created["spec"]["replicas"] == 1
    assert created["metadata"]["uid"]


async def test_rbac_denies_an_unprivileged_user(envtest: EnvTest, tmp_path: Path) -> None:
    path = envtest.write_kubeconfig(tmp_path / "alice.kubeconfig", "alice", ("developers",))
    conf = Configuration()
    await load_kube_config(config_file=str(path), client_configuration=conf, temp_file_path=str(tmp_path))
    async with ApiClient(conf) as client:
        with pytest.raises(ApiException) as denied:
            await CoreV1Api(client).list_namespace()
    assert denied.value.status == 403
    assert 'User "alice"' in json.loads(denied.value.body)["message"]


def test_etcd_compaction_makes_old_podtemplate_watches_gone(envtest: EnvTest, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/podtemplates"
    template = {"spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]}}
    created = envtest.client.create(
        path, {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"}, "template": template}
    )
    old_rv = created["metadata"]["resourceVersion"]
    # Two writes: a watch from old_rv starts at old_rv + 1, which must be below the compacted revision
    # (a watch starting exactly at it gets a 500 "PrevKv=nil" instead of 410).
    for value in ("1", "2"):
        envtest.client.merge_patch(f"{path}/pt", {"metadata": {"labels": {"changed": value}}})
    assert envtest.compact_etcd() > int(old_rv) + 1
    assert envtest.etcd_prefix == "/registry"

    status, body = envtest.client.raw(
        "GET", path, query={"watch": "1", "resourceVersion": old_rv, "timeoutSeconds": "5"}
    )
    assert status == 200
    event = json.loads(body.splitlines()[0]) if isinstance(body, str) else body
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert envtest.client.raw("GET", "/readyz")[0] == 200


def test_every_component_listens_on_loopback_only(envtest: EnvTest) -> None:
    seen = {}
    for proc in envtest.processes:
        assert proc.pid is not None
        sockets = listening_sockets(proc.pid)
        seen[proc.name] = sockets
        for address, _port in sockets:
            assert ipaddress.ip_address(address).is_loopback, (proc.name, sockets)
    assert ("127.0.0.1", envtest.ports["apiserver"]) in seen["kube-apiserver"]
    assert ("127.0.0.1", envtest.ports["etcd-client"]) in seen["etcd"]


def test_version_constants_match_the_build_script() -> None:
    script = (Path(__file__).resolve().parents[2] / "hack" / "build-controlplane.sh").read_text()
    defaults = dict(re.findall(r"^([A-Z0-9_]+_VERSION)=\$\{\1:-([0-9.]+)\}", script, re.MULTILINE))
    assert defaults == {
        "K8S_VERSION": binaries.DEFAULT_K8S_VERSION,
        "ETCD_VERSION": binaries.DEFAULT_ETCD_VERSION,
        "KWOK_VERSION": binaries.DEFAULT_KWOK_VERSION,
        "VOLCANO_VERSION": binaries.DEFAULT_VOLCANO_VERSION,
        "VOLCANO_APIS_VERSION": binaries.DEFAULT_VOLCANO_APIS_VERSION,
        "HELM_VERSION": binaries.DEFAULT_HELM_VERSION,
    }
