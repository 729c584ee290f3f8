"""Which PodSpec lists the Pod API keeps unique, established against a real kube-apiserver.

For every entry of :data:`kthena_py.api.crdgen.podlists.POD_LISTS` (every non-atomic list of the vendored
PodSpec schema) a Pod is created with a server-side dry run (``kubectl create --dry-run=server``), once with
one item and once with two items that share the list's key and differ otherwise. The entry's ``enforced``
must say whether the server refused the two, and its ``pod_api`` text what happened:

* ``refused: ...``: one item is accepted, two are refused with an error at the second item;
* ``accepted ...``: both are accepted (``with a warning``: the server warned about the two);
* ``refused as a whole ...`` / ``dropped ...``: even one item is refused, or dropped (a feature gate), so
  uniqueness cannot be shown and the CRD keeps the list atomic.

Ephemeral containers cannot be set when a Pod is created; their entries must equal the regular containers'
(checked in ``test/unit/api/test_pod_lists.py``), so they are not created here.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.crdgen.podlists import POD_LISTS, PodList
from kthena_py.testing.controlplane import find_kubectl

pytestmark = pytest.mark.envtest

Spec = dict[str, Any]
Builder = Callable[[Spec, int], None]
"""Put ``n`` (1 or 2) items sharing the list's key into a pod spec (with one container ``c``)."""


def _volumes(spec: Spec, n: int, source: Callable[[int], dict[str, Any]]) -> None:
    spec["volumes"] = [{"name": f"v{i}", **source(i)} for i in range(n)]


def _env(container: Spec, spec: Spec, n: int) -> None:
    container["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}][:n]


def _ports(container: Spec, spec: Spec, n: int) -> None:
    container["ports"] = [
        {"containerPort": 8080, "protocol": "TCP", "name": "a"},
        {"containerPort": 8080, "protocol": "TCP", "name": "b"},
    ][:n]


def _claims(container: Spec, spec: Spec, n: int) -> None:
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    container["resources"] = {"claims": [{"name": "gpu", "request": "a"}, {"name": "gpu", "request": "b"}][:n]}


def _exit_codes(container: Spec, spec: Spec, n: int) -> None:
    container["restartPolicy"] = "Never"
    container["restartPolicyRules"] = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42, 42][:n]}}]


def _volume_devices(container: Spec, spec: Spec, n: int) -> None:
    _volumes(spec, n, lambda i: {"persistentVolumeClaim": {"claimName": f"pvc{i}"}})
    container["volumeDevices"] = [{"name": f"v{i}", "devicePath": "/dev/block"} for i in range(n)]


def _volume_mounts(container: Spec, spec: Spec, n: int) -> None:
    _volumes(spec, n, lambda i: {"emptyDir": {}})
    container["volumeMounts"] = [{"name": f"v{i}", "mountPath": "/data"} for i in range(n)]


_CONTAINER_BUILDERS: dict[str, Callable[[Spec, Spec, int], None]] = {
    "env": _env,
    "ports": _ports,
    "resources.claims": _claims,
    "restartPolicyRules[].exitCodes.values": _exit_codes,
    "volumeDevices": _volume_devices,
    "volumeMounts": _volume_mounts,
}


def _in_container(kind: str, build: Callable[[Spec, Spec, int], None]) -> Builder:
    def builder(spec: Spec, n: int) -> None:
        if kind == "containers":
            container = spec["containers"][0]
        else:
            container = {"name": "init", "image": "busybox"}
            spec[kind] = [container]
        build(container, spec, n)

    return builder


def _containers(spec: Spec, n: int) -> None:
    spec["containers"] = [{"name": "c", "image": "busybox"}, {"name": "c", "image": "nginx"}][:n]


def _init_containers(spec: Spec, n: int) -> None:
    spec["initContainers"] = [{"name": "i", "image": "busybox"}, {"name": "i", "image": "nginx"}][:n]


def _host_aliases(spec: Spec, n: int) -> None:
    spec["hostAliases"] = [
        {"ip": "10.1.2.3", "hostnames": ["test.com", "example.com"]},
        {"ip": "10.1.2.3", "hostnames": ["test.org"]},
    ][:n]


def _pull_secrets(spec: Spec, n: int) -> None:
    spec["imagePullSecrets"] = [{"name": "registry"}, {"name": "registry"}][:n]


def _resource_claims(spec: Spec, n: int) -> None:
    spec["resourceClaims"] = [
        {"name": "gpu", "resourceClaimName": "claim-a"},
        {"name": "gpu", "resourceClaimTemplateName": "template-b"},
    ][:n]


def _pod_claims(spec: Spec, n: int) -> None:
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    spec["resources"] = {"claims": [{"name": "gpu", "request": "a"}, {"name": "gpu", "request": "b"}][:n]}


def _scheduling_gates(spec: Spec, n: int) -> None:
    spec["schedulingGates"] = [{"name": "example.com/gate"}, {"name": "example.com/gate"}][:n]


def _spread(spec: Spec, n: int) -> None:
    spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1 + i,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": f"a{i}"}},
        }
        for i in range(n)
    ]


def _same_volume_name(spec: Spec, n: int) -> None:
    spec["volumes"] = [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {"medium": "Memory"}}][:n]


def _template_metadata(field: str, items: list[Any]) -> Builder:
    def builder(spec: Spec, n: int) -> None:
        template = {
            "metadata": {field: items[:n]},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        spec["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]

    return builder


_OWNERS = [
    {"apiVersion": "v1", "kind": "ConfigMap", "name": f"owner-{i}", "uid": "3d5b1d2e-0000-4000-8000-000000000001"}
    for i in range(2)
]

BUILDERS: dict[str, Builder] = {
    "containers": _containers,
    "initContainers": _init_containers,
    **{
        f"{kind}[].{path}": _in_container(kind, build)
        for kind in ("containers", "initContainers")
        for path, build in _CONTAINER_BUILDERS.items()
    },
    "hostAliases": _host_aliases,
    "imagePullSecrets": _pull_secrets,
    "resourceClaims": _resource_claims,
    "resources.claims": _pod_claims,
    "schedulingGates": _scheduling_gates,
    "topologySpreadConstraints": _spread,
    "volumes": _same_volume_name,
    "volumes[].ephemeral.volumeClaimTemplate.metadata.finalizers": _template_metadata(
        "finalizers", ["example.com/keep", "example.com/keep"]
    ),
    "volumes[].ephemeral.volumeClaimTemplate.metadata.ownerReferences": _template_metadata("ownerReferences", _OWNERS),
}

CASES = [item for item in POD_LISTS if not item.path.startswith("ephemeralContainers")]


def _pod(item: PodList, n: int) -> dict[str, Any]:
    spec: Spec = {"containers": [{"name": "c", "image": "busybox"}]}
    BUILDERS[item.path](spec, n)
    name = re.sub(r"[^a-z0-9]+", "-", item.path.lower()).strip("-")[:50]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


_CREATE = ("create", "--dry-run=server", "-o", "json", "-f", "-")


def _dry_run(kubeconfig: Path, namespace: str, pod: dict[str, Any]) -> tuple[int, Any, str]:
    done = subprocess.run(
        [str(find_kubectl()), "--kubeconfig", str(kubeconfig), "-n", namespace, *_CREATE],
        input=json.dumps(pod),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None, done.stderr


def _get(value: Any, path: str) -> Any:
    """The values at a PodSpec path (``[]`` steps into every item), flattened."""
    values = [value]
    for step in path.replace("[]", ".[]").split("."):
        nxt: list[Any] = []
        for current in values:
            if step == "[]":
                nxt.extend(current if isinstance(current, list) else [])
            elif isinstance(current, dict) and step in current:
                nxt.append(current[step])
        values = nxt
    return values


def _duplicate_error(path: str) -> re.Pattern[str]:
    """An error at an item of the list (any index for the enclosing lists) saying it repeats another."""
    pattern = re.escape(f"spec.{path}").replace(r"\[\]", r"\[\d+\]")
    return re.compile(pattern + r"\[\d+\][^:]*: (Duplicate value|Invalid value: .*must be unique)")


@pytest.mark.parametrize("item", CASES, ids=[item.path for item in CASES])
def test_pod_api_enforces_exactly_the_recorded_uniqueness(item: PodList, kubeconfig: Path, namespace: str) -> None:
    code, single, err = _dry_run(kubeconfig, namespace, _pod(item, 1))
    if code != 0:
        assert not item.enforced, f"{item.path}: one item is refused, so uniqueness is not shown: {err}"
        assert item.pod_api.startswith("refused as a whole"), f"{item.path}: one item is refused: {err}"
        return
    if [len(found) for found in _get(single["spec"], item.path)] != [1]:
        assert not item.enforced and item.pod_api.startswith("dropped"), f"{item.path}: the server dropped it"
        return
    code, double, err = _dry_run(kubeconfig, namespace, _pod(item, 2))
    if item.enforced:
        assert code != 0, f"{item.path}: the Pod API accepted two items sharing {item.keys or 'a value'}"
        assert _duplicate_error(item.path).search(err), f"{item.path}: refused for another reason: {err}"
        assert item.pod_api.startswith("refused:")
    else:
        assert code == 0, f"{item.path}: the Pod API refused two items sharing {item.keys or 'a value'}: {err}"
        assert [len(found) for found in _get(double["spec"], item.path)] == [2], f"{item.path}: not both items kept"
        assert item.pod_api.startswith("accepted")
        warned = "Warning:" in err
        assert warned == ("with a warning" in item.pod_api), f"{item.path}: warnings were {err!r}"


def test_container_claims_are_unique_by_name_and_request(kubeconfig: Path, namespace: str) -> None:
    """Why ``resources.claims`` is atomic: two claims of one name are fine, unless their requests agree too."""
    item = next(item for item in POD_LISTS if item.path == "containers[].resources.claims")
    pod = _pod(item, 2)
    claims = pod["spec"]["containers"][0]["resources"]["claims"]
    assert claims[0]["name"] == claims[1]["name"] and claims[0]["request"] != claims[1]["request"]
    assert _dry_run(kubeconfig, namespace, pod)[0] == 0
    claims[1]["request"] = claims[0]["request"]
    code, _, err = _dry_run(kubeconfig, namespace, pod)
    assert code != 0 and _duplicate_error("containers[].resources.claims").search(err), err
