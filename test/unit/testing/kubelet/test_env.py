"""A container's environment, resolved like the kubelet does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from kthena_py.testing.kubelet import ContainerConfigError, env_sources, expand, resolve_env
from kthena_py.testing.kubelet.env import EnvSources

POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "llm"}, "annotations": {"a/b": "c"}},
    "spec": {"nodeName": "node-a", "serviceAccountName": "sa"},
}
SECRETS = {"hub": {"token": "hf_x", "user": "me"}}
CONFIG_MAPS = {"settings": {"REVISION": "main"}}


def env(*entries: dict[str, Any], env_from: list[dict[str, Any]] | None = None) -> dict[str, str]:
    container: dict[str, Any] = {"name": "c", "env": list(entries)}
    if env_from is not None:
        container["envFrom"] = env_from
    return resolve_env(
        POD, container, pod_ip="127.100.250.7", host_ip="127.0.0.1", secrets=SECRETS, config_maps=CONFIG_MAPS
    )


def field(path: str) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {"fieldRef": {"fieldPath": path}}}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("metadata.name", "p"),
        ("metadata.namespace", "ns"),
        ("metadata.uid", "u-1"),
        ("spec.nodeName", "node-a"),
        ("spec.serviceAccountName", "sa"),
        ("status.podIP", "127.100.250.7"),
        ("status.hostIP", "127.0.0.1"),
        ("metadata.labels['app']", "llm"),
        ("metadata.annotations['a/b']", "c"),
        ("metadata.labels['missing']", ""),
    ],
)
def test_field_refs(path: str, value: str) -> None:
    assert env(field(path)) == {"V": value}


@pytest.mark.parametrize(
    ("entries", "env_from", "expected"),
    [
        ([{"name": "A", "value": "1"}], None, {"A": "1"}),
        ([{"name": "A"}], None, {"A": ""}),
        ([{"name": "T", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}}], None, {"T": "hf_x"}),
        (
            [{"name": "R", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "REVISION"}}}],
            None,
            {"R": "main"},
        ),
        ([{"name": "O", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": True}}}], None, {}),
        ([{"name": "O", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "k", "optional": True}}}], None, {}),
        ([], [{"secretRef": {"name": "hub"}, "prefix": "HF_"}], {"HF_token": "hf_x", "HF_user": "me"}),
        ([], [{"configMapRef": {"name": "settings"}}], {"REVISION": "main"}),
        ([], [{"configMapRef": {"name": "gone", "optional": True}}], {}),
        # env overrides envFrom; $(VAR) expands earlier variables, including those from envFrom
        ([{"name": "REVISION", "value": "v2"}], [{"configMapRef": {"name": "settings"}}], {"REVISION": "v2"}),
        (
            [{"name": "URL", "value": "http://$(HOST):$(PORT)/$(REVISION)"}, {"name": "PORT", "value": "80"}],
            [{"configMapRef": {"name": "settings"}}],
            {"REVISION": "main", "URL": "http://$(HOST):$(PORT)/main", "PORT": "80"},
        ),
        ([{"name": "A", "value": "x"}, {"name": "B", "value": "$$(A) $(A)"}], None, {"A": "x", "B": "$(A) x"}),
    ],
)
def test_values_and_sources(
    entries: list[dict[str, Any]], env_from: list[dict[str, Any]] | None, expected: dict[str, str]
) -> None:
    assert env(*entries, env_from=env_from) == expected


@pytest.mark.parametrize(
    ("entries", "env_from", "message"),
    [
        ([{"name": "T", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}], None, 'secret "gone" not found'),
        ([{"name": "T", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "k"}}}], None, "couldn't find key k"),
        ([{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}}], None, "configmap"),
        ([], [{"secretRef": {"name": "gone"}}], 'secret "gone" not found'),
        ([field("status.phase")], None, "unsupported fieldRef"),
        ([{"name": "L", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}], None, "unsupported valueFrom"),
    ],
)
def test_config_errors(entries: list[dict[str, Any]], env_from: list[dict[str, Any]] | None, message: str) -> None:
    with pytest.raises(ContainerConfigError, match=message):
        env(*entries, env_from=env_from)


def test_env_sources_lists_what_to_fetch() -> None:
    container = {
        "envFrom": [{"secretRef": {"name": "a"}}, {"configMapRef": {"name": "b"}}],
        "env": [
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "c", "key": "k"}}},
            {"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "d", "key": "k"}}},
            {"name": "Z", "value": "v"},
        ],
    }
    assert env_sources(container) == EnvSources(frozenset({"a", "c"}), frozenset({"b", "d"}))


@given(hs.text(alphabet="ab$()XY", max_size=30))
def test_expand_without_variables_only_unescapes(value: str) -> None:
    expected = value.replace("$$", "$")  # only "$$" escapes change; unknown $(..) stay
    assert expand(value, {}) == expected


@given(hs.text(alphabet="abc /:", max_size=20))
def test_expand_substitutes_a_known_variable(text: str) -> None:
    assert expand(f"$(V){text}$(V)", {"V": text}) == text * 3
