"""``kthena-py optimize``: the controller's split of a total, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kthena_py.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscaling" / "heterogeneous.yaml"


def write(
    tmp_path: Path, params: list[dict[str, object]], rate: int | None = None, namespace: str | None = None
) -> Path:
    target: dict[str, object] = {"params": params}
    if rate is not None:
        target["costExpansionRatePercent"] = rate
    metadata: dict[str, object] = {"name": "p"}
    if namespace:
        metadata["namespace"] = namespace
    doc = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": metadata,
        "spec": {"metrics": [{"name": "m", "targetValue": "1"}], "heterogeneousTarget": target},
    }
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "ConfigMap"}, doc]))
    return path


def param(name: str, cost: int, low: int, high: int, namespace: str | None = None) -> dict[str, object]:
    ref: dict[str, object] = {"kind": "ModelServing", "name": name}
    if namespace:
        ref["namespace"] = namespace
    return {"cost": cost, "minReplicas": low, "maxReplicas": high, "target": {"targetRef": ref}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_kthena_vectors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [param("h100", 10, 1, 4), param("a100", 5, 1, 3)], rate=100, namespace="ns")
    code, out, _ = run(capsys, "optimize", "-f", str(path), "--total", "5")
    assert code == 0
    assert list(json.loads(out).items()) == [("ns/h100", 2), ("ns/a100", 3)]  # params order
    code, out, _ = run(capsys, "optimize", "-f", str(path), "--total", "0")
    assert json.loads(out) == {"ns/h100": 1, "ns/a100": 1}
    path = write(tmp_path, [param("llama", 100, 1, 3, "team-a"), param("llama", 60, 2, 5, "team-b")], rate=100)
    code, out, _ = run(capsys, "optimize", "-f", str(path), "--total", "8")
    assert json.loads(out) == {"team-a/llama": 3, "team-b/llama": 5}


def test_namespace_defaults_and_budget_promise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # autoscaler.md §7.1: Kthena's P=200 split costs 3.08x the optimum; the controller keeps <= 2x.
    path = write(tmp_path, [param("a", 100, 0, 63), param("b", 1599, 0, 5)])
    _, kthena, _ = run(capsys, "optimize", "-f", str(path), "--total", "36", "--algorithm", "kthena")
    assert json.loads(kthena) == {"default/a": 31, "default/b": 5}
    _, ours, _ = run(capsys, "optimize", "-f", str(path), "--total", "36")
    split = json.loads(ours)
    assert sum(split.values()) == 36
    assert split["default/a"] * 100 + split["default/b"] * 1599 <= 2 * 3600
    _, milp, _ = run(capsys, "optimize", "-f", str(path), "--total", "36", "--algorithm", "milp")
    assert json.loads(milp) == split


def test_example_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "optimize", "-f", str(EXAMPLE), "--total", "6")
    assert code == 0
    assert json.loads(out) == {"default/llama-h100": 2, "default/llama-a100": 4}


def test_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "optimize", "-f", str(tmp_path / "missing.yaml"), "--total", "3")
    assert code == 1 and err.startswith("kthena-py: error: cannot read")
    other = tmp_path / "other.yaml"
    other.write_text("kind: ConfigMap\n")
    code, _, err = run(capsys, "optimize", "-f", str(other), "--total", "3")
    assert code == 1 and "no AutoscalingPolicy" in err
    homogeneous = tmp_path / "homogeneous.yaml"
    homogeneous.write_text(
        yaml.safe_dump(
            {
                "kind": "AutoscalingPolicy",
                "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                "metadata": {"name": "h"},
                "spec": {"homogeneousTarget": {"minReplicas": 1, "maxReplicas": 2}},
            }
        )
    )
    code, _, err = run(capsys, "optimize", "-f", str(homogeneous), "--total", "3")
    assert code == 1 and "no heterogeneousTarget" in err
    with pytest.raises(SystemExit) as exc:
        main(["optimize", "-f", str(homogeneous), "--total", "-1"])
    assert exc.value.code == 2
