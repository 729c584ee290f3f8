"""The deployment manifests under manifests/: well-formed, consistent with each other and with the CLI.

Everything is read with PyYAML, and the kustomizations are also built with ``kubectl kustomize`` (the
kubectl ``hack/build-controlplane.sh`` builds; fixture ``kubectl_path``). The CRD YAML files under
manifests/crd/ are generated from the API models;
the checks that need them skip while they are absent.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"

NAMESPACE = "kthena-system"
GROUP = "workload.serving.volcano.sh"
SERVICE_ACCOUNT = "kthena-py-controller-manager"
DEPLOYMENT = "kthena-py-controller-manager"
LEASE = "kthena-py-controller-manager"
CERT_SECRET = "kthena-py-webhook-server-cert"
WEBHOOK_SERVICE = "kthena-py-webhook-service"
VALIDATING = "kthena-py-validating-webhook-configuration"
MUTATING = "kthena-py-mutating-webhook-configuration"
OWN_GROUP = "serving.kthena-py.io"
GENERATED_CRDS = {
    "workload.serving.volcano.sh_modelservings.yaml": "modelservings",
    "workload.serving.volcano.sh_autoscalingpolicies.yaml": "autoscalingpolicies",
    "workload.serving.volcano.sh_modelboosters.yaml": "modelboosters",
    "serving.kthena-py.io_modelcaches.yaml": "modelcaches",
    "serving.kthena-py.io_modelpools.yaml": "modelpools",
}
VALIDATING_PATHS = {
    "modelservings": "/validate-workload-serving-volcano-sh-v1alpha1-modelserving",
    "autoscalingpolicies": "/validate-workload-serving-volcano-sh-v1alpha1-autoscalingpolicy",
    "modelboosters": "/validate-workload-serving-volcano-sh-v1alpha1-modelbooster",
    "modelcaches": "/validate-serving-kthena-py-io-v1alpha1-modelcache",
    "modelpools": "/validate-serving-kthena-py-io-v1alpha1-modelpool",
}
MUTATING_PATHS = {"autoscalingpolicies": "/mutate-workload-serving-volcano-sh-v1alpha1-autoscalingpolicy"}
KUSTOMIZATION_KINDS = {"Kustomization", "Component"}
API_VERSIONS = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
    "Issuer": "cert-manager.io/v1",
    "Certificate": "cert-manager.io/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1",
}
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}

Doc = dict[str, Any]


# -- loading ----------------------------------------------------------------------------------------


def yaml_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def load(path: Path) -> list[Doc]:
    with path.open(encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def kustomization_dirs() -> list[Path]:
    return sorted(p.parent for p in MANIFESTS.rglob("kustomization.yaml"))


def rel(path: Path) -> str:
    return str(path.relative_to(MANIFESTS))


def objects(*folders: str) -> list[Doc]:
    """Every Kubernetes object (not kustomizations) in the given folders, non-recursively."""
    out: list[Doc] = []
    for folder in folders:
        for path in sorted((MANIFESTS / folder).glob("*.yaml")):
            out += [d for d in load(path) if d.get("kind") not in KUSTOMIZATION_KINDS]
    return out


def the(docs: list[Doc], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected exactly one {kind} {name}, found {len(found)}"
    return found[0]


DEFAULT_FOLDERS = ("rbac", "manager", "metrics", "webhook")


@pytest.fixture(scope="module")
def base() -> list[Doc]:
    """The objects manifests/default composes (without the generated CRDs)."""
    return objects(*DEFAULT_FOLDERS)


@pytest.fixture(scope="module")
def deployment(base: list[Doc]) -> Doc:
    return the(base, "Deployment", DEPLOYMENT)


@pytest.fixture(scope="module")
def container(deployment: Doc) -> Doc:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["manager"]
    return containers[0]


def flag_values(args: list[str]) -> dict[str, str]:
    """``--name=value`` and bare ``--name`` flags (value ``""``); the container must use the ``=`` form."""
    out: dict[str, str] = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            out[name] = value
    return out


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


def container_port(container: Doc, port: int | str) -> int:
    """Resolve a Service targetPort / probe port (number or name) to the container's port number."""
    for p in container["ports"]:
        if port in (p["containerPort"], p["name"]):
            return int(p["containerPort"])
    raise AssertionError(f"container {container['name']} has no port {port!r}")


def iter_rules(docs: list[Doc], kind: str) -> Iterator[tuple[str, Doc]]:
    for d in docs:
        if d["kind"] == kind:
            for rule in d.get("rules", []):
                yield d["metadata"]["name"], rule


# -- every file ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", yaml_files(), ids=rel)
def test_yaml_parses_into_typed_objects(path: Path) -> None:
    docs = load(path)
    assert docs, f"{rel(path)} is empty"
    for doc in docs:
        assert isinstance(doc, dict), f"{rel(path)}: a document is not a mapping"
        kind = doc.get("kind")
        assert kind, f"{rel(path)}: document without kind"
        if kind in KUSTOMIZATION_KINDS:
            assert doc["apiVersion"].startswith("kustomize.config.k8s.io/")
            continue
        assert doc["metadata"]["name"], f"{rel(path)}: {kind} without a name"
        if kind in API_VERSIONS:
            assert doc["apiVersion"] == API_VERSIONS[kind], f"{rel(path)}: {kind} apiVersion"
        if kind in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"], f"{rel(path)}: cluster-scoped {kind} has a namespace"
        else:
            assert doc["metadata"].get("namespace") == NAMESPACE, f"{rel(path)}: {kind} not in {NAMESPACE}"


@pytest.mark.parametrize("folder", kustomization_dirs(), ids=rel)
def test_kustomization_references_exist(folder: Path) -> None:
    (kustomization,) = load(folder / "kustomization.yaml")
    entries = list(kustomization.get("resources", [])) + list(kustomization.get("components", []))
    entries += [p["path"] for p in kustomization.get("patches", []) if "path" in p]
    assert entries, f"{rel(folder)}/kustomization.yaml references nothing"
    for entry in entries:
        if folder.name == "crd" and entry in GENERATED_CRDS:
            continue  # generated later; see test_generated_crds
        target = (folder / entry).resolve()
        assert target.exists(), f"{rel(folder)}/kustomization.yaml: {entry} does not exist"
        if target.is_dir():
            assert (target / "kustomization.yaml").is_file(), f"{entry} is a folder without kustomization.yaml"


@pytest.mark.parametrize("folder", kustomization_dirs(), ids=rel)
def test_every_yaml_file_in_a_kustomize_folder_is_used(folder: Path) -> None:
    (kustomization,) = load(folder / "kustomization.yaml")
    used = set(kustomization.get("resources", [])) | {p.get("path") for p in kustomization.get("patches", [])}
    for path in folder.glob("*.yaml"):
        if path.name != "kustomization.yaml":
            assert path.name in used, f"{rel(path)} is not referenced by its kustomization.yaml"


def test_crd_kustomization_lists_every_crd() -> None:
    (kustomization,) = load(MANIFESTS / "crd" / "kustomization.yaml")
    assert sorted(kustomization["resources"]) == sorted(GENERATED_CRDS)


def test_default_composes_everything_in_kthena_system() -> None:
    (default,) = load(MANIFESTS / "default" / "kustomization.yaml")
    assert default["namespace"] == NAMESPACE
    assert default["resources"] == ["../crd", *(f"../{f}" for f in DEFAULT_FOLDERS)]
    assert {"name": "kthena-py", "newName": "kthena-py", "newTag": "latest"} in default["images"]
    for label in default.get("labels", []):
        assert not label.get("includeSelectors"), "labels must not change the Deployment's immutable selector"
    (top,) = load(MANIFESTS / "kustomization.yaml")
    assert top["resources"] == ["default"]


def test_generated_crds() -> None:
    missing = [name for name in GENERATED_CRDS if not (MANIFESTS / "crd" / name).is_file()]
    if missing:
        pytest.skip(f"generated CRD files not present yet in manifests/crd/: {', '.join(missing)}")
    for name, plural in GENERATED_CRDS.items():
        (crd,) = load(MANIFESTS / "crd" / name)
        group = name.partition("_")[0]
        assert group in (GROUP, OWN_GROUP)
        assert crd["kind"] == "CustomResourceDefinition"
        assert crd["metadata"]["name"] == f"{plural}.{group}"
        assert crd["spec"]["group"] == group
        assert crd["spec"]["names"]["plural"] == plural
        assert crd["spec"]["scope"] == "Namespaced"


# -- the Deployment ----------------------------------------------------------------------------------


def test_deployment_replicas_and_selector(deployment: Doc) -> None:
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    selector = spec["selector"]["matchLabels"]
    labels = spec["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT


def test_deployment_security_settings(deployment: Doc, container: Doc) -> None:
    pod = deployment["spec"]["template"]["spec"]
    pod_sc = pod["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] == 65532
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc.get("privileged", False) is False
    assert sc.get("runAsUser", 65532) == 65532
    assert sc.get("runAsNonRoot", True) is True
    assert sc.get("seccompProfile", {"type": "RuntimeDefault"}) == {"type": "RuntimeDefault"}


def test_deployment_resources_volumes_and_env(deployment: Doc, container: Doc) -> None:
    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["image"] == "kthena-py:latest"


def test_deployment_spreads_replicas_across_nodes(deployment: Doc) -> None:
    pod = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    spread = [c for c in pod.get("topologySpreadConstraints", []) if c["topologyKey"] == "kubernetes.io/hostname"]
    anti = pod.get("affinity", {}).get("podAntiAffinity", {})
    terms = [t.get("podAffinityTerm", t) for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
    terms += anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    by_host = spread + [t for t in terms if t["topologyKey"] == "kubernetes.io/hostname"]
    assert by_host, "the two replicas are not spread across nodes"
    for term in by_host:
        assert term["labelSelector"]["matchLabels"].items() <= labels.items()


def test_deployment_flags_exist_in_the_cli(container: Doc) -> None:
    # The real parser must accept the Deployment's arguments as they are.
    args = build_parser().parse_args(container["args"])
    assert args.command == "manager"
    assert args.leader_elect is True


def test_deployment_flags_ports_and_probes(container: Doc) -> None:
    flags = flag_values(container["args"])
    assert "--leader-elect" in flags
    assert container_port(container, "webhook-server") == int(flags["--webhook-port"]) == 9443
    assert container_port(container, "http-metrics") == port_of(flags["--metrics-bind-address"]) == 8080
    assert flags["--metrics-bind-address"].startswith(":"), "metrics must listen on all interfaces in a pod"
    health = port_of(flags["--health-probe-bind-address"])
    assert health == 8081
    assert flags["--health-probe-bind-address"].startswith(":")
    live = container["livenessProbe"]["httpGet"]
    ready = container["readinessProbe"]["httpGet"]
    assert live["path"] == "/healthz"
    assert ready["path"] == "/readyz"
    assert container_port(container, live["port"]) == container_port(container, ready["port"]) == health


def test_leader_election_lease_matches_the_role(base: list[Doc], container: Doc) -> None:
    flags = flag_values(container["args"])
    lease = build_parser().parse_args(container["args"]).leader_election_id
    assert lease == LEASE
    assert flags.get("--leader-election-namespace", NAMESPACE) == NAMESPACE
    role = the(base, "Role", "kthena-py-leader-election")
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [LEASE],
            "verbs": ["get", "update"],
        }
    ]


def test_pod_disruption_budget_keeps_a_replica(base: list[Doc], deployment: Doc) -> None:
    pdb = the(base, "PodDisruptionBudget", DEPLOYMENT)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_namespace_enforces_restricted_pod_security(base: list[Doc]) -> None:
    ns = the(base, "Namespace", NAMESPACE)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


# -- RBAC ----------------------------------------------------------------------------------------------


def test_cluster_role_grants_no_secrets_and_no_wildcards(base: list[Doc]) -> None:
    rules = list(iter_rules(base, "ClusterRole"))
    assert rules
    for name, rule in rules:
        assert "secrets" not in rule["resources"], f"ClusterRole {name} grants access to secrets"
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in v for v in rule.get(key, [])), f"ClusterRole {name}: wildcard in {key}: {rule}"
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"]), rule
        assert "nonResourceURLs" not in rule
        assert not {"pods/exec", "pods/attach", "pods/portforward", "nodes/proxy", "serviceaccounts/token"} & set(
            rule["resources"]
        )


def test_cluster_role_covers_the_controllers(base: list[Doc]) -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    for _, rule in iter_rules(base, "ClusterRole"):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    watch = {"get", "list", "watch"}
    expected = {
        (GROUP, "modelservings"): watch | {"create", "update", "patch", "delete"},
        (GROUP, "autoscalingpolicies"): watch,
        (GROUP, "modelboosters"): watch,
        (GROUP, "modelservings/status"): {"update", "patch"},
        (GROUP, "autoscalingpolicies/status"): {"update", "patch"},
        (GROUP, "modelboosters/status"): {"update", "patch"},
        (GROUP, "modelservings/scale"): {"get", "update"},
        (GROUP, "modelservings/finalizers"): {"update"},
        ("", "pods"): watch | {"create", "patch", "delete"},
        ("", "services"): watch | {"create", "patch", "delete"},
        ("", "events"): {"create", "patch"},
        ("events.k8s.io", "events"): {"create", "patch"},
        ("apps", "controllerrevisions"): watch | {"create", "patch", "delete"},
        ("scheduling.volcano.sh", "podgroups"): watch | {"create", "patch", "delete"},
        ("scheduling.volcano.sh", "queues"): watch,
        ("scheduling.k8s.io", "priorityclasses"): watch,
        ("", "nodes"): watch,
        (OWN_GROUP, "modelcaches"): watch | {"patch"},
        (OWN_GROUP, "modelcaches/status"): {"update", "patch"},
        (OWN_GROUP, "modelcaches/finalizers"): {"update"},
        (OWN_GROUP, "modelpools"): watch,
        (OWN_GROUP, "modelpools/status"): {"update", "patch"},
        ("batch", "jobs"): watch | {"create", "delete"},
        ("", "persistentvolumeclaims"): watch | {"create"},
        ("apiextensions.k8s.io", "customresourcedefinitions"): watch,
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): {"get", "patch"},
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): {"get", "patch"},
    }
    for key, verbs in expected.items():
        assert verbs <= granted.get(key, set()), f"ClusterRole lacks {sorted(verbs - granted.get(key, set()))} on {key}"
    # ConfigMaps: only the get of a ModelCache's attestation (by the name its spec gives), never list, watch or write.
    assert granted.get(("", "configmaps")) == {"get"}
    assert ("coordination.k8s.io", "leases") not in granted, "leases belong in the namespaced Role"
    crd_verbs = granted[("apiextensions.k8s.io", "customresourcedefinitions")]
    assert crd_verbs == watch, "CRDs are only read (feature detection)"


def test_cluster_objects_are_reachable_only_by_name(base: list[Doc]) -> None:
    for _, rule in iter_rules(base, "ClusterRole"):
        if "admissionregistration.k8s.io" in rule["apiGroups"]:
            assert rule.get("resourceNames") in ([VALIDATING], [MUTATING]), rule
        if "apiextensions.k8s.io" in rule["apiGroups"]:
            assert rule.get("resourceNames") == [
                "podgroups.scheduling.volcano.sh",
                "modelservers.networking.serving.volcano.sh",
                "modelroutes.networking.serving.volcano.sh",
                "modelcaches.serving.kthena-py.io",
                "modelpools.serving.kthena-py.io",
            ], rule


def test_secrets_only_through_the_webhook_cert_role(base: list[Doc]) -> None:
    for kind in ("Role", "ClusterRole"):
        for name, rule in iter_rules(base, kind):
            if "secrets" not in rule["resources"]:
                continue
            assert (kind, name) == ("Role", "kthena-py-webhook-cert"), f"{kind} {name} grants secrets"
            assert rule["resources"] == ["secrets"]
            if rule.get("resourceNames"):
                assert rule["resourceNames"] == [CERT_SECRET]
                assert set(rule["verbs"]) <= {"get", "update", "patch"}
            else:
                # create cannot be limited by resourceNames; it must be the only unnamed verb
                assert rule["verbs"] == ["create"]


def test_namespaced_roles_stay_in_kthena_system_and_are_named(base: list[Doc]) -> None:
    for name, rule in iter_rules(base, "Role"):
        role = the(base, "Role", name)
        assert role["metadata"]["namespace"] == NAMESPACE
        if rule["verbs"] != ["create"]:
            assert rule.get("resourceNames"), f"Role {name}: {rule} should name the objects it touches"


def test_bindings_bind_the_manager_service_account(base: list[Doc]) -> None:
    the(base, "ServiceAccount", SERVICE_ACCOUNT)
    bindings = [d for d in base if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    roles = {(d["kind"], d["metadata"]["name"]) for d in base if d["kind"] in ("Role", "ClusterRole")}
    assert {(d["kind"], d["metadata"]["name"]) for d in bindings} >= {("ClusterRoleBinding", SERVICE_ACCOUNT)}
    assert len([d for d in bindings if d["kind"] == "RoleBinding"]) == len([r for r in roles if r[0] == "Role"])
    for binding in bindings:
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        assert (ref["kind"], ref["name"]) in roles, f"{binding['metadata']['name']} binds a missing role"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]


# -- Services and webhooks ---------------------------------------------------------------------------------


def test_services_select_the_manager_pods(base: list[Doc], deployment: Doc, container: Doc) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for svc in (d for d in base if d["kind"] == "Service"):
        assert svc["spec"]["selector"].items() <= labels.items(), svc["metadata"]["name"]
        for port in svc["spec"]["ports"]:
            container_port(container, port["targetPort"])
    metrics = the(base, "Service", "kthena-py-controller-manager-metrics")
    (port,) = metrics["spec"]["ports"]
    assert port["name"] in ("http-metrics", "https-metrics")
    assert port["port"] == 8080
    assert container_port(container, port["targetPort"]) == port_of(
        flag_values(container["args"])["--metrics-bind-address"]
    )


def webhooks(base: list[Doc]) -> Iterator[tuple[str, Doc]]:
    for name in (VALIDATING, MUTATING):
        kind = "ValidatingWebhookConfiguration" if name == VALIDATING else "MutatingWebhookConfiguration"
        for hook in the(base, kind, name)["webhooks"]:
            yield kind, hook


def test_webhook_paths_and_rules(base: list[Doc]) -> None:
    served: dict[str, dict[str, str]] = {"ValidatingWebhookConfiguration": {}, "MutatingWebhookConfiguration": {}}
    names: set[str] = set()
    for kind, hook in webhooks(base):
        assert hook["name"].count(".") >= 2, f"webhook name {hook['name']} must be fully qualified"
        assert hook["name"] not in names
        names.add(hook["name"])
        (rule,) = hook["rules"]
        assert rule["apiGroups"] == [OWN_GROUP if rule["resources"] in (["modelcaches"], ["modelpools"]) else GROUP]
        assert rule["apiVersions"] == ["v1alpha1"]
        assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
        assert rule["scope"] == "Namespaced"
        (resource,) = rule["resources"]
        served[kind][resource] = hook["clientConfig"]["service"]["path"]
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 10
        assert hook["matchPolicy"] == "Equivalent"
        assert "caBundle" not in hook["clientConfig"], "caBundle is injected at run time"
    assert served["ValidatingWebhookConfiguration"] == VALIDATING_PATHS
    assert served["MutatingWebhookConfiguration"] == MUTATING_PATHS


def test_webhooks_reach_the_manager_through_the_service(base: list[Doc], container: Doc) -> None:
    svc = the(base, "Service", WEBHOOK_SERVICE)
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 443
    assert container_port(container, port["targetPort"]) == int(flag_values(container["args"])["--webhook-port"])
    for _, hook in webhooks(base):
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["port"]) == (WEBHOOK_SERVICE, NAMESPACE, 443)
        assert "url" not in hook["clientConfig"]


def test_webhook_certificate_secret_is_mounted_at_the_cert_dir(deployment: Doc, container: Doc) -> None:
    cert_dir = flag_values(container["args"])["--webhook-cert-dir"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == cert_dir]
    assert mount.get("readOnly") is True
    (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == CERT_SECRET
    assert volume["secret"]["optional"] is True, "the pod must start before the certificate exists"


def test_cert_manager_component_matches_the_default_install(base: list[Doc]) -> None:
    folder = MANIFESTS / "webhook" / "cert-manager"
    (component,) = load(folder / "kustomization.yaml")
    assert component["kind"] == "Component"
    docs = objects("webhook/cert-manager")
    cert = the(docs, "Certificate", "kthena-py-serving-cert")
    assert cert["spec"]["secretName"] == CERT_SECRET
    assert f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    issuer = the(docs, "Issuer", cert["spec"]["issuerRef"]["name"])
    assert issuer["metadata"]["namespace"] == cert["metadata"]["namespace"] == NAMESPACE
    patched = {d["metadata"]["name"] for d in docs if d["kind"].endswith("WebhookConfiguration")}
    assert patched == {VALIDATING, MUTATING}
    for d in docs:
        if d["kind"].endswith("WebhookConfiguration"):
            inject = d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            assert inject == f"{NAMESPACE}/{cert['metadata']['name']}"


def test_prometheus_service_monitor_selects_the_metrics_service(base: list[Doc]) -> None:
    (monitor,) = objects("prometheus")
    metrics = the(base, "Service", "kthena-py-controller-manager-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in metrics["spec"]["ports"]]
    webhook = the(base, "Service", WEBHOOK_SERVICE)
    assert not monitor["spec"]["selector"]["matchLabels"].items() <= webhook["metadata"]["labels"].items()


# -- kubectl kustomize ---------------------------------------------------------------------------------------


def kustomize(kubectl: Path, path: Path) -> list[Doc]:
    result = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"kubectl kustomize {path} failed:\n{result.stderr}"
    return [d for d in yaml.safe_load_all(result.stdout) if d is not None]


@pytest.mark.parametrize("folder", [*DEFAULT_FOLDERS, "prometheus"])
def test_kustomize_builds_each_part(folder: str, kubectl_path: Path) -> None:
    assert kustomize(kubectl_path, MANIFESTS / folder)


def test_kustomize_builds_the_cert_manager_component(tmp_path: Path, kubectl_path: Path) -> None:
    # Everything of manifests/default except the generated CRDs, plus the component. kustomize wants
    # relative paths.
    up = os.path.relpath(MANIFESTS, tmp_path)
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": [f"{up}/{f}" for f in DEFAULT_FOLDERS],
        "components": [f"{up}/webhook/cert-manager"],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    docs = kustomize(kubectl_path, tmp_path)
    kinds = {d["kind"] for d in docs}
    assert {"Issuer", "Certificate", "Deployment"} <= kinds
    for d in docs:
        if d["kind"].endswith("WebhookConfiguration"):
            assert d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    # The manager must leave the Secret and caBundle to cert-manager.
    args = the(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--webhook-cert-mode=cert-manager" in args
    assert any(a.startswith("--webhook-cert-dir=") for a in args)


@pytest.mark.parametrize("folder", ["default", "."])
def test_kustomize_builds_the_default_install(folder: str, kubectl_path: Path) -> None:
    missing = [name for name in GENERATED_CRDS if not (MANIFESTS / "crd" / name).is_file()]
    if missing:
        pytest.skip(f"generated CRD files not present yet in manifests/crd/: {', '.join(missing)}")
    docs = kustomize(kubectl_path, MANIFESTS / folder)
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert crds == {f"{plural}.{name.partition('_')[0]}" for name, plural in GENERATED_CRDS.items()}
    for d in docs:
        if d["kind"] not in CLUSTER_SCOPED:
            assert d["metadata"]["namespace"] == NAMESPACE, f"{d['kind']} {d['metadata']['name']}"
    deployment = the(docs, "Deployment", DEPLOYMENT)
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "kthena-py:latest"
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "kthena-py",
        "app.kubernetes.io/component": "controller-manager",
    }


# -- the image -------------------------------------------------------------------------------------------


def containerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of the Containerfile, with continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Containerfile").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pending += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            out.append((keyword.upper(), " ".join(rest.split())))
            pending = ""
    return out


def test_containerfile_builds_a_non_root_image_of_the_console_script(container: Doc) -> None:
    instructions = containerfile_instructions()
    froms = [args for keyword, args in instructions if keyword == "FROM"]
    assert [f.split()[-1] for f in froms] == ["builder", "downloader", "manager"], "the manager is the default (last)"
    (base,) = [args for keyword, args in instructions if keyword == "ARG" and args.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", base), "base image pinned by digest"
    final = instructions[max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM") :]
    assert ("USER", "65532:65532") in final
    assert final[-2:] == [("ENTRYPOINT", '["kthena-py"]'), ("CMD", '["manager"]')]
    env = " ".join(args for keyword, args in final if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
    labels = " ".join(args for keyword, args in final if keyword == "LABEL")
    assert "org.opencontainers.image.title" in labels and "org.opencontainers.image.licenses" in labels
    (exposed,) = [args for keyword, args in final if keyword == "EXPOSE"]
    assert {int(p) for p in exposed.split()} == {p["containerPort"] for p in container["ports"]}
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert "kthena-py" in tomllib.load(f)["project"]["scripts"]


def test_containerfile_downloader_target_carries_the_download_extra_only_there() -> None:
    instructions = containerfile_instructions()
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    downloader = instructions[starts[1] : starts[2]]
    manager = instructions[starts[2] :]
    assert ("USER", "65532:65532") in downloader
    assert downloader[-1] == ("ENTRYPOINT", '["kthena-py", "download"]')
    assert any("kthena-py[download]" in args for keyword, args in downloader if keyword == "RUN")
    assert not any("[download]" in args for _, args in manager)


def test_containerfile_compiles_the_managers_wheel_unless_told_not_to() -> None:
    instructions = containerfile_instructions()
    builder = instructions[: [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"][1]]
    assert ("ARG", "COMPILE=1") in builder
    (manager_wheel,) = [args for keyword, args in builder if keyword == "RUN" and "'.[revalidate]'" in args]
    assert manager_wheel.startswith("KTHENA_PY_COMPILE=${COMPILE} pip wheel")
    (download_wheel,) = [args for keyword, args in builder if keyword == "RUN" and "'.[download]'" in args]
    assert "KTHENA_PY_COMPILE" not in download_wheel, "the downloader runs no planner: its wheel is not compiled"
    assert any("gcc" in args for keyword, args in builder if keyword == "RUN")


def test_container_ignore_files_are_an_identical_allowlist() -> None:
    containerignore = (ROOT / ".containerignore").read_text(encoding="utf-8")
    assert (ROOT / ".dockerignore").read_text(encoding="utf-8") == containerignore
    patterns = [p.strip() for p in containerignore.splitlines() if p.strip() and not p.startswith("#")]
    assert patterns[0] == "*", "everything is excluded unless re-included"
    included = {p[1:] for p in patterns if p.startswith("!")}
    assert included >= {"pyproject.toml", "setup.py", "hack/buildsys", "kthena_py", "constraints.txt", "LICENSE"}
    assert not included & {".venv", ".git", "test", ".pytest_cache", ".hypothesis"}


# -- the eviction budget component ----------------------------------------------------------------------------


def eviction_hook() -> Doc:
    (patch,) = [d for d in objects("eviction") if d["kind"] == "ValidatingWebhookConfiguration"]
    assert patch["metadata"]["name"] == VALIDATING
    (hook,) = patch["webhooks"]
    return hook


def test_eviction_component_adds_kthenas_webhook_off_by_default(base: list[Doc]) -> None:
    from kthena_py.controllers.eviction import EVICTION_PATH

    (component,) = load(MANIFESTS / "eviction" / "kustomization.yaml")
    assert component["kind"] == "Component"
    hook = eviction_hook()
    assert hook["name"] == "eviction.modelserving.volcano.sh"
    assert hook["clientConfig"]["service"] == {
        "name": WEBHOOK_SERVICE,
        "namespace": NAMESPACE,
        "path": EVICTION_PATH,
        "port": 443,
    }
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }
    ]
    assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"]) == ("Fail", "NoneOnDryRun", 5)
    (expression,) = hook["namespaceSelector"]["matchExpressions"]
    assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
    assert NAMESPACE in expression["values"], "the manager's own pods must stay evictable"
    # Off by default: the default install has no eviction webhook and no ConfigMap access.
    assert all(h["name"] != hook["name"] for _, h in webhooks(base))


def test_eviction_component_grants_only_configmaps_to_the_manager() -> None:
    docs = objects("eviction")
    role = the(docs, "ClusterRole", "kthena-py-eviction")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        }
    ]
    binding = the(docs, "ClusterRoleBinding", "kthena-py-eviction")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "kthena-py-eviction",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]


def test_kustomize_builds_the_eviction_component(tmp_path: Path, base: list[Doc], kubectl_path: Path) -> None:
    up = os.path.relpath(MANIFESTS, tmp_path)
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": [f"{up}/{f}" for f in DEFAULT_FOLDERS],
        "components": [f"{up}/eviction", f"{up}/webhook/cert-manager"],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    docs = kustomize(kubectl_path, tmp_path)
    config = the(docs, "ValidatingWebhookConfiguration", VALIDATING)
    default = [h["name"] for kind, h in webhooks(base) if kind == "ValidatingWebhookConfiguration"]
    assert sorted(h["name"] for h in config["webhooks"]) == sorted(["eviction.modelserving.volcano.sh", *default])
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "one caBundle for every webhook"
    args = the(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(args)
    assert parsed.enable_eviction_webhook is True
    assert parsed.eviction_tracker_ttl == 60.0


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]).lower()


def test_dependencies_are_pinned_by_constraints_txt_and_the_image_uses_it() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version), f"not an exact pin: {line}"
            pins[_name(name)] = version
    assert {_name(r) for r in project["dependencies"]} <= set(pins), "every runtime dependency is pinned"
    download = {_name(r) for r in project["optional-dependencies"]["download"]}
    assert download and download <= set(pins), "the downloader's clients are pinned too"
    builds = [args for keyword, args in containerfile_instructions() if keyword == "RUN" and "pip wheel" in args]
    assert builds and all("--constraint constraints.txt" in args for args in builds)


def test_the_license_the_metadata_and_the_image_declare_is_there() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    labels = " ".join(args for keyword, args in containerfile_instructions() if keyword == "LABEL")
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels
