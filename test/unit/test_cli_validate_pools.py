"""``kthena-py validate`` applies the webhook's ModelPool rules across the documents it is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.main import main


def _pool(name: str, *members: str, namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"members": [{"modelServingRef": {"name": m}} for m in members]},
    }


def _policy(name: str, target: str, namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "metrics": [{"name": "kv", "targetValue": "1"}],
            "homogeneousTarget": {
                "target": {"targetRef": {"kind": "ModelServing", "name": target}},
                "minReplicas": 1,
                "maxReplicas": 2,
            },
        },
    }


def _write(path: Path, *documents: Any) -> str:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return str(path)


def test_a_shared_member_and_an_autoscaled_member_are_reported_on_each_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents = [_pool("gpu0", "a", "b"), _pool("gpu1", "b"), _policy("scale-a", "a"), _policy("elsewhere", "a", "x")]
    assert main(["validate", "-q", "-f", _write(tmp_path / "in.yaml", *documents)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": Forbidden: ")[0] for line in lines] == [
        "ModelPool/gpu0: spec.members[0].modelServingRef.name",
        "ModelPool/gpu0: spec.members[1].modelServingRef.name",
        "ModelPool/gpu1: spec.members[0].modelServingRef.name",
        "AutoscalingPolicy/scale-a: spec.homogeneousTarget.target.targetRef.name",
    ]
    assert 'AutoscalingPolicy "scale-a"' in lines[0] and 'ModelPool "gpu1"' in lines[1]
    assert 'ModelPool "gpu0"' in lines[2] and 'ModelPool "gpu0"' in lines[3]


def test_stored_objects_count_as_the_cluster_and_an_update_is_checked_for_what_it_adds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = _write(tmp_path / "old.yaml", _pool("gpu0", "a"), _policy("scale-b", "b"))
    unrelated = _write(tmp_path / "resize.yaml", _pool("gpu0", "a"))
    assert main(["validate", "-q", "-f", unrelated, "--old", stored]) == 0
    grown = _write(tmp_path / "grow.yaml", _pool("gpu0", "a", "b"))
    assert main(["validate", "-q", "-f", grown, "--old", stored]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith('ModelPool/gpu0: spec.members[1].modelServingRef.name: Forbidden: ModelServing "b"')
    retargeted = _write(tmp_path / "retarget.yaml", _policy("scale-b", "c"), _pool("gpu1", "b"))
    assert main(["validate", "-q", "-f", retargeted, "--old", stored]) == 0
