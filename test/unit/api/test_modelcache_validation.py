"""ModelCache validation offline (``kthena-py validate``, the webhook): schema, sources, digests, immutable storage."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_py.api.validation import validate_document
from kthena_py.api.validation.modelcache import BASE_SCHEMES, source_error

SHA = "f" * 64


def _cache(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"source": "hf://org/m", "storage": {"persistentVolumeClaim": {"claimName": "c"}}, **spec},
    }


def _errors(doc: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in validate_document(doc, old=old)]


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"source": "org/m", "sha256": SHA},
        {"source": "s3://bucket/path", "files": ["a", "b"], "fileSHA256": {"a": SHA}},
        {"source": "obs://bucket/path"},
        {"source": "https://example.test/m.gguf", "sha256": SHA},
        {"source": "pvc://models/llama"},
        {"storage": {"nodeLocal": {"path": "/var/m", "nodeSelector": {"gpu": "true"}}}, "prefetch": False},
        {"storage": {"volumeClaimTemplate": {"size": "10Gi"}}, "placement": {"tolerations": [{"operator": "Exists"}]}},
    ],
)
def test_valid_caches_pass(spec: dict[str, Any]) -> None:
    assert _errors(_cache(**spec)) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"source": "gs://b/m"}, 'spec.source: Unsupported value: "gs://b/m": unsupported source scheme gs://'),
        ({"source": "hf://"}, 'spec.source: Invalid value: "hf://": hf:// needs a location after the scheme'),
        ({"source": "just-a-name"}, "must be <scheme>://... or a Hugging Face repo id org/name"),
        (
            {"files": ["a"], "fileSHA256": {"b": SHA}},
            'spec.fileSHA256[b]: Invalid value: "b": must be one of spec.files',
        ),
        (
            {
                "storage": {
                    "persistentVolumeClaim": {"claimName": "c"},
                    "nodeLocal": {"path": "/m", "nodeSelector": {"a": "b"}},
                }
            },
            "spec.storage: Invalid value: ",
        ),
        ({"storage": {}}, "exactly one of persistentVolumeClaim, volumeClaimTemplate, nodeLocal must be set"),
        ({"sha256": SHA, "fileSHA256": {"a": SHA}}, "sha256 and fileSHA256 are mutually exclusive"),
        ({"sha256": "ABC"}, "spec.sha256"),
        ({"maxWorkers": 0}, "spec.maxWorkers"),
        ({"bogus": 1}, 'unknown field "spec.bogus"'),
    ],
)
def test_invalid_caches_are_refused_with_the_field_path(spec: dict[str, Any], expected: str) -> None:
    errors = _errors(_cache(**spec))
    assert any(expected in e for e in errors), errors


def test_the_storage_is_immutable_on_update_but_other_fields_are_not() -> None:
    old = _cache()
    moved = copy.deepcopy(old)
    moved["spec"]["storage"] = {"persistentVolumeClaim": {"claimName": "other"}}
    assert _errors(moved, old) == [
        "spec.storage: Forbidden: storage is immutable: a changed storage is a new cache (create another ModelCache)"
    ]
    bumped = copy.deepcopy(old)
    bumped["spec"]["revision"] = "v2"
    assert _errors(bumped, old) == []


def test_the_kind_lives_in_its_own_group() -> None:
    wrong = _cache()
    wrong["apiVersion"] = "workload.serving.volcano.sh/v1alpha1"
    assert _errors(wrong) == [
        'apiVersion: Unsupported value: "workload.serving.volcano.sh/v1alpha1": supported values: '
        '"serving.kthena-py.io/v1alpha1"'
    ]
    listed = {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelCacheList",
        "items": [_cache(source="gs://x/y")],
    }
    assert any(e.startswith("items[0].spec.source: Unsupported value") for e in _errors(listed))


def test_modelscope_is_a_source_only_with_its_client() -> None:
    assert source_error("ms://org/m", BASE_SCHEMES) is not None
    assert "ModelScope" in source_error("ms://org/m", BASE_SCHEMES).message  # type: ignore[union-attr]
    assert source_error("ms://org/m", (*BASE_SCHEMES, "ms://")) is None
