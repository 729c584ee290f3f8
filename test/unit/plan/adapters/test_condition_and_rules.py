"""The AdaptersLoaded condition, the load endpoint read from annotations, and the admission rules of the LoRA
annotations with their field paths."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kthena_py.plan.adapters.condition import PodOutcome, adapters_condition, summary_message
from kthena_py.plan.adapters.desired import Adapter
from kthena_py.plan.adapters.endpoint import (
    ENGINE,
    SIDECAR,
    SIDECAR_PORT,
    LoadEndpoint,
    endpoint_of,
    load_body,
    output_dir_of,
)
from kthena_py.plan.adapters.validation import lora_annotation_errors
from kthena_py.vocab.labels import LORA_ADAPTERS, LORA_ENDPOINT, LORA_PORT


@pytest.mark.parametrize(
    ("outcomes", "ok", "reason", "message"),
    [
        ([], False, "NoReadyPods", "adapters loaded on 0/0 pods: no entry pod is Ready"),
        (
            [PodOutcome("a", False, ("fin",))],
            False,
            "NoReadyPods",
            "adapters loaded on 0/0 pods: no entry pod is Ready",
        ),
        ([PodOutcome("a", True), PodOutcome("b", False, ("fin",))], True, "AllLoaded", "adapters loaded on 1/1 pods"),
        (
            [PodOutcome("a", True), PodOutcome("b", True, ("fin", "law"))],
            False,
            "Loading",
            "adapters loaded on 1/2 pods; loading fin, law",
        ),
        (
            [PodOutcome("a", True), PodOutcome("b", True, ("fin",), {"fin": "refused"})],
            False,
            "AdapterLoadFailed",
            "adapters loaded on 1/2 pods; load failed on b: fin: refused",
        ),
    ],
)
def test_summary(outcomes: list[PodOutcome], ok: bool, reason: str, message: str) -> None:
    assert summary_message(outcomes) == (ok, reason, message)


def test_transition_time_moves_only_with_the_status() -> None:
    done = [PodOutcome("a", True)]
    first = adapters_condition(done, None, 3, 100.0)
    assert first["status"] == "True" and first["observedGeneration"] == 3
    again = adapters_condition(done, first, 3, 200.0)
    assert again["lastTransitionTime"] == first["lastTransitionTime"]
    failed = adapters_condition([PodOutcome("a", True, ("x",), {"x": "no"})], first, 3, 200.0)
    assert failed["lastTransitionTime"] != first["lastTransitionTime"]


def ms(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "llm", "annotations": annotations}}


def test_endpoint_defaults_and_overrides() -> None:
    assert endpoint_of(ms(), 9000) == (LoadEndpoint(SIDECAR, SIDECAR_PORT), ())
    assert endpoint_of(ms(**{LORA_ENDPOINT: "engine"}), 9000) == (LoadEndpoint(ENGINE, 9000), ())
    assert endpoint_of(ms(**{LORA_ENDPOINT: "engine", LORA_PORT: "8001"}), 9000)[0] == LoadEndpoint(ENGINE, 8001)
    endpoint, problems = endpoint_of(ms(**{LORA_ENDPOINT: "grpc", LORA_PORT: "0"}), 9000)
    assert endpoint == LoadEndpoint(SIDECAR, SIDECAR_PORT) and [p.path for p in problems] == [LORA_ENDPOINT, LORA_PORT]


def test_load_bodies() -> None:
    fin = Adapter("fin", "hf://acme/fin")
    assert load_body(fin, LoadEndpoint(SIDECAR, 8100)) == {
        "lora_name": "fin",
        "source": "hf://acme/fin",
        "output_dir": output_dir_of(fin),
    }
    assert output_dir_of(fin) == f"/adapters/fin-{fin.digest}"
    assert load_body(Adapter("fin", "/m/fin"), LoadEndpoint(ENGINE, 8000)) == {
        "lora_name": "fin",
        "lora_path": "/m/fin",
    }


_BASE = f"metadata.annotations[{LORA_ADAPTERS}]"


@pytest.mark.parametrize(
    ("annotations", "paths"),
    [
        ({}, []),
        ({LORA_ADAPTERS: json.dumps([{"name": "fin", "source": "hf://a/b"}])}, []),
        ({LORA_ADAPTERS: "nope"}, [_BASE]),
        (
            {LORA_ADAPTERS: json.dumps([{"name": "fin"}, {"name": "a b", "source": "x"}])},
            [f"{_BASE}[0].source", f"{_BASE}[1].name"],
        ),
        ({LORA_ENDPOINT: "grpc"}, [f"metadata.annotations[{LORA_ENDPOINT}]"]),
        ({LORA_PORT: "70000"}, [f"metadata.annotations[{LORA_PORT}]"]),
        (
            {
                LORA_ENDPOINT: "engine",
                LORA_ADAPTERS: json.dumps([{"name": "a", "source": "/m/a"}, {"name": "b", "source": "hf://x/b"}]),
            },
            [f"{_BASE}[1].source"],
        ),
    ],
)
def test_admission_rules_with_paths(annotations: dict[str, str], paths: list[str]) -> None:
    assert [e.path for e in lora_annotation_errors(ms(**annotations))] == paths
