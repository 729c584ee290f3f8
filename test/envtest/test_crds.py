"""The committed CRDs (manifests/crd/) on a real kube-apiserver, without any webhook.

They install and become Established, ``kubectl explain`` reaches into the embedded pod schema, discovery lists
the short names and category, the ``scale`` and ``status`` subresources work, the printer columns show, the CEL
rules are enforced by the API server alone, ModelBooster requests carry the deprecation warning, and pod parts a
Pod accepts are accepted (hostAliases sharing an IP, identical ports, repeated env names).
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.api.crdgen import KIND_SPECS, file_name
from kthena_py.api.crdgen.descriptions import MARKER
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELBOOSTERS, MODELSERVINGS
from kthena_py.kube import Invalid, KubeClient
from kthena_py.testing.controlplane import EnvTest, find_kubectl

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
CRD_FILES = [ROOT / "manifests" / "crd" / file_name(spec) for spec in KIND_SPECS]
BASES = ROOT / "test" / "unit" / "api" / "corpus" / "bases"


@pytest.fixture(scope="module")
def crds(envtest: EnvTest) -> list[dict[str, Any]]:
    return envtest.install_crds(CRD_FILES)


def _base(name: str, namespace: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((BASES / f"{name}.yaml").read_text())
    document["metadata"]["namespace"] = namespace
    document["metadata"].pop("generation", None)
    return document


async def _kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(find_kubectl()),
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


def test_crds_are_established_and_structural(envtest: EnvTest, crds: list[dict[str, Any]]) -> None:
    for crd in crds:
        name = crd["metadata"]["name"]
        status, body = envtest.client.raw("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        assert status == 200
        conditions = {c["type"]: c["status"] for c in body["status"]["conditions"]}
        assert conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True", conditions
        assert "NonStructuralSchema" not in conditions


def test_discovery_lists_short_names_categories_and_subresources(envtest: EnvTest, crds: list[dict[str, Any]]) -> None:
    status, body = envtest.client.raw("GET", "/apis/workload.serving.volcano.sh/v1alpha1")
    assert status == 200
    resources = {resource["name"]: resource for resource in body["resources"]}
    for spec in (s for s in KIND_SPECS if s.group == "workload.serving.volcano.sh"):  # ours: test_modelcache.py
        resource = resources[spec.plural]
        assert resource["kind"] == spec.kind and resource["namespaced"] is True
        assert resource["shortNames"] == list(spec.short_names) and resource["categories"] == ["kthena"]
        assert f"{spec.plural}/status" in resources
    assert "modelservings/scale" in resources


async def test_kubectl_explain_reaches_the_pod_schema(envtest: EnvTest, crds: list[dict[str, Any]]) -> None:
    code, out, err = await _kubectl(
        envtest.kubeconfig_path, "explain", "modelserving.spec.template.roles.entryTemplate.spec.containers"
    )
    assert code == 0, err
    assert "KIND:       ModelServing" in out and "FIELDS:" in out
    for field in ("image\t<string>", "resources\t<Object>", "ports\t<[]Object>", "name\t<string> -required-"):
        assert field in out, out
    code, out, err = await _kubectl(envtest.kubeconfig_path, "explain", "ms.spec.recoveryPolicy")
    assert code == 0, err
    assert "RecoveryPolicy defines the recovery policy" in out and "ServingGroupRecreate" in out
    code, out, err = await _kubectl(envtest.kubeconfig_path, "explain", "asp.spec.behavior.scaleUp.panicPolicy")
    assert code == 0, err
    assert "panicThresholdPercent" in out


async def test_kubectl_explain_shows_prose_not_marker_text(envtest: EnvTest, crds: list[dict[str, Any]]) -> None:
    code, out, err = await _kubectl(envtest.kubeconfig_path, "explain", "ms.spec.template", "--recursive=false")
    assert code == 0, err
    assert "Roles are the roles of every ServingGroup" in out, out
    for path in ("ms.spec.template.roles", "ms.spec.plugins.scope", "asp.spec", "mb.spec"):
        code, out, err = await _kubectl(envtest.kubeconfig_path, "explain", path)
        assert code == 0, err
        assert not MARKER.search(out), (path, out)


async def test_autoscalingpolicy_printer_columns(
    envtest: EnvTest, crds: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    homogeneous = _base("autoscalingpolicy-homogeneous", namespace)
    disaggregated = _base("autoscalingpolicy-disaggregated", namespace)
    for policy in (homogeneous, disaggregated):
        await kube.create(AUTOSCALINGPOLICIES, policy, namespace)
    await kube.patch(
        AUTOSCALINGPOLICIES,
        homogeneous["metadata"]["name"],
        {"status": {"homogeneousStatus": {"currentReplicas": 2, "desiredReplicas": 5, "mode": "Panic"}}},
        namespace,
        subresource="status",
    )
    roles = [
        {"name": "prefill", "currentReplicas": 1, "desiredReplicas": 2, "mode": "Stable"},
        {"name": "decode", "currentReplicas": 3, "desiredReplicas": 3, "mode": "Stable"},
    ]
    await kube.patch(
        AUTOSCALINGPOLICIES,
        disaggregated["metadata"]["name"],
        {"status": {"disaggregatedStatus": {"roles": roles}}},
        namespace,
        subresource="status",
    )
    code, out, err = await _kubectl(envtest.kubeconfig_path, "get", "asp", "-n", namespace)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "TARGET", "CURRENT", "DESIRED", "MODE", "AGE"]
    rows = {line.split()[0]: line.split()[1:5] for line in lines[1:]}
    target = homogeneous["spec"]["homogeneousTarget"]["target"]["targetRef"]["name"]
    assert rows[homogeneous["metadata"]["name"]] == [target, "2", "5", "Panic"]
    target = disaggregated["spec"]["disaggregatedTarget"]["targetRef"]["name"]
    assert rows[disaggregated["metadata"]["name"]] == [target, "1", "2", "Stable"]


async def test_scale_status_and_printer_columns(
    envtest: EnvTest, crds: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, _base("modelserving-pd", namespace), namespace)
    status = {
        "replicas": 4,
        "availableReplicas": 3,
        "updatedReplicas": 2,
        "labelSelector": "modelserving.volcano.sh/name=llama-pd",
        "conditions": [
            {
                "type": "Scheduled",
                "status": "False",
                "reason": "InsufficientGPU",
                "message": "waiting for nvidia.com/gpu: 16 per pod",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    await kube.patch(MODELSERVINGS, "llama-pd", {"status": status}, namespace, subresource="status")
    scale = await kube.get_scale(MODELSERVINGS, "llama-pd", namespace)
    assert scale["spec"]["replicas"] == 4
    assert scale["status"] == {"replicas": 4, "selector": "modelserving.volcano.sh/name=llama-pd"}
    await kube.set_scale(MODELSERVINGS, "llama-pd", namespace, 6)
    stored = await kube.get(MODELSERVINGS, "llama-pd", namespace)
    assert stored["spec"]["replicas"] == 6 and stored["status"]["availableReplicas"] == 3
    code, out, err = await _kubectl(envtest.kubeconfig_path, "get", "ms", "-n", namespace)
    assert code == 0, err
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "REPLICAS", "AVAILABLE", "UPDATED", "PLACEMENT", "ACTIVATOR", "AGE"]
    assert row.split()[:5] == ["llama-pd", "6", "3", "2", "InsufficientGPU"]
    assert len(row.split()) == 6  # the Activator column is empty: no activator marked this ModelServing


async def test_cel_rules_hold_without_the_webhook(crds: list[dict[str, Any]], kube: KubeClient, namespace: str) -> None:
    document = _base("modelserving-pd", namespace)
    stored = await kube.create(MODELSERVINGS, document, namespace)
    renamed = copy.deepcopy(stored)
    renamed["spec"]["template"]["roles"][1]["name"] = "generate"
    with pytest.raises(Invalid) as caught:
        await kube.replace(MODELSERVINGS, renamed, namespace)
    messages = {cause.field: cause.message for cause in caught.value.causes}
    assert "role names are immutable; existing role names are [prefill decode]" in messages["spec.template.roles"]
    no_gang = copy.deepcopy(stored)
    del no_gang["spec"]["template"]["gangPolicy"]
    with pytest.raises(Invalid) as caught:
        await kube.replace(MODELSERVINGS, no_gang, namespace)
    assert "gangPolicy is required once set" in caught.value.causes[0].message
    # minRoleReplicas is immutable (Kthena's CEL rule), enforced by the API server itself.
    changed = copy.deepcopy(stored)
    changed["spec"]["template"]["gangPolicy"]["minRoleReplicas"]["prefill"] = 2
    with pytest.raises(Invalid) as caught:
        await kube.replace(MODELSERVINGS, changed, namespace)
    assert any("minRoleReplicas is immutable" in c.message for c in caught.value.causes)
    workerless = _base("modelserving-pd", namespace)
    workerless["metadata"]["name"] = "workerless"
    del workerless["spec"]["template"]["roles"][0]["workerTemplate"]
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELSERVINGS, workerless, namespace)
    (cause,) = [c for c in caught.value.causes if c.field == "spec.template.roles[0].workerTemplate"]
    assert cause.message == "Required value: workerTemplate is required when workerReplicas is greater than 0"


async def test_modelbooster_requests_are_warned_about(
    envtest: EnvTest, crds: list[dict[str, Any]], namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "booster.yaml"
    path.write_text(yaml.safe_dump(_base("modelbooster-vllm", namespace)))
    code, _, err = await _kubectl(envtest.kubeconfig_path, "create", "-f", str(path))
    assert code == 0, err
    assert "Warning: ModelBooster is deprecated as of Kthena v1.1" in err
    code, out, err = await _kubectl(envtest.kubeconfig_path, "get", "mb", "-n", namespace)
    assert code == 0 and out.split()[:3] == ["NAME", "ACTIVE", "AGE"], (out, err)
    assert MODELBOOSTERS.plural == "modelboosters"


DUPLICATE_IP_ALIASES = [
    {"ip": "10.1.2.3", "hostnames": ["test.com", "example.com"]},
    {"ip": "10.1.2.3", "hostnames": ["test.org"]},
]


async def test_duplicate_host_alias_ips_are_accepted(
    crds: list[dict[str, Any]], kube: KubeClient, namespace: str
) -> None:
    """Kthena's e2e TestModelServingWithDuplicateHostAliases: two hostAliases entries may share an IP, as in a Pod."""
    document = _base("modelserving-pd", namespace)
    for role in document["spec"]["template"]["roles"]:
        role["entryTemplate"]["spec"]["hostAliases"] = DUPLICATE_IP_ALIASES
    stored = await kube.create(MODELSERVINGS, document, namespace)
    for role in stored["spec"]["template"]["roles"]:
        assert role["entryTemplate"]["spec"]["hostAliases"] == DUPLICATE_IP_ALIASES
    # An update keeps them too (the list is replaced as a whole).
    stored["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["hostAliases"] = DUPLICATE_IP_ALIASES[::-1]
    replaced = await kube.replace(MODELSERVINGS, stored, namespace)
    entry = replaced["spec"]["template"]["roles"][0]["entryTemplate"]
    assert entry["spec"]["hostAliases"] == DUPLICATE_IP_ALIASES[::-1]


async def test_identical_container_ports_and_env_names_are_accepted(
    envtest: EnvTest, crds: list[dict[str, Any]], namespace: str, tmp_path: Path
) -> None:
    """A Pod accepts them (with a warning): so do the templates and ModelBooster's backend env, without one.

    The Pod API's warnings come from its own validation, which a custom resource does not run; the CRD
    schema adds none.
    """
    serving = _base("modelserving-pd", namespace)
    container = serving["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
    container["ports"] = [{"containerPort": 8000}, {"containerPort": 8000}]
    container["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    booster = _base("modelbooster-vllm", namespace)
    env = booster["spec"]["backend"]["env"]
    env.append({**env[0], "value": "other"})
    path = tmp_path / "lenient.yaml"
    path.write_text(yaml.safe_dump_all([serving, booster]))
    code, out, err = await _kubectl(envtest.kubeconfig_path, "create", "-o", "json", "-f", str(path))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("Warning:")]
    assert warnings and all(line.startswith("Warning: ModelBooster is deprecated") for line in warnings), err
    items, rest = [], out.strip()
    while rest:  # kubectl prints one JSON object per created object
        item, end = json.JSONDecoder().raw_decode(rest)
        items.append(item)
        rest = rest[end:].strip()
    ports = items[0]["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["ports"]
    assert ports == [{"containerPort": 8000, "protocol": "TCP"}] * 2  # defaulted inside an atomic list
    assert items[1]["spec"]["backend"]["env"] == env
