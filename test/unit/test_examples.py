"""The examples work with the sample: every AutoscalingPolicy targets a ModelServing that exists.

A policy's targets are defined in its own file or in examples/modelserving-pd.yaml (the sample
``hack/local-up.sh`` applies), in the same namespace; every file is valid offline (``kthena-py validate``).
The API server's view of the same files is checked in test/envtest/test_render_agreement.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SAMPLE = EXAMPLES / "modelserving-pd.yaml"
FILES = sorted(EXAMPLES.rglob("*.yaml"))


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _servings(path: Path) -> set[tuple[str, str]]:
    return {
        (d["metadata"].get("namespace", "default"), d["metadata"]["name"])
        for d in _documents(path)
        if d.get("kind") == "ModelServing"
    }


def _targets(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    refs = []
    if "homogeneousTarget" in spec:
        refs.append(spec["homogeneousTarget"]["target"]["targetRef"])
    if "disaggregatedTarget" in spec:
        refs.append(spec["disaggregatedTarget"]["targetRef"])
    for param in (spec.get("heterogeneousTarget") or {}).get("params") or []:
        refs.append(param["target"]["targetRef"])
    return [ref["name"] for ref in refs]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_policy_targets_a_modelserving_of_its_file_or_of_the_sample(path: Path) -> None:
    known = _servings(path) | _servings(SAMPLE)
    for policy in (d for d in _documents(path) if d.get("kind") == "AutoscalingPolicy"):
        namespace = policy["metadata"].get("namespace", "default")
        for name in _targets(policy):
            assert (namespace, name) in known, f"{path.name}: {policy['metadata']['name']} targets {name}"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_example_is_valid(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-q", "-f", str(path)]) == 0, capsys.readouterr().out
