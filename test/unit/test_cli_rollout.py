"""``kthena-py rollout plan`` end to end through the command line, and the offline parts of the other commands."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.api.modelserving import ModelServing
from kthena_py.cli.rollout import history_table
from kthena_py.main import main
from kthena_py.plan.modelserving.core.revision import build_controller_revision, revision_data, revision_hash
from kthena_py.plan.modelserving.core.types import MSRef
from kthena_py.plan.modelserving.rollout.history import history


def _ms(image: str = "engine:1", replicas: int = 4, **config: Any) -> dict[str, Any]:
    container = {"name": "engine", "image": image}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "llama", "namespace": "team"},
        "spec": {
            "replicas": replicas,
            "rolloutStrategy": {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config},
            "template": {
                "roles": [
                    {
                        "name": "decode",
                        "replicas": 1,
                        "workerReplicas": 1,
                        "entryTemplate": {"spec": {"containers": [container]}},
                        "workerTemplate": {"spec": {"containers": [container]}},
                    }
                ]
            },
        },
    }


def _files(tmp_path: Path, old: dict[str, Any], new: dict[str, Any]) -> tuple[str, str]:
    a, b = tmp_path / "old.yaml", tmp_path / "new.yaml"
    a.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "ConfigMap"}, old]))
    b.write_text(yaml.safe_dump(new))
    return str(a), str(b)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_partition_canary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _files(tmp_path, _ms(partition=3), _ms("engine:2", partition=3))
    code, out, _ = run(capsys, "rollout", "plan", "-f", old, "--to", new)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "ModelServing team/llama: 4 ServingGroups, ServingGroupRollingUpdate"
    assert lines[1] == "  maxUnavailable 1, maxSurge 0, partition 3 of 4"
    assert "  decode: image engine:1 -> engine:2" in lines
    step1 = lines[lines.index("step 1:") : lines.index("step 2:")]
    assert "  take down  llama-3" in step1
    assert "  create     llama-3 (new)" in step1
    assert "  keep       llama-0, llama-1, llama-2 (partition)" in step1
    assert "  then ready llama-3" in step1
    assert any("UpdateInProgress=False PartitionReached" in line for line in lines)
    assert lines[-1].startswith("result: partition reached after 2 steps: llama-0, llama-1, llama-2 stay")
    assert lines[-1].endswith("ready ServingGroups never below 3/4")


def test_plan_surge_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {"maxUnavailable": 0, "maxSurge": 2}
    old, new = _files(tmp_path, _ms(**config), _ms("engine:2", **config))
    code, out, _ = run(capsys, "rollout", "plan", "-f", old, "--to", new, "-o", "json")
    assert code == 0
    report = json.loads(out)
    assert report["outcome"] == "complete" and report["min_available"] == 4
    assert [u["unit"] for s in report["steps"] for u in s["surge"]] == ["llama-4", "llama-5"]
    assert [s["take_down"] for s in report["steps"] if s["take_down"]] == [
        ["llama-3", "llama-2"],
        ["llama-1", "llama-0"],
    ]
    assert sorted(u for s in report["steps"] for u in s["removed"]) == ["llama-4", "llama-5"]
    assert report["changes"] == ["decode: image engine:1 -> engine:2"]


def test_plan_stall_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _files(tmp_path, _ms(maxUnavailable=2), _ms("engine:2", maxUnavailable=2))
    code, out, _ = run(capsys, "rollout", "plan", "-f", old, "--to", new, "--replicas-ready", "none")
    assert code == 3
    assert "UpdateInProgress=True UpdateStalled" in out
    assert out.splitlines()[-1].startswith("result: stalled at step 2: Update to revision")
    code, out, _ = run(capsys, "rollout", "plan", "-f", old, "--to", new, "--never-ready", "llama-3,llama-2")
    assert code == 3 and "llama-3 (pod llama-3-decode-0-0 ImagePullBackOff)" in out


def test_plan_one_ready_per_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _files(tmp_path, _ms(maxUnavailable=2), _ms("engine:2", maxUnavailable=2))
    code, out, _ = run(capsys, "rollout", "plan", "-f", old, "--to", new, "--replicas-ready", "1", "-o", "json")
    assert code == 0
    assert [s["became_ready"] for s in json.loads(out)["steps"]][:3] == [["llama-2"], ["llama-1"], ["llama-0"]]


def test_plan_rejects_what_admission_would(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _files(tmp_path, _ms(), _ms("engine:2", maxUnavailable=0, maxSurge=0))
    code, _, err = run(capsys, "rollout", "plan", "-f", old, "--to", new)
    assert code == 1 and err.startswith("kthena-py: error: ") and "rollingUpdateConfiguration" in err
    other = copy.deepcopy(_ms("engine:2"))
    other["metadata"]["name"] = "mistral"
    old, new = _files(tmp_path, _ms(), other)
    code, _, err = run(capsys, "rollout", "plan", "-f", old, "--to", new)
    assert code == 1 and "name different ModelServings (llama, mistral)" in err
    code, _, err = run(capsys, "rollout", "plan", "-f", str(tmp_path / "missing.yaml"), "--to", new)
    assert code == 1 and "cannot read" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["rollout", "plan", "-f", "a", "--to", "b", "--replicas-ready", "some"],
        ["rollout", "plan", "-f", "a", "--to", "b", "--replicas-ready", "0"],
        ["rollout", "status", "x", "--watch=maybe"],
        ["rollout", "status", "x", "--timeout", "5 minutes"],
        ["rollout", "undo", "x", "--to-revision", "0"],
        ["rollout", "history"],
    ],
)
def test_bad_flags_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    capsys.readouterr()


def test_online_commands_without_a_kubeconfig_fail_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "rollout", "status", "x", "--kubeconfig", str(tmp_path / "none"))
    assert code == 1 and err.startswith("kthena-py: error: cannot load kubeconfig") and err.count("\n") == 1


def test_history_table() -> None:
    ref = MSRef("llama", "team", "u")
    revisions: list[dict[str, Any]] = []
    for image in ("engine:1", "engine:2"):
        data = revision_data(ModelServing.model_validate(_ms(image)).spec)
        revisions.append(build_controller_revision(ref, data, revision_hash(data), revisions))
    ms = ModelServing.model_validate(_ms("engine:2") | {"metadata": {"name": "llama", "uid": "u"}})
    table = history_table(history(ms, revisions)).splitlines()
    assert table[0].split() == ["REVISION", "HASH", "STATUS", "PODS", "IMAGES", "CHANGE"]
    assert table[1].split()[0] == "1" and table[1].endswith("decode=engine:1  -")
    assert table[2].split()[0] == "2" and table[2].endswith("decode: image engine:1 -> engine:2")
