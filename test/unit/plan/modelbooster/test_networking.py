"""The ModelServer and ModelRoute of a booster (modelbooster.md sections 5, 6 and 10), and the KV connector rules."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.plan.modelbooster import ExpandError, expand
from kthena_py.plan.modelbooster.networking import build_modelserver

from .builders import UID, booster_doc, parse, worker


def _kv(connector: str | None, role: str) -> dict[str, Any]:
    if connector is None:
        return {}
    return {"kv-transfer-config": f'{{"kv_connector":"{connector}","kv_role":"{role}"}}'}


def pd(prefill: dict[str, Any], decode: dict[str, Any], *extra: dict[str, Any]) -> dict[str, Any]:
    workers = [worker("prefill", replicas=1, config=prefill), worker("decode", replicas=1, config=decode), *extra]
    return booster_doc(*workers, type_="vLLMDisaggregated", name="ds", backend="pd")


def test_modelserver_model_from_served_model_name_else_the_booster_name() -> None:
    named = booster_doc(worker(replicas=1, config={"served-model-name": "deepseek-v3"}), name="ds")
    assert expand(parse(named)).modelserver["spec"]["model"] == "deepseek-v3"
    assert expand(parse(booster_doc(name="ds"))).modelserver["spec"]["model"] == "ds"
    not_a_string = booster_doc(worker(replicas=1, config={"served-model-name": 7}), name="ds")
    assert build_modelserver(parse(not_a_string))["spec"]["model"] == "ds"
    # PD: the decode worker's name counts, the prefill worker's does not.
    assert expand(parse(pd({"served-model-name": "p"}, {}))).modelserver["spec"]["model"] == "ds"
    assert expand(parse(pd({}, {"served-model-name": "d"}))).modelserver["spec"]["model"] == "d"


def test_modelserver_aggregated() -> None:
    spec = expand(parse(booster_doc(worker(replicas=1, config={"port": 9100})))).modelserver["spec"]
    assert spec == {
        "model": "mb",
        "inferenceEngine": "vLLM",
        "workloadSelector": {"matchLabels": {"workload.serving.volcano.sh/model-uid": UID}},
        "workloadPort": {"port": 9100},
        "trafficPolicy": {"retry": {"attempts": 5, "retryInterval": "0s"}},
    }


def test_modelserver_pd_group_and_connector() -> None:
    spec = expand(parse(pd(_kv("NixlConnector", "kv_producer"), _kv("NixlConnector", "kv_both")))).modelserver["spec"]
    assert spec["workloadSelector"]["pdGroup"] == {
        "groupKey": "modelserving.volcano.sh/group-name",
        "prefillLabels": {"modelserving.volcano.sh/role": "prefill"},
        "decodeLabels": {"modelserving.volcano.sh/role": "decode"},
    }
    assert spec["kvConnector"] == {"type": "nixl"}
    assert "kvConnector" not in expand(parse(pd({}, {}))).modelserver["spec"]


def test_modelserver_bad_type() -> None:
    booster = parse(booster_doc())
    backend = booster.spec.backend.model_copy(update={"type": "SGLang"})
    forged = booster.model_copy(update={"spec": booster.spec.model_copy(update={"backend": backend})})
    with pytest.raises(ExpandError, match=r"^not support SGLang backend yet, please use vLLM backend$"):
        build_modelserver(forged)


_P, _D = "kv_producer", "kv_consumer"
KV_CASES: list[tuple[str, dict[str, Any], dict[str, Any], str | None]] = [
    ("none", {}, {}, None),
    ("mooncake", _kv("MooncakeConnector", _P), _kv("MooncakeConnector", _D), "mooncake"),
    ("mooncake-v1", _kv("MooncakeConnectorV1", _P), _kv("MooncakeConnectorV1", _D), "mooncake"),
    ("mooncake-mixed", _kv("MooncakeConnector", _P), _kv("MooncakeConnectorV1", _D), "mooncake"),
    ("nixl", _kv("NixlConnector", _P), _kv("NixlConnector", _D), "nixl"),
    ("lmcache", _kv("LMCacheConnectorV1", _P), _kv("LMCacheConnectorV1", _D), "lmcache"),
    ("both-roles", _kv("NixlConnector", "kv_both"), _kv("NixlConnector", "kv_both"), "nixl"),
    (
        "underscore-key",
        {"kv_transfer_config": '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'},
        _kv("NixlConnector", _D),
        "nixl",
    ),
]
KV_ERRORS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    (
        "decode-only",
        {},
        _kv("NixlConnector", _D),
        'decode worker specifies kv_connector "NixlConnector" but the prefill worker has no kv-transfer-config; '
        "prefill and decode must configure the same kv connector",
    ),
    (
        "prefill-only",
        _kv("NixlConnector", _P),
        {},
        'prefill worker specifies kv_connector "NixlConnector" but the decode worker has no kv-transfer-config; '
        "prefill and decode must configure the same kv connector",
    ),
    (
        "mismatch",
        _kv("NixlConnector", _P),
        _kv("MooncakeConnector", _D),
        'kv_connector mismatch between prefill ("NixlConnector") and decode ("MooncakeConnector") workers; '
        "prefill and decode must use the same kv connector",
    ),
    (
        "not-a-string",
        {"kv-transfer-config": {"kv_connector": "NixlConnector"}},
        {},
        "worker prefill: kv-transfer-config must be a JSON string, got map[string]interface {}",
    ),
    (
        "no-connector",
        {"kv-transfer-config": '{"kv_role":"kv_producer"}'},
        {},
        "worker prefill: kv-transfer-config is set but kv_connector is missing",
    ),
    (
        "no-role",
        {"kv-transfer-config": '{"kv_connector":"NixlConnector"}'},
        {},
        "worker prefill: kv-transfer-config is set but kv_role is missing",
    ),
    (
        "unknown-connector",
        _kv("P2pConnector", _P),
        _kv("P2pConnector", _D),
        'worker prefill: unsupported kv_connector "P2pConnector" (supported: LMCacheConnectorV1, MooncakeConnector, '
        "MooncakeConnectorV1, NixlConnector)",
    ),
    (
        "prefill-consumer",
        _kv("NixlConnector", _D),
        _kv("NixlConnector", _D),
        'worker prefill: invalid kv_role "kv_consumer", expected one of [kv_producer, kv_both]',
    ),
    (
        "decode-producer",
        _kv("NixlConnector", _P),
        _kv("NixlConnector", _P),
        'worker decode: invalid kv_role "kv_producer", expected one of [kv_consumer, kv_both]',
    ),
]


@pytest.mark.parametrize(("prefill", "decode", "expected"), [c[1:] for c in KV_CASES], ids=[c[0] for c in KV_CASES])
def test_kv_connector_type(prefill: dict[str, Any], decode: dict[str, Any], expected: str | None) -> None:
    spec = expand(parse(pd(prefill, decode))).modelserver["spec"]
    assert spec.get("kvConnector") == (None if expected is None else {"type": expected})


@pytest.mark.parametrize(("prefill", "decode", "message"), [c[1:] for c in KV_ERRORS], ids=[c[0] for c in KV_ERRORS])
def test_kv_connector_errors(prefill: dict[str, Any], decode: dict[str, Any], message: str) -> None:
    with pytest.raises(ExpandError) as raised:
        build_modelserver(parse(pd(prefill, decode)))
    assert str(raised.value) == f"backend pd: {message}"


def test_duplicate_prefill_workers() -> None:
    doc = pd({}, {}, worker("prefill", replicas=1))
    with pytest.raises(ExpandError, match="found 2 prefill workers, expected at most 1"):
        build_modelserver(parse(doc))


def test_modelroute_golden_and_model_name() -> None:
    match = {"headers": {"x-tenant": {"exact": "gold"}}}
    route = expand(parse(booster_doc(name="qwen", spec={"name": "qwen2-5", "modelMatch": match}))).modelroute
    assert route["metadata"]["name"] == "qwen"
    assert route["spec"] == {
        "modelName": "qwen2-5",
        "rules": [{"name": "default", "modelMatch": match, "targetModels": [{"modelServerName": "qwen-backend1"}]}],
    }
    fallback = expand(parse(booster_doc(name="qwen"))).modelroute["spec"]
    assert fallback == {
        "modelName": "qwen",
        "rules": [{"name": "default", "targetModels": [{"modelServerName": "qwen-backend1"}]}],
    }
