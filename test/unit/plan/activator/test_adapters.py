"""LoRA adapters in the activator's directory: names, clashes, labelled backends, the body rewrite, the 503's words."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.activator.adapters import adapter_reason, kubeai_name, rewrite_model
from kthena_py.plan.activator.backends import entry_backends
from kthena_py.plan.activator.directory import AdapterRoute, build_directory
from kthena_py.plan.activator.routes import RouteTarget
from kthena_py.plan.adapters.desired import adapter_label, source_digest
from kthena_py.vocab.labels import ACTIVATOR_MODEL, ACTIVATOR_PORT, ENTRY_VALUE, LORA_ADAPTERS, SERVING_ENTRY

NS = "ns"
FIN = "s3://bucket/fin"
LEGAL = "hf://org/legal"


def ms(name: str, adapters: list[dict[str, str]] | str | None = None, models: str | None = None) -> dict[str, Any]:
    annotations = {ACTIVATOR_PORT: "8000"}
    if adapters is not None:
        annotations[LORA_ADAPTERS] = adapters if isinstance(adapters, str) else json.dumps(adapters)
    if models is not None:
        annotations[ACTIVATOR_MODEL] = models
    return {
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {"replicas": 1, "template": {"roles": []}},
    }


def pod(name: str, labels: dict[str, str] | None = None, *, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS, "labels": {SERVING_ENTRY: ENTRY_VALUE, **(labels or {})}},
        "status": {
            "phase": "Running",
            "podIP": f"10.0.0.{len(name)}",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def routes_of(directory: Any) -> dict[str, tuple[str, str, bool, str]]:
    return {name: (r.target.key, r.adapter, r.rewrite, r.digest) for name, r in sorted(directory.by_adapter.items())}


def test_adapter_names_and_kubeai_names() -> None:
    directory = build_directory(
        [ms("base", [{"name": "fin", "source": FIN}, {"name": "legal", "url": LEGAL}], models="llama,llama-8b")],
        [],
        120.0,
    )
    assert routes_of(directory) == {
        "fin": ("ns/base", "fin", False, source_digest(FIN)),
        "legal": ("ns/base", "legal", False, source_digest(LEGAL)),
        "llama_fin": ("ns/base", "fin", True, source_digest(FIN)),
        "llama-8b_fin": ("ns/base", "fin", True, source_digest(FIN)),
        "llama_legal": ("ns/base", "legal", True, source_digest(LEGAL)),
        "llama-8b_legal": ("ns/base", "legal", True, source_digest(LEGAL)),
    }
    assert directory.problems == ()
    # Adapter names are not model names: a plain model lookup never finds them.
    assert directory.resolve("fin") is None and directory.models() == ["llama", "llama-8b"]
    route = directory.resolve_adapter("llama_fin")
    assert isinstance(route, AdapterRoute) and route.requirement == (adapter_label("fin"), source_digest(FIN))


def test_a_model_name_keeps_its_name_and_the_first_modelserving_keeps_an_adapter_name() -> None:
    directory = build_directory(
        [
            ms("b-second", [{"name": "fin", "source": "s3://other"}]),
            ms("a-first", [{"name": "fin", "source": FIN}, {"name": "chat", "source": FIN}]),
            ms("chat"),  # a model name: the adapter `chat` of a-first does not take it
        ],
        [],
        120.0,
    )
    assert directory.resolve_adapter("fin") is not None
    assert directory.resolve_adapter("fin").target.name == "a-first"  # type: ignore[union-attr]
    assert directory.resolve_adapter("chat") is None and directory.resolve("chat") is not None
    assert directory.resolve_adapter("b-second_fin") is not None  # its KubeAI name is still its own
    problems = " | ".join(directory.problems)
    assert "'fin' of ns/b-second" in problems and "ns/a-first" in problems
    assert "'chat' of ns/a-first" in problems and "model name of ns/chat" in problems


def test_a_router_name_gives_a_kubeai_name_on_the_routers_port() -> None:
    directory = build_directory(
        [ms("base", [{"name": "fin", "source": FIN}])],
        [],
        120.0,
        [RouteTarget("router-llama", NS, "base", 9000)],
    )
    via_route = directory.resolve_adapter("router-llama_fin")
    plain = directory.resolve_adapter("fin")
    assert via_route is not None and plain is not None
    assert (via_route.target.port, via_route.rewrite) == (9000, True)
    assert (plain.target.port, plain.rewrite) == (8000, False)


@pytest.mark.parametrize("annotation", ["not json", '{"name": "fin"}', '[{"name": "-bad-", "source": "x"}]', "[]"])
def test_an_unusable_annotation_routes_no_adapter(annotation: str) -> None:
    directory = build_directory([ms("base", annotation)], [], 120.0)
    assert directory.by_adapter == {} and directory.resolve("base") is not None


def test_only_pods_labelled_with_the_wanted_source_serve_the_adapter() -> None:
    digest = source_digest(FIN)
    pods = [
        pod("p-loaded", {adapter_label("fin"): digest}),
        pod("p-plain"),
        pod("p-old-source", {adapter_label("fin"): source_digest("s3://old")}),
        pod("p-loaded-not-ready", {adapter_label("fin"): digest}, ready=False),
        pod("p-other", {adapter_label("legal"): digest}),
    ]
    assert [b.pod for b in entry_backends(pods, 8000, (adapter_label("fin"), digest))] == ["p-loaded"]
    assert [b.pod for b in entry_backends(pods, 8000)] == ["p-loaded", "p-old-source", "p-other", "p-plain"]


@pytest.mark.parametrize(
    ("pods", "words"),
    [
        ([], "no entry pod is Ready to load it"),
        ([pod("p", ready=False)], "no entry pod is Ready to load it"),
        ([pod("p1"), pod("p2")], "loaded on none of the 2 Ready entry pods; the adapter reconciler loads it"),
        ([pod("p1")], "loaded on none of the 1 Ready entry pod;"),
        (
            [pod("p1", {adapter_label("fin"): "0" * 16}), pod("p2")],
            "none of the 2 Ready entry pods (1 has another source of it loaded)",
        ),
    ],
)
def test_adapter_reason(pods: list[dict[str, Any]], words: str) -> None:
    text = adapter_reason(pods, 8000, "fin", source_digest(FIN))
    assert "'fin'" in text and words in text, text


def test_kubeai_name() -> None:
    assert kubeai_name("llama", "fin") == "llama_fin"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(body=st.dictionaries(st.text(max_size=6), json_values, max_size=6), model=st.text(min_size=1, max_size=10))
def test_rewrite_sets_model_and_keeps_everything_else(body: dict[str, Any], model: str) -> None:
    body = {"model": "base_fin", **body}
    out = json.loads(rewrite_model(json.dumps(body).encode(), model))
    assert out["model"] == model
    assert {k: v for k, v in out.items() if k != "model"} == {k: v for k, v in body.items() if k != "model"}
    assert list(out) == list(body)  # member order kept


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b"\xff\xfe"])
def test_rewrite_leaves_a_body_it_cannot_read(raw: bytes) -> None:
    assert rewrite_model(raw, "fin") == raw


short_names = st.sampled_from(["a", "b", "fin", "law", "a_fin", "b_law", "chat"])


@given(
    servings=st.lists(
        st.tuples(
            st.lists(short_names, min_size=1, max_size=3, unique=True),
            st.lists(short_names, max_size=3, unique=True),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_no_name_routes_two_ways_and_model_names_are_never_shadowed(
    servings: list[tuple[list[str], list[str]]],
) -> None:
    objects = [
        ms(f"ms-{i}", [{"name": n, "source": f"s3://{i}/{n}"} for n in adapters], models=",".join(models))
        for i, (models, adapters) in enumerate(servings)
    ]
    directory = build_directory(objects, [], 120.0)
    assert not set(directory.by_model) & set(directory.by_adapter)
    every_model = {m for models, _ in servings for m in models}
    assert set(directory.by_model) == every_model
    for name, route in directory.by_adapter.items():
        index = int(route.target.name.split("-")[1])
        models, adapters = servings[index]
        assert route.adapter in adapters
        assert route.requirement == (adapter_label(route.adapter), source_digest(f"s3://{index}/{route.adapter}"))
        assert name == route.adapter if not route.rewrite else name in {f"{m}_{route.adapter}" for m in models}
    # GET /v1/models lists every routable name once; an adapter name under its base model, which is routable too.
    cards = directory.model_cards()
    assert [c["id"] for c in cards] == sorted(set(directory.by_model) | set(directory.by_adapter))
    for card in cards:
        route = directory.by_adapter.get(card["id"])
        if route is None:
            assert card["parent"] is None and card["owned_by"] == directory.by_model[card["id"]].key
        else:
            assert card["root"] == route.adapter and card["owned_by"] == route.target.key
            owned = [m for m, t in directory.by_model.items() if t.key == route.target.key]
            if owned:  # its ModelServing still answers to a name: the parent is one of them
                assert card["parent"] in owned
            if route.rewrite:
                assert card["id"] == f"{card['parent']}_{route.adapter}"


def test_models_list_adapter_and_kubeai_names_under_their_parent_and_pool_members() -> None:
    pool = {
        "metadata": {"name": "gpu0", "namespace": NS},
        "spec": {"members": [{"modelServingRef": {"name": "member"}}], "swapBudget": "30s"},
    }
    directory = build_directory(
        [
            ms("base", [{"name": "fin", "source": FIN}], models="llama,llama-8b"),
            ms("member", [{"name": "legal", "url": LEGAL}]),
            ms("solo"),
        ],
        [],
        120.0,
        [RouteTarget("router-llama", NS, "base", 9000)],
        [pool],
    )
    rows = [
        (c["id"], c["object"], c["owned_by"], c["root"], c["parent"], c.get("modelpool"))
        for c in directory.model_cards()
    ]
    assert rows == [
        ("fin", "model", "ns/base", "fin", "llama", None),
        ("legal", "model", "ns/member", "legal", "member", "ns/gpu0"),
        ("llama", "model", "ns/base", "llama", None, None),
        ("llama-8b", "model", "ns/base", "llama-8b", None, None),
        ("llama-8b_fin", "model", "ns/base", "fin", "llama-8b", None),
        ("llama_fin", "model", "ns/base", "fin", "llama", None),
        ("member", "model", "ns/member", "member", None, "ns/gpu0"),
        ("member_legal", "model", "ns/member", "legal", "member", "ns/gpu0"),
        ("router-llama", "model", "ns/base", "router-llama", None, None),
        ("router-llama_fin", "model", "ns/base", "fin", "router-llama", None),
        ("solo", "model", "ns/solo", "solo", None, None),
    ]
