"""The Helm chart charts/kthena-py: lints, renders, and installs what manifests/default installs.

``helm`` and ``kubectl`` are the ones ``hack/build-controlplane.sh`` builds (fixtures ``helm_path`` and
``kubectl_path``). The comparisons render the chart with ``helm template`` and the kustomizations with
``kubectl kustomize`` and compare object by object (kind, name, namespace, and every field), after removing
only the labels Helm adds for its own bookkeeping (instance, version, managed-by, chart). What the chart does
in a cluster is tested in test/cluster/test_chart_install.py.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kthena-py"
MANIFESTS = ROOT / "manifests"
NAMESPACE = "kthena-system"
HELM_LABELS = (
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)
DEFAULT_FOLDERS = ("crd", "rbac", "manager", "metrics", "webhook")

Doc = dict[str, Any]


def helm(helm_path: Path, *args: str) -> str:
    result = subprocess.run([str(helm_path), *args], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def render(helm_path: Path, *values: str, namespace: str = NAMESPACE, crds: bool = True) -> list[Doc]:
    args = ["template", "kthena-py", str(CHART), "--namespace", namespace]
    if crds:
        args.append("--include-crds")
    for value in values:
        args += ["--set", value]
    return [d for d in yaml.safe_load_all(helm(helm_path, *args)) if d]


def kustomize(kubectl_path: Path, path: Path) -> list[Doc]:
    result = subprocess.run(
        [str(kubectl_path), "kustomize", str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def overlay(tmp_path: Path, components: list[str]) -> Path:
    """manifests/default, written out as an overlay so kustomize components can be added."""
    up = os.path.relpath(MANIFESTS, tmp_path)
    document = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": [f"{up}/{folder}" for folder in DEFAULT_FOLDERS],
        "components": [f"{up}/{component}" for component in components],
        "labels": [{"pairs": {"app.kubernetes.io/part-of": "kthena-py"}, "includeSelectors": False}],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    return tmp_path


def without_helm_labels(doc: Doc) -> Doc:
    labels = doc.get("metadata", {}).get("labels")
    if labels:
        for key in HELM_LABELS:
            labels.pop(key, None)
    return doc


def by_key(docs: list[Doc]) -> dict[tuple[str, str, str], Doc]:
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


def assert_same_objects(chart: list[Doc], expected: list[Doc]) -> None:
    """The same objects, but the Namespace (the chart installs into the release's) and the ``part-of`` label
    kustomize puts on the CRDs (Helm installs crds/ as the generated files are)."""
    rendered = by_key([without_helm_labels(d) for d in chart])
    wanted = by_key([d for d in expected if d["kind"] != "Namespace"])
    for (kind, _, _), doc in wanted.items():
        if kind == "CustomResourceDefinition":
            doc["metadata"].pop("labels", None)
    assert sorted(rendered) == sorted(wanted)
    for key, doc in wanted.items():
        assert rendered[key] == doc, key


def the(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in docs if d["kind"] == kind])
    return found[0]


def manager_args(docs: list[Doc]) -> list[str]:
    args: list[str] = the(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def webhooks(docs: list[Doc]) -> list[Doc]:
    return [w for d in docs if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]]


def test_helm_lint_is_clean(helm_path: Path) -> None:
    out = helm(helm_path, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out
    out = helm(
        helm_path,
        "lint",
        "--strict",
        str(CHART),
        "--set",
        "webhook.certManager.enabled=true,eviction.enabled=true,activator.enabled=true",
    )
    assert "0 chart(s) failed" in out


def test_default_values_install_exactly_manifests_default(helm_path: Path, kubectl_path: Path) -> None:
    assert_same_objects(render(helm_path), kustomize(kubectl_path, MANIFESTS / "default"))


def test_cert_manager_values_install_exactly_the_cert_manager_component(
    helm_path: Path, kubectl_path: Path, tmp_path: Path
) -> None:
    expected = kustomize(kubectl_path, overlay(tmp_path, ["webhook/cert-manager"]))
    assert_same_objects(render(helm_path, "webhook.certManager.enabled=true"), expected)


def test_eviction_toggle_adds_the_webhook_flag_and_tracker_permissions(
    helm_path: Path, kubectl_path: Path, tmp_path: Path
) -> None:
    off = render(helm_path, crds=False)
    assert "--enable-eviction-webhook" not in manager_args(off)
    assert "eviction.modelserving.volcano.sh" not in {w["name"] for w in webhooks(off)}
    on = render(helm_path, "eviction.enabled=true", crds=False)
    assert manager_args(on)[-1] == "--enable-eviction-webhook"
    (hook,) = [w for w in webhooks(on) if w["name"] == "eviction.modelserving.volcano.sh"]
    assert hook["clientConfig"]["service"]["path"] == "/validate-eviction"
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }
    ]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", NAMESPACE]
    rules = the(on, "ClusterRole", "kthena-py-eviction")["rules"]
    assert rules == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        }
    ]
    binding = the(on, "ClusterRoleBinding", "kthena-py-eviction")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kthena-py-controller-manager", "namespace": NAMESPACE}
    ]
    if (MANIFESTS / "eviction" / "kustomization.yaml").exists():
        # Once the eviction component is in manifests/, the chart must install exactly what it adds.
        assert_same_objects(
            render(helm_path, "eviction.enabled=true"), kustomize(kubectl_path, overlay(tmp_path, ["eviction"]))
        )


def test_everything_follows_the_release_namespace(helm_path: Path) -> None:
    docs = render(helm_path, "webhook.certManager.enabled=true", namespace="serving-ops", crds=False)
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            continue
        if doc["kind"] == "ClusterRoleBinding":
            assert doc["subjects"][0]["namespace"] == "serving-ops"
        else:
            assert doc["metadata"]["namespace"] == "serving-ops", doc["kind"]
    for hook in webhooks(docs):
        assert hook["clientConfig"]["service"]["namespace"] == "serving-ops"
    assert the(docs, "Certificate")["spec"]["dnsNames"][0] == "kthena-py-webhook-service.serving-ops.svc"
    annotation = the(docs, "ValidatingWebhookConfiguration")["metadata"]["annotations"][
        "cert-manager.io/inject-ca-from"
    ]
    assert annotation == "serving-ops/kthena-py-serving-cert"


def test_values_for_image_flags_resources_and_webhook_url(helm_path: Path) -> None:
    docs = render(
        helm_path,
        "image.repository=registry.example/kthena-py",
        "image.digest=sha256:" + "0" * 64,
        "replicaCount=0",
        "manager.workers=8",
        "manager.logFormat=console",
        "manager.extraArgs={--lease-duration=30}",
        "manager.controllers={*,-autoscaler}",
        "resources.limits.memory=2Gi",
        "webhook.url=https://127.0.0.1:9443",
        "webhook.namespaceSelector.matchLabels.team=serving",
        crds=False,
    )
    deployment = the(docs, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 0
    assert container["image"] == "registry.example/kthena-py@sha256:" + "0" * 64
    assert container["resources"]["limits"]["memory"] == "2Gi"
    args = manager_args(docs)
    assert {"--log-format=console", "--workers=8", "--lease-duration=30", "--webhook-host=127.0.0.1"} <= set(args)
    assert "--controllers=*,-autoscaler" in args
    assert not [a for a in manager_args(render(helm_path, crds=False)) if a.startswith("--controllers")]
    for hook in webhooks(docs):
        assert "service" not in hook["clientConfig"]
        assert re.fullmatch(
            r"https://127\.0\.0\.1:9443/(validate|mutate)-(workload-serving|serving-kthena-py-io)-.*",
            hook["clientConfig"]["url"],
        )
        assert hook["namespaceSelector"] == {"matchLabels": {"team": "serving"}}


def test_the_chart_crds_are_the_generated_ones() -> None:
    generated = [p for p in sorted((MANIFESTS / "crd").glob("*.yaml")) if p.name != "kustomization.yaml"]
    assert {p.name for p in generated} >= {
        "workload.serving.volcano.sh_modelservings.yaml",
        "serving.kthena-py.io_modelcaches.yaml",
    }
    for path in generated:
        assert (CHART / "crds" / path.name).read_text() == path.read_text(), path.name
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(p.name for p in generated)


def _leaves(values: Any, prefix: str = "") -> list[str]:
    if isinstance(values, dict) and values:
        return [leaf for key, value in values.items() for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def test_docs_describe_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = set(
        re.findall(r"^\| `([a-zA-Z0-9.]+)` \|", (ROOT / "docs" / "deploying.md").read_text(), re.MULTILINE)
    )
    opaque = ("resources", "nodeSelector", "activator.resources")  # documented as a whole
    leaves = {leaf for leaf in _leaves(values) if not leaf.startswith(tuple(f"{o}." for o in opaque))} | set(opaque)
    assert leaves - documented == set(), "values missing from docs/deploying.md (Helm chart values)"
    assert documented - leaves == set(), "docs/deploying.md documents values the chart does not have"


def test_modelbooster_downloader_image_values(helm_path: Path) -> None:
    def flag(*values: str) -> list[str]:
        args = manager_args(render(helm_path, *values, crds=False))
        return [a for a in args if a.startswith("--modelbooster-downloader-image")]

    assert flag() == []  # the manager's default: the ConfigMap, else Kthena's image (drop-in)
    assert flag("modelBooster.useProjectDownloader=true", "modelCache.downloaderImage.repository=reg.example/dl") == [
        "--modelbooster-downloader-image=reg.example/dl:latest"
    ]
    assert flag("modelBooster.useProjectDownloader=true", "modelBooster.downloaderImage=reg.example/own:1") == [
        "--modelbooster-downloader-image=reg.example/own:1"
    ]
    assert flag("modelBooster.downloaderImage=kthena/downloader:v1") == [
        "--modelbooster-downloader-image=kthena/downloader:v1"
    ]


def test_attestation_values_set_the_mode_and_mount_the_keys_secret(helm_path: Path) -> None:
    off = render(helm_path, crds=False)
    assert not [a for a in manager_args(off) if a.startswith("--model-attestation")]
    on = render(
        helm_path, "modelCache.attestation.mode=enforce", "modelCache.attestation.keysSecret=model-keys", crds=False
    )
    args = manager_args(on)
    assert "--model-attestation=enforce" in args
    assert "--model-attestation-keys=/etc/kthena-py/attestation-keys" in args
    pod = the(on, "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "attestation-keys")
    assert mount == {"name": "attestation-keys", "mountPath": "/etc/kthena-py/attestation-keys", "readOnly": True}
    volume = next(v for v in pod["volumes"] if v["name"] == "attestation-keys")
    assert volume["secret"] == {"secretName": "model-keys"}
    warn = render(helm_path, "modelCache.attestation.mode=warn", crds=False)
    assert "--model-attestation=warn" in manager_args(warn)
    assert not [a for a in manager_args(warn) if a.startswith("--model-attestation-keys")]
    rules = the(off, "ClusterRole", "kthena-py-controller-manager")["rules"]
    assert {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]} in rules


def test_enforce_without_a_keys_secret_is_refused(helm_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"needs modelCache\.attestation\.keysSecret"):
        render(helm_path, "modelCache.attestation.mode=enforce", crds=False)


def test_activator_is_off_by_default_and_installs_exactly_the_activator_component(
    helm_path: Path, kubectl_path: Path, tmp_path: Path
) -> None:
    assert not [d for d in render(helm_path, crds=False) if "activator" in d["metadata"]["name"]]
    expected = kustomize(kubectl_path, overlay(tmp_path, ["activator"]))
    assert_same_objects(render(helm_path, "activator.enabled=true"), expected)


def test_activator_values(helm_path: Path) -> None:
    docs = render(
        helm_path,
        "activator.enabled=true",
        "activator.image.repository=registry.example/activator",
        "activator.image.tag=v2",
        "activator.replicas=3",
        "activator.holdBudget=5m",
        "activator.maxHeld=50",
        "activator.port=9000",
        "activator.metricsPort=9001",
        "activator.healthPort=9002",
        "activator.service.port=8000",
        "activator.resources.limits.memory=1Gi",
        "activator.extraArgs={--max-body-bytes=1024}",
        "manager.watchNamespace=serving",
        crds=False,
    )
    deployment = the(docs, "Deployment", "kthena-py-activator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example/activator:v2"
    assert container["args"] == [
        "activator",
        "--listen=0.0.0.0:9000",
        "--metrics-bind-address=:9001",
        "--health-probe-bind-address=:9002",
        "--hold-budget=5m",
        "--log-format=json",
        "--max-held=50",
        "--namespace=serving",
        "--max-body-bytes=1024",
    ]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "http": 9000,
        "http-metrics": 9001,
        "health": 9002,
    }
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert the(docs, "Service", "kthena-py-activator")["spec"]["ports"][0]["port"] == 8000
    assert the(docs, "Service", "kthena-py-activator-metrics")["spec"]["ports"][0]["port"] == 9001
    without_metrics = render(helm_path, "activator.enabled=true", "metrics.service.enabled=false", crds=False)
    assert not [d for d in without_metrics if d["metadata"]["name"].endswith("-metrics")]
    same_image = render(helm_path, "activator.enabled=true", "image.tag=v9", crds=False)
    (plain,) = the(same_image, "Deployment", "kthena-py-activator")["spec"]["template"]["spec"]["containers"]
    assert plain["image"] == "kthena-py:v9"


def test_activator_monitor_scrapes_the_activator(helm_path: Path) -> None:
    docs = render(helm_path, "activator.enabled=true", "metrics.serviceMonitor.enabled=true", crds=False)
    monitor = the(docs, "ServiceMonitor")
    metrics = the(docs, "Service", "kthena-py-activator-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in metrics["spec"]["ports"]]


def test_reading_source_secrets_is_off_by_default_and_installs_exactly_the_source_secrets_component(
    helm_path: Path, kubectl_path: Path, tmp_path: Path
) -> None:
    default = render(helm_path, crds=False)
    assert not [
        rule
        for doc in default
        if doc["kind"] == "ClusterRole"
        for rule in doc["rules"]
        if "secrets" in rule["resources"]
    ]
    granted = render(helm_path, "modelCache.revalidation.readSourceSecrets=true")
    expected = kustomize(kubectl_path, overlay(tmp_path, ["source-secrets"]))
    assert_same_objects(granted, expected)
    role = the(granted, "ClusterRole", "kthena-py-source-secret-reader")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]  # no list, no watch
    binding = the(granted, "ClusterRoleBinding", "kthena-py-source-secret-reader")
    assert [s["name"] for s in binding["subjects"]] == ["kthena-py-controller-manager"]


def test_sharding_replaces_leader_election_and_installs_exactly_the_sharding_component(
    helm_path: Path, kubectl_path: Path, tmp_path: Path
) -> None:
    default = render(helm_path, crds=False)
    assert "--sharding" not in manager_args(default)
    assert not [d for d in default if d["metadata"]["name"] == "kthena-py-shards"]
    sharded = render(helm_path, "manager.sharding.enabled=true")
    assert_same_objects(sharded, kustomize(kubectl_path, overlay(tmp_path, ["sharding"])))
    args = manager_args(sharded)
    assert "--sharding" in args and "--leader-elect" not in args
    assert the(sharded, "Role", "kthena-py-shards")["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    assert the(sharded, "ClusterRole", "kthena-py-shards-namespaces")["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}
    ]
    assert "--no-shard-informers" not in args  # per-range informers: the manager's default
    named = manager_args(
        render(helm_path, "manager.sharding.enabled=true", "manager.sharding.leaseGroup=llm", crds=False)
    )
    assert named[1:3] == ["--sharding", "--lease-group=llm"]
    whole = manager_args(render(helm_path, "manager.sharding.enabled=true", "manager.sharding.shardInformers=false"))
    assert whole[1:3] == ["--sharding", "--no-shard-informers"]
