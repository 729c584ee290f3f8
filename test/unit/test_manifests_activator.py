"""manifests/activator: the optional activator component (Deployment, Services, ServiceAccount, RBAC).

Checked on the files themselves and on what ``kubectl kustomize`` builds from manifests/default plus the
component; that the chart's ``activator.enabled`` installs exactly the same objects is in test_chart.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "kthena-system"
NAME = "kthena-py-activator"
DEFAULT_FOLDERS = ("rbac", "manager", "metrics", "webhook")

Doc = dict[str, Any]


def load(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def component_objects() -> list[Doc]:
    return [
        d
        for path in sorted((MANIFESTS / "activator").glob("*.yaml"))
        for d in load(path)
        if d["kind"] not in ("Kustomization", "Component")
    ]


def the(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def container(docs: list[Doc]) -> Doc:
    (only,) = the(docs, "Deployment", NAME)["spec"]["template"]["spec"]["containers"]
    return only


def port_number(c: Doc, port: int | str) -> int:
    for p in c["ports"]:
        if port in (p["containerPort"], p["name"]):
            return int(p["containerPort"])
    raise AssertionError(f"no container port {port!r}")


def flags(args: list[str]) -> dict[str, str]:
    return {name: value for name, _, value in (a.partition("=") for a in args if a.startswith("--"))}


def test_the_component_is_optional_and_not_in_the_default_install() -> None:
    (component,) = load(MANIFESTS / "activator" / "kustomization.yaml")
    assert component["kind"] == "Component"
    for path in (MANIFESTS / "default" / "kustomization.yaml", MANIFESTS / "kustomization.yaml"):
        (kustomization,) = load(path)
        referenced = [*kustomization.get("resources", []), *kustomization.get("components", [])]
        assert not [r for r in referenced if "activator" in r], path


def test_flags_ports_and_probes_agree() -> None:
    docs = component_objects()
    c = container(docs)
    assert c["args"][0] == "activator"
    values = flags(c["args"])
    assert values["--listen"].startswith("0.0.0.0:")
    assert port_number(c, "http") == int(values["--listen"].rpartition(":")[2])
    assert port_number(c, "http-metrics") == int(values["--metrics-bind-address"].rpartition(":")[2])
    health = int(values["--health-probe-bind-address"].rpartition(":")[2])
    assert port_number(c, c["livenessProbe"]["httpGet"]["port"]) == health
    assert port_number(c, c["readinessProbe"]["httpGet"]["port"]) == health
    assert (c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"]) == ("/healthz", "/readyz")
    assert values["--hold-budget"] == "120s"
    grace = the(docs, "Deployment", NAME)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > 120, "a stopping pod gets the hold budget to answer what it holds"


def test_services_select_the_activator_pods_on_its_ports() -> None:
    docs = component_objects()
    deployment = the(docs, "Deployment", NAME)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == pod_labels
    assert pod_labels["app.kubernetes.io/component"] == "activator"
    c = container(docs)
    for name, port in ((NAME, "http"), (f"{NAME}-metrics", "http-metrics")):
        service = the(docs, "Service", name)
        assert service["spec"]["selector"].items() <= pod_labels.items()
        (spec_port,) = service["spec"]["ports"]
        assert spec_port["targetPort"] == port
        port_number(c, port)


def test_the_prometheus_service_monitor_scrapes_the_activator() -> None:
    (monitor,) = [d for d in load(MANIFESTS / "prometheus" / "service_monitor.yaml")]
    metrics = the(component_objects(), "Service", f"{NAME}-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in metrics["spec"]["ports"]]
    proxy = the(component_objects(), "Service", NAME)
    assert not monitor["spec"]["selector"]["matchLabels"].items() <= proxy["metadata"]["labels"].items()


def test_rbac_writes_only_the_scale_subresource_and_patches_modelservings_and_modelpools_annotations() -> None:
    docs = component_objects()
    role = the(docs, "ClusterRole", NAME)
    writes = {
        (group, resource)
        for rule in role["rules"]
        if set(rule["verbs"]) - {"get", "list", "watch"}
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert writes == {
        ("workload.serving.volcano.sh", "modelservings/scale"),
        ("workload.serving.volcano.sh", "modelservings"),
        ("serving.kthena-py.io", "modelpools"),  # the demand annotation on a pool
    }
    patch_only = [r for r in role["rules"] if r["resources"] == ["modelservings"] and "patch" in r["verbs"]]
    assert [r["verbs"] for r in patch_only] == [["patch"]]  # the annotation: no update, no create, no delete
    pools = [r for r in role["rules"] if "modelpools" in r["resources"]]
    assert [sorted(r["verbs"]) for r in pools] == [["get", "list", "patch", "watch"]]  # no update, create, delete
    readable = {
        (group, resource)
        for rule in role["rules"]
        if {"get", "list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    wanted = {"modelservings", "autoscalingpolicies", "autoscalingpolicybindings"}
    assert {("workload.serving.volcano.sh", r) for r in wanted} | {("", "pods")} <= readable
    assert ("serving.kthena-py.io", "modelpools") in readable
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in role["rules"])
    assert not [rule for rule in role["rules"] if "secrets" in rule["resources"]]
    binding = the(docs, "ClusterRoleBinding", NAME)
    assert binding["roleRef"]["name"] == NAME
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    assert the(docs, "Deployment", NAME)["spec"]["template"]["spec"]["serviceAccountName"] == NAME
    the(docs, "ServiceAccount", NAME)


def test_kustomize_builds_the_default_install_with_the_activator(tmp_path: Path, kubectl_path: Path) -> None:
    import subprocess

    up = os.path.relpath(MANIFESTS, tmp_path)
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": [f"{up}/{f}" for f in DEFAULT_FOLDERS],
        "components": [f"{up}/activator"],
        "images": [{"name": "kthena-py", "newName": "registry.example/kthena-py", "newTag": "v1"}],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    result = subprocess.run(
        [str(kubectl_path), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    activator = container(docs)
    manager = the(docs, "Deployment", "kthena-py-controller-manager")["spec"]["template"]["spec"]["containers"][0]
    assert activator["image"] == manager["image"] == "registry.example/kthena-py:v1"
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"):
        the(docs, kind, NAME)
    assert the(docs, "Service", f"{NAME}-metrics")["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("name", ["service.yaml", "metrics_service.yaml", "deployment.yaml"])
def test_namespaced_objects_are_in_kthena_system(name: str) -> None:
    for doc in load(MANIFESTS / "activator" / name):
        assert doc["metadata"]["namespace"] == NAMESPACE


def test_the_deployment_flags_are_accepted_by_the_cli() -> None:
    from kthena_py.main import build_parser
    from kthena_py.plan.activator.targets import parse_hold_budget

    args = container(component_objects())["args"]
    parsed = build_parser().parse_args(args)
    assert parsed.command == "activator" if hasattr(parsed, "command") else parsed.run.__module__.endswith("activator")
    assert parse_hold_budget(parsed.hold_budget) == 120.0
    assert (parsed.listen, parsed.metrics_bind_address, parsed.health_probe_bind_address) == (
        "0.0.0.0:8080",
        ":8081",
        ":8082",
    )
