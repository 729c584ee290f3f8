"""``kthena-py render`` on ModelBoosters: the controller's expansion, ready to commit, through ``main``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.api import ModelBooster
from kthena_py.main import main
from kthena_py.plan.modelbooster import Images, expand
from kthena_py.plan.modelserving.offline.render import PLACEHOLDER_UID
from kthena_py.vocab.labels import BOOSTER_PREFETCH, MODEL_CACHE

BASES = Path(__file__).resolve().parent / "api" / "corpus" / "bases"


def _base(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((BASES / f"{name}.yaml").read_text())
    return document


def _render(tmp_path: Path, capsys: pytest.CaptureFixture[str], *documents: Any, args: tuple[str, ...] = ()) -> Any:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    assert main(["render", "-f", str(path), *args]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_booster_renders_its_three_children_without_owner_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _base("modelbooster-vllm")
    items = _render(tmp_path, capsys, doc)["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [
        ("ModelServing", "qwen-backend1"),
        ("ModelServer", "qwen-backend1"),
        ("ModelRoute", "qwen"),
    ]
    assert all("ownerReferences" not in i["metadata"] for i in items)
    # Otherwise exactly what the controller expands (same code), with the placeholder uid.
    expected = expand(ModelBooster.model_validate({**doc, "metadata": {**doc["metadata"], "uid": PLACEHOLDER_UID}}))
    for item, child in zip(items, expected.all(), strict=True):
        child["metadata"].pop("ownerReferences")
        assert item == child


def test_a_live_booster_keeps_its_uid_and_images_come_from_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _base("modelbooster-pd")
    doc["metadata"].update({"uid": "live-uid", "resourceVersion": "7", "namespace": "prod"})
    doc["status"] = {"observedGeneration": 1}
    items = _render(tmp_path, capsys, doc, args=("--downloader-image", "d:2", "--runtime-image", "r:2"))["items"]
    assert {i["metadata"]["labels"]["workload.serving.volcano.sh/model-uid"] for i in items} == {"live-uid"}
    assert {i["metadata"]["namespace"] for i in items} == {"prod"}
    pod = items[0]["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    assert pod["initContainers"][0]["image"] == "d:2" and pod["containers"][0]["image"] == "r:2"
    assert Images().runtime != "r:2"


def test_a_booster_that_cannot_be_expanded_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _base("modelbooster-pd")
    doc["spec"]["backend"]["workers"] = [w for w in doc["spec"]["backend"]["workers"] if w["type"] == "prefill"]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["render", "-f", str(path)]) == 1
    assert (
        capsys.readouterr().err.strip() == "kthena-py: error: ModelBooster/deepseek: decode worker not found in backend"
    )


def test_a_prefetching_booster_renders_its_modelcache_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _base("modelbooster-vllm")
    doc["metadata"]["annotations"] = {BOOSTER_PREFETCH: "true"}
    doc["spec"]["backend"]["cacheURI"] = "pvc://models"
    # A literal HF_ENDPOINT cannot go into a ModelCache (it reads endpoints from its Secret only): take it out.
    doc["spec"]["backend"]["env"] = [e for e in doc["spec"]["backend"]["env"] if e["name"] != "HF_ENDPOINT"]
    items = _render(tmp_path, capsys, doc)["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [
        ("ModelCache", "qwen-backend1"),
        ("ModelServing", "qwen-backend1"),
        ("ModelServer", "qwen-backend1"),
        ("ModelRoute", "qwen"),
    ]
    assert items[0]["spec"]["storage"] == {"persistentVolumeClaim": {"claimName": "models"}}
    assert items[0]["spec"]["sourceSecretRef"] == {"name": "hf-token"}
    assert items[1]["metadata"]["annotations"][MODEL_CACHE] == "qwen-backend1"
    assert all("ownerReferences" not in i["metadata"] for i in items)
