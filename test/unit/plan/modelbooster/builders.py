"""Booster documents for the expander tests, and golden-file comparison."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from kthena_py.api import ModelBooster

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "KTHENA_PY_UPDATE_GOLDEN"
UID = "6f1c2e0a-1111-4222-8333-444455556666"


def worker(type_: str = "server", **fields: Any) -> dict[str, Any]:
    return {"type": type_, "image": "vllm/vllm-openai:v0.10.1", **fields}


def booster_doc(
    *workers: dict[str, Any],
    type_: str = "vLLM",
    name: str = "mb",
    backend: str = "backend1",
    model_uri: str = "hf://Qwen/Qwen2.5-0.5B-Instruct",
    cache_uri: str | None = "hostpath://tmp/cache",
    replicas: int = 1,
    spec: dict[str, Any] | None = None,
    **backend_fields: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": backend,
        "type": type_,
        "modelURI": model_uri,
        "replicas": replicas,
        "workers": list(workers) or [worker(replicas=1)],
        **backend_fields,
    }
    if cache_uri is not None:
        body["cacheURI"] = cache_uri
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": {"name": name, "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {**(spec or {}), "backend": body},
    }


def parse(doc: dict[str, Any]) -> ModelBooster:
    return ModelBooster.model_validate(copy.deepcopy(doc))


def pod_spec(ms: dict[str, Any], role: int = 0, template: str = "entryTemplate") -> dict[str, Any]:
    spec: dict[str, Any] = ms["spec"]["template"]["roles"][role][template]["spec"]
    return spec


def container(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in spec["containers"] if c["name"] == name)


def env_names(container_: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container_.get("env") or []]


def assert_golden(name: str, objects: Any) -> None:
    """Compare ``objects`` with ``golden/<name>.yaml`` (``KTHENA_PY_UPDATE_GOLDEN=1`` rewrites the file)."""
    path = GOLDEN / f"{name}.yaml"
    text = yaml.safe_dump(objects, sort_keys=True, width=100)
    if os.environ.get(UPDATE_ENV) == "1":
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert yaml.safe_load(text) == yaml.safe_load(expected), f"{path.name} differs; review the diff"
