"""Model names from Kthena's ModelRoute -> ModelServer -> ModelServing."""

from __future__ import annotations

from typing import Any

from kthena_py.plan.activator.directory import build_directory
from kthena_py.plan.activator.routes import RouteTarget, route_targets
from kthena_py.vocab.labels import ACTIVATOR_MODEL, ENTRY_VALUE, SERVING_ENTRY

UID = "workload.serving.volcano.sh/model-uid"


def ms(name: str, labels: dict[str, str], ns: str = "ns", **annotations: str) -> dict[str, Any]:
    entry = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "e", "ports": [{"containerPort": 8000}]}]},
    }
    return {
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"replicas": 0, "template": {"roles": [{"name": "r", "entryTemplate": entry}]}},
    }


def server(name: str, match: dict[str, str], port: int | None = 9000, ns: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {"workloadSelector": {"matchLabels": match}}
    if port is not None:
        spec["workloadPort"] = {"port": port}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def route(name: str, model: str, targets: list[dict[str, Any]], ns: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"modelName": model, "rules": [{"targetModels": targets}]},
    }


def test_a_route_resolves_through_its_server_to_the_modelserving() -> None:
    found = route_targets(
        [route("r", "llama", [{"modelServerName": "s"}])],
        [server("s", {UID: "u1", SERVING_ENTRY: ENTRY_VALUE})],
        [ms("other", {UID: "u2"}), ms("llama-vllm", {UID: "u1"})],
    )
    assert found == [RouteTarget("llama", "ns", "llama-vllm", 9000)]


def test_heaviest_resolvable_target_wins_and_namespaces_do_not_mix() -> None:
    routes = [
        route("r", "m", [{"modelServerName": "light", "weight": 10}, {"modelServerName": "heavy", "weight": 90}]),
        route("x", "elsewhere", [{"modelServerName": "light"}], ns="other"),
        route("y", "dangling", [{"modelServerName": "missing"}]),
        route("z", "", [{"modelServerName": "light"}]),
    ]
    servers = [server("light", {UID: "a"}), server("heavy", {UID: "b"}, port=None)]
    found = route_targets(routes, servers, [ms("a", {UID: "a"}), ms("b", {UID: "b"})])
    assert found == [RouteTarget("m", "ns", "b", None)]


def test_an_empty_selector_selects_nothing() -> None:
    assert route_targets([route("r", "m", [{"modelServerName": "s"}])], [server("s", {})], [ms("a", {})]) == []


def test_directory_adds_route_names_after_annotations_and_names() -> None:
    modelservings = [ms("a", {UID: "a"}, **{ACTIVATOR_MODEL: "taken"}), ms("b", {UID: "b"})]
    routes = [RouteTarget("alias", "ns", "a", 9000), RouteTarget("taken", "ns", "b", None)]
    directory = build_directory(modelservings, [], 120.0, routes)
    alias = directory.resolve("alias")
    assert alias is not None and (alias.name, alias.port) == ("a", 9000)
    taken = directory.resolve("taken")
    assert taken is not None and (taken.name, taken.port) == ("a", 8000)
    assert any("taken" in p for p in directory.problems)
