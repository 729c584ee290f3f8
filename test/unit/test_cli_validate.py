"""``kthena-py validate`` (offline validation) and ``kthena-py crds`` (generation), through ``main``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.api.validation import validate_document
from kthena_py.main import main

BASES = Path(__file__).resolve().parent / "api" / "corpus" / "bases"


def _base(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((BASES / f"{name}.yaml").read_text())
    return document


def _write(tmp_path: Path, *documents: Any, name: str = "in.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def test_valid_documents_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents = [_base(path.stem) for path in sorted(BASES.glob("*.yaml"))]
    assert main(["validate", "-f", str(_write(tmp_path, *documents))]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("Warning: ModelBooster/") == 2  # the two boosters are deprecated, not invalid


def test_each_problem_is_one_line_naming_kind_name_and_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    serving = _base("modelserving-pd")
    serving["spec"]["replicas"] = -1
    serving["spec"]["template"]["roles"][1]["name"] = "prefill"
    policy = _base("autoscalingpolicy-homogeneous")
    policy["spec"]["tolerancePercent"] = 101
    good = _base("modelserving-role-rolling")
    path = _write(tmp_path, serving, good, policy)
    assert main(["validate", "-q", "-f", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        'ModelServing/llama-pd: spec.template.roles[1].name: Duplicate value: "prefill"',
        "ModelServing/llama-pd: spec.replicas: Invalid value: -1: replicas must be a non-negative integer",
        'ModelServing/llama-pd: spec.template.gangPolicy.minRoleReplicas[decode]: Invalid value: "decode": '
        "role decode does not exist in template.roles",
        "AutoscalingPolicy/podinfo-rps: spec.tolerancePercent: Invalid value: 101: "
        "spec.tolerancePercent in body should be less than or equal to 100",
    ]


def test_shares_the_validators_with_the_webhook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    booster = _base("modelbooster-pd")
    booster["spec"]["backend"]["workers"][1]["config"]["port"] = 9001
    assert main(["validate", "-q", "-f", str(_write(tmp_path, booster))]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"ModelBooster/deepseek: {error}" for error in validate_document(booster)]


def test_stdin_lists_json_and_skipped_kinds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    serving = _base("modelserving-pd")
    serving["spec"]["template"]["roles"][0]["workerReplicas"] = -1
    bundle = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}},
            serving,
            {
                "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                "kind": "ModelServingList",
                "items": [_base("modelserving-role-rolling")],
            },
        ],
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(bundle)))
    assert main(["validate", "-f", "-"]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "ModelServing/llama-pd: spec.template.roles[0].workerReplicas: Invalid value: -1: "
        "workerReplicas must be a non-negative integer"
    ]
    assert "note: skipped v1 Service/svc" in captured.err


def test_unnamed_and_malformed_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unnamed = _base("modelserving-pd")
    unnamed["metadata"] = {"generateName": "llama-"}
    del unnamed["spec"]["template"]
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(unnamed) + "---\n- just\n- a list\n---\nkind: ModelServing\nspec: {}\n")
    assert main(["validate", "-q", "-f", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "ModelServing/llama-*: spec.template: Required value",
        f'<no kind>/<unnamed #2 in {path}>: Invalid value: "list": a manifest must be a JSON object',
        f"ModelServing/<unnamed #3 in {path}>: apiVersion: Required value",
    ]


def test_unreadable_input_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", str(tmp_path / "missing.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().out
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed\n")
    assert main(["validate", "-f", str(broken)]) == 1
    assert "cannot read" in capsys.readouterr().out


def test_empty_input_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-f", str(_write(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap"}))]) == 0
    assert "no workload.serving.volcano.sh objects found" in capsys.readouterr().err


def test_old_objects_turn_on_the_update_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _base("modelserving-pd")
    new = _base("modelserving-pd")
    new["spec"]["template"]["roles"][1]["name"] = "generate"
    new["spec"]["template"]["gangPolicy"]["minRoleReplicas"] = {"prefill": 1, "generate": 1}
    new_path, old_path = _write(tmp_path, new), _write(tmp_path, old, name="old.yaml")
    assert main(["validate", "-f", str(new_path)]) == 0
    assert main(["validate", "-f", str(new_path), "--old", str(old_path)]) == 1
    out = capsys.readouterr().out
    assert "ModelServing/llama-pd: spec.template.roles: Invalid value: " in out
    assert "role names are immutable; existing role names are [prefill decode]" in out


def test_crds_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir, docs = tmp_path / "crd", tmp_path / "api.md"
    assert main(["crds", "--output-dir", str(out_dir), "--api-docs", str(docs), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["crds", "--output-dir", str(out_dir), "--api-docs", str(docs)]) == 0
    assert sorted(path.name for path in out_dir.iterdir()) == [
        "serving.kthena-py.io_modelcaches.yaml",
        "serving.kthena-py.io_modelpools.yaml",
        "workload.serving.volcano.sh_autoscalingpolicies.yaml",
        "workload.serving.volcano.sh_modelboosters.yaml",
        "workload.serving.volcano.sh_modelservings.yaml",
    ]
    assert docs.read_text().startswith("# API reference")
    assert main(["crds", "--output-dir", str(out_dir), "--api-docs", str(docs), "--check"]) == 0
    capsys.readouterr()
    assert main(["crds", "--stdout"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [document["kind"] for document in documents] == ["CustomResourceDefinition"] * 5


def test_lora_annotations_are_checked_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kthena_py.vocab.labels import LORA_ADAPTERS, LORA_ENDPOINT

    serving = _base("modelserving-pd")
    serving["metadata"]["annotations"] = {
        LORA_ADAPTERS: json.dumps([{"name": "fin", "source": "hf://acme/fin"}]),
        LORA_ENDPOINT: "engine",
    }
    assert main(["validate", "-q", "-f", str(_write(tmp_path, serving))]) == 1
    [line] = capsys.readouterr().out.splitlines()
    name = serving["metadata"]["name"]
    assert line.startswith(f"ModelServing/{name}: metadata.annotations[{LORA_ADAPTERS}][0].source: Invalid value:")
    serving["metadata"]["annotations"][LORA_ENDPOINT] = "sidecar"
    assert main(["validate", "-q", "-f", str(_write(tmp_path, serving))]) == 0
