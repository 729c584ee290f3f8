"""``kthena-py import`` output on a real API server: it passes ``kthena-py validate`` and ``kubectl apply``.

For both peers, every golden input of the unit tests (written from the seeds' fields, each field at least once) is
translated by the real command line into a fresh namespace, validated offline by ``kthena-py validate``, applied
with ``kubectl apply`` (the project's CRDs, ModelPool's included, are installed by the envtest fixture), and read
back: every object exists with the origin labels and annotation naming the peer object.

ModelPool objects are applied only when the ModelPool CRD is part of this build (``manifests/crd``); without it
(the API is built on another branch) they are checked offline only, and :data:`NOT_APPLIED` says so by name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.testing.controlplane import EnvTest
from kthena_py.vocab.labels import IMPORTED_FROM, IMPORTED_KIND, IMPORTED_NAME, IMPORTED_PEER

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "test" / "unit" / "importers"
INPUTS = {
    "kubeai": [UNIT / "golden" / "kubeai-models.yaml"],
    "llmkube": sorted((UNIT / "llmkube" / "manifests").glob("*.yaml")),
}
MODELPOOL_CRD = ROOT / "manifests" / "crd" / "serving.kthena-py.io_modelpools.yaml"
NOT_APPLIED: frozenset[str] = frozenset() if MODELPOOL_CRD.exists() else frozenset({"ModelPool"})
"""Kinds whose CRD this build lacks: validated by ``kthena-py validate`` only (it skips kinds it does not know)."""
CASES = [(peer, path) for peer, paths in INPUTS.items() for path in paths]


def test_every_peer_has_inputs() -> None:
    assert all(INPUTS.values()), {peer: len(paths) for peer, paths in INPUTS.items()}


def _path_of(obj: dict[str, Any]) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {
        "ModelServing": "modelservings",
        "AutoscalingPolicy": "autoscalingpolicies",
        "ModelCache": "modelcaches",
        "ModelPool": "modelpools",
        "Service": "services",
    }[kind]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}/{obj['metadata']['name']}"


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kthena_py", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(("peer", "source"), CASES, ids=[f"{peer}-{path.stem}" for peer, path in CASES])
def test_imported_objects_validate_and_apply(
    envtest: EnvTest, kubeconfig: Path, kubectl_path: Path, namespace: str, peer: str, source: Path
) -> None:
    translated = _cli("import", peer, "-f", str(source), "--namespace", namespace)
    assert translated.returncode == 0, translated.stderr
    objects = [obj for obj in yaml.safe_load_all(translated.stdout) if obj]
    assert objects

    validated = _cli("validate", "-q", "-f", "-", stdin=translated.stdout)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    objects = [obj for obj in objects if obj["kind"] not in NOT_APPLIED]
    applied = subprocess.run(
        [str(kubectl_path), "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
        input=yaml.safe_dump_all(objects, sort_keys=False),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert applied.returncode == 0, applied.stderr
    for obj in objects:
        status, stored = envtest.client.raw("GET", _path_of(obj))
        assert status == 200, (obj["kind"], obj["metadata"]["name"], stored)
        labels, annotations = stored["metadata"]["labels"], stored["metadata"]["annotations"]
        assert labels[IMPORTED_PEER] == peer
        assert labels[IMPORTED_KIND] and labels[IMPORTED_NAME]
        assert annotations[IMPORTED_FROM].split(" ")[1] == labels[IMPORTED_KIND]
        assert stored["spec"] == _with_server_defaults(obj["spec"], stored["spec"])


def _with_server_defaults(sent: Any, stored: Any) -> Any:
    """``sent`` with the fields only ``stored`` has (defaults the API server added) copied in."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        merged = {key: _with_server_defaults(value, stored.get(key)) for key, value in sent.items()}
        merged.update({key: value for key, value in stored.items() if key not in sent})
        return merged
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        return [_with_server_defaults(a, b) for a, b in zip(sent, stored, strict=True)]
    return sent
