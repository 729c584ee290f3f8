"""Engine flags, knobs and ports (modelbooster.md sections 4.1, 4.3 and 4.5, with the section 11 fixes)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api import ModelWorker
from kthena_py.plan.modelbooster import ExpandError
from kthena_py.plan.modelbooster.engine import config_flags, config_of, device_count, engine_port, knobs_of

from .builders import booster_doc, parse, worker


@pytest.mark.parametrize(
    ("config", "flags"),
    [
        ({}, []),
        ({"b": 1, "a": "x"}, ["--a", "x", "--b", "1"]),
        ({"max_model_len": 32768}, ["--max-model-len", "32768"]),
        ({"trust-remote-code": ""}, ["--trust-remote-code"]),
        ({"enforce-eager": True}, ["--enforce-eager"]),
        ({"enable-prefix-caching": False}, ["--no-enable-prefix-caching"]),
        ({"gpu-memory-utilization": 0.9}, ["--gpu-memory-utilization", "0.9"]),
        ({"max-num-batched-tokens": 1048576}, ["--max-num-batched-tokens", "1048576"]),
        ({"max-num-batched-tokens": 1e6}, ["--max-num-batched-tokens", "1000000"]),
        ({"compilation-config": {"level": 3}}, ["--compilation-config", '{"level":3}']),
        ({"lora-modules": ["a", "b"]}, ["--lora-modules", '["a","b"]']),
        ({"seed": None}, []),
    ],
)
def test_config_flags(config: dict[str, Any], flags: list[str]) -> None:
    assert config_flags(config) == flags


def test_nil_config_is_empty_and_a_non_object_is_an_error() -> None:
    assert config_of(ModelWorker.model_validate({"type": "server"})) == {}
    with pytest.raises(ExpandError, match="expected a JSON object"):
        config_of(ModelWorker.model_validate({"type": "server", "config": ["--port", "1"]}))


@settings(max_examples=200, deadline=None, database=None)
@given(st.dictionaries(st.from_regex(r"[a-z][a-z_-]{0,12}", fullmatch=True), st.integers(-(10**12), 10**12)))
def test_integers_never_render_in_exponent_form(config: dict[str, int]) -> None:
    tokens = config_flags(config)
    values = tokens[1::2]
    assert values == [str(config[k]) for k in sorted(config)]
    assert [t.removeprefix("--") for t in tokens[::2]] == [k.replace("_", "-") for k in sorted(config)]


@pytest.mark.parametrize(
    ("workers", "port"),
    [
        ([worker(replicas=1)], 8000),
        ([worker(replicas=1, config={"port": 9000})], 9000),
        ([worker(replicas=1, config={"port": "9000"})], 9000),
        ([worker("prefill", config={"port": 9000}), worker("decode", config={"port": "9000"})], 9000),
        ([worker("prefill", config={"port": 9000}), worker("controller", config={"port": 1})], 9000),
    ],
)
def test_engine_port(workers: list[dict[str, Any]], port: int) -> None:
    type_ = "vLLM" if workers[0]["type"] == "server" else "vLLMDisaggregated"
    assert engine_port(parse(booster_doc(*workers, type_=type_)).spec.backend) == port


@pytest.mark.parametrize(
    ("env", "skip"),
    [
        ([], False),
        ([{"name": "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL", "value": "1"}], True),
        ([{"name": "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL", "value": "True"}], True),
        ([{"name": "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL", "value": "yes"}], False),
        ([{"name": "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL", "value": "0"}], False),
    ],
)
def test_skip_knob_is_go_parse_bool(env: list[dict[str, Any]], skip: bool) -> None:
    backend = parse(booster_doc(env=env)).spec.backend
    assert knobs_of(backend, 8000).skip_dependency_install is skip


def test_device_count() -> None:
    both = ModelWorker.model_validate(
        {"type": "server", "resources": {"limits": {"nvidia.com/gpu": 2, "huawei.com/ascend-1980": "3"}}}
    )
    assert device_count(both) == 5
    assert device_count(ModelWorker.model_validate({"type": "server"})) == 0
