"""The Makefile's kubebuilder-style targets call the documented scripts and commands (``make -n``, nothing runs)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="GNU make is not installed")

EXPECTED = {
    "run": ["hack/local-up.sh"],
    "test": ["hack/test.sh"],
    "install": ["/kubectl apply --server-side -f manifests/crd/"],
    "deploy": ["/kubectl apply --server-side -k manifests/default"],
    "docker-build": ["docker build -t registry.example/kthena-py:0.2.0 -f Containerfile ."],
    "helm": [
        "/helm lint --strict charts/kthena-py",
        "/helm template kthena-py charts/kthena-py --namespace kthena-system "
        "--set image.repository=registry.example/kthena-py,image.tag=0.2.0",
    ],
    "helm-deploy": ["/helm upgrade --install kthena-py charts/kthena-py --namespace kthena-system --create-namespace"],
    "manifests": ["hack/gen-crds.sh"],
}


def _dry_run(target: str, kubectl_path: Path, helm_path: Path) -> str:
    assert MAKE is not None
    result = subprocess.run(
        [
            MAKE,
            "-n",
            target,
            "IMG=registry.example/kthena-py:0.2.0",
            "CONTAINER_TOOL=docker",
            f"KUBECTL={kubectl_path}",
            f"HELM={helm_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_target_calls_the_documented_command(target: str, kubectl_path: Path, helm_path: Path) -> None:
    out = " ".join(_dry_run(target, kubectl_path, helm_path).split())
    for command in EXPECTED[target]:
        assert command in out, out


def test_help_lists_every_target() -> None:
    assert MAKE is not None
    out = subprocess.run([MAKE, "help"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert set(EXPECTED) <= listed
