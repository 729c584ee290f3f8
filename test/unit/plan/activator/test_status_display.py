"""``kthena-py status`` of a ModelServing at zero that the activator may wake."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.plan.activator.targets import opted_in
from kthena_py.plan.modelserving.view import build_view, render_text, status_document
from kthena_py.vocab.labels import ACTIVATOR_SCALE_FROM_ZERO


def ms(replicas: int, annotations: dict[str, str]) -> dict[str, Any]:
    role = {"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": {"spec": {"containers": [{"name": "e"}]}}}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "llm", "namespace": "ns", "uid": "u", "annotations": annotations},
        "spec": {"replicas": replicas, "template": {"roles": [role]}},
    }


@pytest.mark.parametrize(
    ("replicas", "annotations", "shown"),
    [
        (0, {ACTIVATOR_SCALE_FROM_ZERO: "true"}, True),
        (0, {}, False),
        (1, {ACTIVATOR_SCALE_FROM_ZERO: "true"}, False),
    ],
)
def test_scaled_to_zero_by_the_activator(replicas: int, annotations: dict[str, str], shown: bool) -> None:
    obj = ms(replicas, annotations)
    view = build_view(obj, [], now=0.0, scale_from_zero=opted_in(obj, []))
    assert ("scaled to zero (activator)" in render_text(view).splitlines()[0]) is shown
    assert ("scaleFromZero" in status_document(view)) is opted_in(obj, [])


@pytest.mark.parametrize(
    ("replicas", "annotations", "pools", "words"),
    [
        (0, {ACTIVATOR_SCALE_FROM_ZERO: "true"}, ["big"], "not resident in ModelPool big"),  # the opt-in is ignored
        (0, {}, ["big"], "not resident in ModelPool big"),
        (0, {}, ["b", "a", "b"], "not resident in ModelPools a, b"),  # a conflict the webhook missed: both named
        (0, {ACTIVATOR_SCALE_FROM_ZERO: "true"}, [], "scaled to zero (activator)"),
        (1, {}, ["big"], None),  # resident: the header says nothing of the pool
    ],
)
def test_a_pool_member_at_zero_is_not_resident_in_its_pool(
    replicas: int, annotations: dict[str, str], pools: list[str], words: str | None
) -> None:
    obj = ms(replicas, annotations)
    view = build_view(obj, [], now=0.0, scale_from_zero=opted_in(obj, []), model_pools=pools)
    header = render_text(view).splitlines()[0]
    assert ("not resident" in header or "scaled to zero" in header) is (words is not None)
    if words is not None:
        assert words in header
    if pools:
        assert "scaled to zero (activator)" not in header
        assert "scaleFromZero" not in status_document(view)  # its pool wakes it, not the activator
        assert status_document(view)["modelPools"] == sorted(set(pools))
    else:
        assert "modelPools" not in status_document(view)
