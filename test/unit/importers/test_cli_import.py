"""``kthena-py import``: stdout holds only objects, stderr the report or one error, and the exit status says which."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from kthena_py.main import main

from .golden import GOLDEN

MODELS = GOLDEN / "kubeai-models.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_yaml_objects_on_stdout_and_the_report_table_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "kubeai", "-f", str(MODELS))
    assert code == 0
    assert out == (GOLDEN / "kubeai-models.out.yaml").read_text()
    assert [doc["kind"] for doc in yaml.safe_load_all(out)][:3] == ["ModelServing", "ModelCache", "AutoscalingPolicy"]
    assert "document 0: Model/team-a/llama-3-8b" in err
    assert "spec.features" in err and "dropped" in err


def test_json_output_is_one_list_and_the_report_file_is_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    code, out, err = _run(capsys, "kubeai", "-f", str(MODELS), "-o", "json", "--report", str(report))
    assert code == 0
    listing = json.loads(out)
    assert listing["kind"] == "List" and listing["items"][0]["kind"] == "ModelServing"
    lines = json.loads(report.read_text())
    assert {"document", "source", "path", "outcome", "target", "note"} == set(lines[0])
    assert f"written to {report}" in err
    assert "spec.features" not in err


def test_stdin_and_namespace(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(MODELS.read_text()))
    code, out, _ = _run(capsys, "kubeai", "-f", "-", "--namespace", "moved")
    assert code == 0
    assert {doc["metadata"]["namespace"] for doc in yaml.safe_load_all(out)} == {"moved"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("apiVersion: kubeai.org/v9\nkind: Model\nmetadata: {name: m}\n", "document 0 (Model/default/m), apiVersion"),
        ("a: [unclosed\n", "invalid YAML"),
        (
            "apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: m}\nspec: {url: hf://a/b, engine: VLLM, "
            "replicas: two}\n",
            "document 0 (Model/default/m), spec.replicas: expected an integer, got a string",
        ),
    ],
)
def test_bad_input_exits_2_with_nothing_on_stdout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    code, out, err = _run(capsys, "kubeai", "-f", str(path))
    assert code == 2
    assert out == ""
    assert words in err
    assert len(err.strip().splitlines()) == 1


def test_unreadable_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(capsys, "kubeai", "-f", str(tmp_path / "missing.yaml"))
    assert (code, out) == (2, "")
    assert "missing.yaml" in err


def test_strict_exits_3_with_the_report_and_nothing_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "kubeai", "-f", str(MODELS), "--strict")
    assert (code, out) == (3, "")
    assert "--strict:" in err and "spec.features" in err and "spec.owner" in err
    assert "document 0: Model/team-a/llama-3-8b" in err


def test_kubeai_config_supplies_the_profiles(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "resourceProfiles:\n  tiny:\n    imageName: cpu\n    requests: {cpu: 250m}\n    nodeSelector: {pool: small}\n"
    )
    model = tmp_path / "m.yaml"
    model.write_text(
        "apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: m}\n"
        "spec: {url: hf://a/b, engine: VLLM, resourceProfile: 'tiny:2'}\n"
    )
    code, out, _ = _run(capsys, "kubeai", "-f", str(model), "--kubeai-config", str(config))
    assert code == 0
    pod = next(yaml.safe_load_all(out))["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}
    assert pod["containers"][0]["image"] == "substratusai/vllm:v0.6.3.post1-cpu"
    assert pod["nodeSelector"] == {"pool": "small"}
    code, out, err = _run(capsys, "kubeai", "-f", str(MODELS), "--kubeai-config", str(config))
    assert (code, out) == (2, "")
    assert "unknown profile 'nvidia-gpu-l4' in --kubeai-config" in err


def test_bad_kubeai_config_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("resourceProfiles: {x: {tolerations: 3}}\n")
    code, out, err = _run(capsys, "kubeai", "-f", str(MODELS), "--kubeai-config", str(config))
    assert (code, out) == (2, "")
    assert "resourceProfiles.x.tolerations" in err


def test_kubeai_config_supplies_the_engine_images(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "modelServers:\n  VLLM:\n    images: {default: mirror/vllm:1, gpu-x: mirror/vllm:1-gpu}\n"
        "resourceProfiles:\n  x: {imageName: gpu-x}\n  y: {imageName: other}\n"
    )
    model = tmp_path / "m.yaml"
    model.write_text(
        "apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: a}\nspec: {url: hf://a/b, engine: VLLM, "
        "resourceProfile: 'x:1'}\n---\napiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: b}\n"
        "spec: {url: hf://a/b, engine: VLLM, resourceProfile: 'y:1'}\n---\napiVersion: kubeai.org/v1\nkind: Model\n"
        "metadata: {name: c}\nspec: {url: 'ollama://m', engine: OLlama, resourceProfile: 'x:1'}\n"
    )
    code, out, _ = _run(capsys, "kubeai", "-f", str(model), "--kubeai-config", str(config))
    assert code == 0
    images = {
        doc["metadata"]["name"]: doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"]
        for doc in yaml.safe_load_all(out)
        if doc["kind"] == "ModelServing"
    }
    assert images == {"a": "mirror/vllm:1-gpu", "b": "mirror/vllm:1", "c": "ollama/ollama:latest"}
