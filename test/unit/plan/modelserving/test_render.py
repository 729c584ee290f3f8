"""Offline rendering (kthena_py.plan.modelserving.offline.render)."""

from __future__ import annotations

import copy
from typing import Any

import pydantic
import pytest

from kthena_py.plan.modelserving.core.types import PodGroupSupport
from kthena_py.plan.modelserving.offline.render import PLACEHOLDER_UID, render

from .builders import role_doc


def _doc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "llama"},
        "spec": {"replicas": 2, "template": {"roles": [role_doc("prefill", workers=1), role_doc("decode")]}, **spec},
    }


def test_render_order_and_defaults() -> None:
    doc = _doc()
    before = copy.deepcopy(doc)
    objects = render(doc)
    assert doc == before
    assert [(o["kind"], o["metadata"]["name"]) for o in objects][:3] == [
        ("PodGroup", "llama-0"),
        ("PodGroup", "llama-1"),
        ("ControllerRevision", objects[2]["metadata"]["name"]),
    ]
    assert [(o["kind"], o["metadata"]["name"]) for o in objects][3:] == [
        ("Service", "llama-0-prefill-0-0"),
        ("Pod", "llama-0-prefill-0-1"),
        ("Pod", "llama-0-prefill-0-0"),
        ("Pod", "llama-0-decode-0-0"),
        ("Service", "llama-1-prefill-0-0"),
        ("Pod", "llama-1-prefill-0-1"),
        ("Pod", "llama-1-prefill-0-0"),
        ("Pod", "llama-1-decode-0-0"),
    ]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "default"
        assert obj["metadata"]["ownerReferences"][0]["uid"] == PLACEHOLDER_UID
    assert "subGroupPolicy" in objects[0]["spec"]
    assert render(doc) == objects


def test_render_keeps_given_namespace_and_uid() -> None:
    doc = _doc(schedulerName="default-scheduler")
    doc["metadata"].update(namespace="prod", uid="u-1")
    objects = render(doc)
    assert [o["kind"] for o in objects].count("PodGroup") == 0
    assert {o["metadata"]["namespace"] for o in objects} == {"prod"}
    assert {o["metadata"]["ownerReferences"][0]["uid"] for o in objects} == {"u-1"}


def test_render_with_old_volcano() -> None:
    objects = render(_doc(), support=PodGroupSupport(crd_served=True))
    assert objects[0]["spec"]["minTaskMember"] == {"prefill-0": 2, "decode-0": 1}


def test_render_rejects_invalid_documents() -> None:
    with pytest.raises(pydantic.ValidationError):
        render({"metadata": {"name": "x"}, "spec": {"template": {"roles": []}}})
