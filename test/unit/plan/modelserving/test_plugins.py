"""Built-in plugins, scopes and configuration errors (kthena_py.plan.modelserving.core.plugins)."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.api.modelserving import PluginSpec
from kthena_py.plan.modelserving.core.plugins import (
    KNOWN_PLUGINS,
    PluginContext,
    PluginError,
    apply_plugins,
    host_port,
    plugin_applies,
    validate_plugin,
    validate_plugins,
)


def _plugin(name: str, config: Any = None, scope: dict[str, Any] | None = None, **extra: Any) -> PluginSpec:
    doc: dict[str, Any] = {"name": name, **extra}
    if config is not None:
        doc["config"] = config
    if scope is not None:
        doc["scope"] = scope
    return PluginSpec.model_validate(doc)


def _ctx(index: int = 0, role: str = "prefill", owners: tuple[dict[str, Any], ...] = ()) -> PluginContext:
    return PluginContext("llama", "ns", "llama-2", 2, role, f"{role}-0", index, owners)


def _pod(index: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": f"llama-2-prefill-0-{index}", "labels": {}},
        "spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "main", "ports": [{"containerPort": 8000}]}, {"name": "side"}],
        },
    }


def test_known_plugins() -> None:
    assert {"demo-pod-tweaks", "pod-tweaks", "host-network-ports", "lws-standard-labels"} <= KNOWN_PLUGINS


@pytest.mark.parametrize(
    ("scope", "role", "entry", "expected"),
    [
        (None, "p", True, True),
        ({}, "p", False, True),
        ({"roles": []}, "p", True, True),
        ({"roles": ["d"]}, "p", True, False),
        ({"roles": ["p"], "target": "Entry"}, "p", True, True),
        ({"target": "Entry"}, "p", False, False),
        ({"target": "Worker"}, "p", False, True),
        ({"target": "Worker"}, "p", True, False),
        ({"target": "All"}, "p", False, True),
    ],
)
def test_scope(scope: dict[str, Any] | None, role: str, entry: bool, expected: bool) -> None:
    assert plugin_applies(_plugin("pod-tweaks", scope=scope), role, entry) is expected


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (_plugin("nope"), "plugin nope not registered"),
        (_plugin("pod-tweaks", config=[1]), "plugin pod-tweaks: config must be an object"),
        (_plugin("pod-tweaks", config={"bogus": 1}), "unknown config field(s) ['bogus']"),
        (_plugin("pod-tweaks", config={"labels": {"a": 1}}), "config.labels must be a map of strings to strings"),
        (_plugin("pod-tweaks", config={"env": [{"value": "x"}]}), "config.env[0] must be an EnvVar object"),
        (_plugin("pod-tweaks", config={"runtimeClassName": ""}), "config.runtimeClassName must be a non-empty string"),
        (_plugin("host-network-ports", config={"startPort": 0}), "config.startPort must be an integer in [1, 65535]"),
        (_plugin("host-network-ports", config={"startPort": 9, "endPort": 8}), "must not be below config.startPort"),
        (_plugin("host-network-ports", config={"envName": ""}), "config.envName must be a non-empty string"),
        (_plugin("host-network-ports", config={"declarePort": "yes"}), "config.declarePort must be a boolean"),
        (_plugin("lws-standard-labels", config={"x": 1}), "unknown config field(s) ['x']"),
    ],
)
def test_config_errors(plugin: PluginSpec, message: str) -> None:
    with pytest.raises(PluginError) as err:
        validate_plugin(plugin)
    assert message in str(err.value)
    with pytest.raises(PluginError):
        apply_plugins(_pod(), [plugin], _ctx())


def test_validate_plugins_accepts_valid_configs() -> None:
    validate_plugins(None)
    validate_plugins(
        [
            _plugin("demo-pod-tweaks", config={"runtimeClassName": "x", "env": [{"name": "A", "value": "b"}]}),
            _plugin("host-network-ports"),
            _plugin("host-network-ports", config={"startPort": 40000, "endPort": 40010, "envName": "PORT"}),
            _plugin("lws-standard-labels"),
        ]
    )


def test_plugins_apply_in_order_and_by_scope() -> None:
    pod = _pod(1)
    plugins = [
        _plugin("pod-tweaks", config={"labels": {"order": "first"}}),
        _plugin("pod-tweaks", config={"labels": {"order": "second"}}, scope={"target": "Worker"}),
        _plugin("pod-tweaks", config={"labels": {"entry-only": "yes"}}, scope={"target": "Entry"}),
        _plugin("pod-tweaks", config={"labels": {"decode": "yes"}}, scope={"roles": ["decode"]}),
    ]
    apply_plugins(pod, plugins, _ctx(index=1))
    assert pod["metadata"]["labels"] == {"order": "second"}


def test_demo_pod_tweaks_env_replaces_same_name() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "value": "old"}, {"name": "B", "value": "keep"}]
    apply_plugins(pod, [_plugin("demo-pod-tweaks", config={"env": [{"name": "A", "value": "new"}]})], _ctx())
    assert pod["spec"]["containers"][0]["env"] == [{"name": "B", "value": "keep"}, {"name": "A", "value": "new"}]
    assert pod["spec"]["initContainers"][0]["env"] == [{"name": "A", "value": "new"}]


def test_host_network_ports() -> None:
    pod = _pod()
    apply_plugins(pod, [_plugin("host-network-ports", config={"startPort": 31000, "endPort": 31009})], _ctx())
    spec = pod["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    port = host_port("ns", "llama-2-prefill-0-0", 31000, 31009)
    assert 31000 <= port <= 31009
    for container in spec["containers"] + spec["initContainers"]:
        assert {"name": "KTHENA_HTTP_PORT", "value": str(port)} in container["env"]
    assert {"name": "kthena-http", "containerPort": port, "hostPort": port, "protocol": "TCP"} in spec["containers"][0][
        "ports"
    ]
    assert "ports" not in spec["containers"][1]
    again = _pod()
    apply_plugins(again, [_plugin("host-network-ports", config={"startPort": 31000, "endPort": 31009})], _ctx())
    assert again == pod


def test_host_network_ports_spreads_ports() -> None:
    ports = {host_port("ns", f"llama-{g}-prefill-0-0", 30000, 32767) for g in range(50)}
    assert len(ports) > 40


def test_host_network_ports_custom_env_without_declared_port() -> None:
    pod = _pod()
    config = {"envName": "PORT", "declarePort": False, "startPort": 5000, "endPort": 5000}
    apply_plugins(pod, [_plugin("host-network-ports", config=config)], _ctx())
    assert {"name": "PORT", "value": "5000"} in pod["spec"]["containers"][0]["env"]
    assert pod["spec"]["containers"][0]["ports"] == [{"containerPort": 8000}]


def test_lws_standard_labels_only_with_lws_owner() -> None:
    pod = _pod(1)
    apply_plugins(pod, [_plugin("lws-standard-labels")], _ctx(index=1))
    assert pod["metadata"]["labels"] == {}
    owners = ({"kind": "LeaderWorkerSet", "name": "my-lws"},)
    apply_plugins(pod, [_plugin("lws-standard-labels")], _ctx(index=1, owners=owners))
    labels = pod["metadata"]["labels"]
    assert labels["leaderworkerset.sigs.k8s.io/name"] == "my-lws"
    assert labels["leaderworkerset.sigs.k8s.io/group-index"] == "2"
    assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == "1"
    assert len(labels["leaderworkerset.sigs.k8s.io/group-key"]) == 40


def test_admission_knows_exactly_the_registered_plugins() -> None:
    from kthena_py.api.plugins import BUILTIN_PLUGINS
    from kthena_py.plan.modelserving.core.plugins import KNOWN_PLUGINS

    assert BUILTIN_PLUGINS == KNOWN_PLUGINS
