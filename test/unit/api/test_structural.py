"""Strict decoding and structural defaulting of our kinds, offline (the API server's side: test_render_agreement)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kthena_py.api.structural import apply_defaults, kind_schema_of, unknown_fields, with_defaults

from .corpus import load_base

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "default": "hard"},
                "nested": {
                    "type": "object",
                    "default": {},
                    "properties": {"inner": {"type": "integer", "default": 3}},
                },
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}},
                    },
                },
                "byName": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"weight": {"type": "integer", "default": 1}},
                    },
                },
                "nullable": {"type": "string", "nullable": True, "default": "x"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    },
}


def test_defaults_fill_missing_fields_recursively_like_the_api_server() -> None:
    document = {
        "spec": {
            "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}],
            "byName": {"a": {}, "b": {"weight": 5}},
            "mode": None,
            "nullable": None,
        }
    }
    before = copy.deepcopy(document)
    result = apply_defaults(SCHEMA, document)
    assert document == before  # the input is not modified
    assert result == {
        "spec": {
            "mode": "hard",  # null where not nullable: defaulted
            "nested": {"inner": 3},  # a defaulted object gets its own defaults
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "byName": {"a": {"weight": 1}, "b": {"weight": 5}},
            "nullable": None,  # nullable: null is a value
        }
    }


def test_unknown_fields_are_found_anywhere_but_in_open_objects() -> None:
    document = {
        "apiVersion": "v1",
        "metadata": {"name": "n", "labelz": {}},
        "extra": 1,
        "spec": {
            "ports": [{"port": 1, "proto": "x"}],
            "byName": {"a": {"wieght": 2}},
            "free": {"anything": {"goes": 1}},
            "nested": {"inner": 1, "outer": 2},
        },
    }
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "apiVersion": {"type": "string"}}}
    assert unknown_fields(schema, document) == [
        "metadata.labelz",
        "extra",
        "spec.ports[0].proto",
        "spec.byName.a.wieght",
        "spec.nested.outer",
    ]


def test_every_base_and_example_is_strictly_decodable() -> None:
    documents = [load_base(name) for name in ("modelserving-pd", "autoscalingpolicy-homogeneous")]
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        documents.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    for document in documents:
        schema = kind_schema_of(document["kind"])
        assert schema is not None
        assert unknown_fields(schema, document) == [], document["metadata"]["name"]


def test_the_pod_schema_defaults_reach_container_ports() -> None:
    serving = load_base("modelserving-pd")
    defaulted = with_defaults(serving)
    containers = defaulted["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"]
    ports = [port for container in containers for port in container.get("ports", [])]
    assert ports and all(port["protocol"] == "TCP" for port in ports)
    assert with_defaults(defaulted) == defaulted  # idempotent
    assert with_defaults({"kind": "Service", "spec": {}}) == {"kind": "Service", "spec": {}}
