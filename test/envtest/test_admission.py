"""The admission webhooks live against a real kube-apiserver, with the generated CRDs installed.

The webhook server runs in-process on 127.0.0.1 with a throw-away certificate; copies of the manifests'
Validating/MutatingWebhookConfigurations point at it by ``url`` (with the ``caBundle``) and only select this
module's namespace, so no other test is affected. Then:

* every entry of the invalid-manifest corpus is rejected with the expected field path and message, whether the
  schema, a CEL rule or the webhook catches it (where the API server words it differently, :data:`SERVER_EXPECT`
  holds the server's expectation for that entry);
* the valid manifests are accepted and stored with the defaults the seed documents;
* the mutating webhook's defaults equal the CRD's;
* hypothesis: documents the models accept round-trip unchanged except for defaults;
* the manager's own certificate handling (Secret, rotation, ``caBundle``) works against the API server.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import importlib.util
import ssl
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kthena_py.api import AutoscalingPolicy, ModelBooster, ModelServing, to_dict
from kthena_py.api.crdgen import build_crds
from kthena_py.api.validation import validate_document
from kthena_py.controllers.admission import (
    MUTATING_CONFIGURATION,
    VALIDATING_CONFIGURATION,
    add_handlers,
    register,
    service_hosts,
)
from kthena_py.controllers.admission.defaults import autoscaling_policy_patch
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELBOOSTERS, MODELSERVINGS
from kthena_py.kube import ApiError, Invalid, KubeClient, NotFound, ResourceType
from kthena_py.kube.resources import MUTATING_WEBHOOKS, NAMESPACES, SECRETS, VALIDATING_WEBHOOKS
from kthena_py.runtime.certs import CertificateManager, generate
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.webhook import WebhookServer
from kthena_py.testing.controlplane import EnvTest

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_MANIFESTS = ROOT / "manifests" / "webhook"
RESOURCES = {"ModelServing": MODELSERVINGS, "AutoscalingPolicy": AUTOSCALINGPOLICIES, "ModelBooster": MODELBOOSTERS}
TEST_LABEL = "kthena-py/admission-test"


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


corpus = _load_module("kthena_py_test_corpus", ROOT / "test" / "unit" / "api" / "corpus.py")
helpers = _load_module("kthena_py_test_helpers", ROOT / "test" / "unit" / "api" / "helpers.py")
CASES = corpus.load_invalid_cases()
QUANTITY = "in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))"

#: Where the API server legitimately reports an entry differently from the offline validators:
#: name -> (field path, message fragment); a path of None matches the fragment against the Status message
#: (errors without field causes: strict decoding, wrong apiVersion).
SERVER_EXPECT: dict[str, tuple[str | None, str]] = {
    # Schema errors under a map render the key as a path segment (".kv_cache"), CEL errors as "[kv_cache]".
    "asp-pod-port-maximum": (
        "spec.homogeneousTarget.target.metricSources.kv_cache.pod.port",
        "should be less than or equal to 65535",
    ),
    "asp-pod-uri-pattern": ("spec.homogeneousTarget.target.metricSources.kv_cache.pod.uri", "should match '^/'"),
    "asp-prometheus-server-missing": (
        "spec.homogeneousTarget.target.metricSources.podinfo_rps.prometheus.serverURL",
        "Required value",
    ),
    "asp-prometheus-server-not-uri": (
        "spec.homogeneousTarget.target.metricSources.podinfo_rps.prometheus.serverURL",
        'in body must be of type uri: "prometheus"',
    ),
    "ms-min-role-replicas-type": (
        "spec.template.gangPolicy.minRoleReplicas.prefill",
        'spec.template.gangPolicy.minRoleReplicas.prefill in body must be of type integer: "string"',
    ),
    # The server checks quantities with the CRD pattern instead of parsing them.
    "asp-target-value-not-quantity": ("spec.metrics[0].targetValue", QUANTITY),
    "ms-resource-quantity": (
        "spec.template.roles[1].entryTemplate.spec.containers[0].resources.requests.memory",
        QUANTITY,
    ),
    # CEL rules run before the webhook and say it their way.
    "asp-two-targets": (
        "spec",
        "at most one of homogeneousTarget, heterogeneousTarget, or disaggregatedTarget may be set",
    ),
    "ms-role-name-duplicate": ("spec.template.roles", "roles name must be unique"),
    "ms-update-gang-policy-removed": ("spec.template", "Invalid value: gangPolicy is required once set"),
    # The scale subresource's replicas path is checked by the server itself.
    "ms-replicas-negative": (".spec.replicas", "Invalid value: -1: should be a non-negative integer"),
    # Unknown fields are refused by strict field validation while decoding, before any field error.
    "ms-unknown-role-field": (None, 'unknown field "spec.template.roles[0].image"'),
    "ms-unknown-template-metadata-field": (None, 'unknown field "spec.template.roles[0].entryTemplate.metadata.name"'),
    "ms-snake-case-key": (None, 'unknown field "spec.template.roles[1].worker_replicas"'),
    "ms-unknown-pod-field": (
        None,
        'unknown field "spec.template.roles[0].entryTemplate.spec.containers[0].imagePullPolice"',
    ),
    "ms-unknown-worker-pod-field": (
        None,
        'unknown field "spec.template.roles[0].workerTemplate.spec.securityContext.runAsUsr"',
    ),
    "asp-unknown-field-in-a-map-value": (
        None,
        'unknown field "spec.homogeneousTarget.target.metricSources.kv_cache.pod.portt"',
    ),
    # The request goes to the v1alpha1 endpoint; the server compares the kind and apiVersion with it.
    "doc-api-version": (None, 'ModelServing in version "v1" cannot be handled as a ModelServing'),
    "doc-kind": ("kind", 'Invalid value: "ModelServer": must be ModelServing'),
}


@dataclass
class Admission:
    """The running webhook and where it applies."""

    client: KubeClient
    namespace: str
    plain_namespace: str
    server: WebhookServer


def _webhook_configurations(label: str, port: int, ca_bundle: bytes) -> list[tuple[ResourceType, dict[str, Any]]]:
    """The manifests' webhook configurations, re-pointed at the in-process server and this module's namespace."""
    found = []
    for file, resource in (
        ("validating_webhook_configuration.yaml", VALIDATING_WEBHOOKS),
        ("mutating_webhook_configuration.yaml", MUTATING_WEBHOOKS),
    ):
        config = yaml.safe_load((WEBHOOK_MANIFESTS / file).read_text())
        config["metadata"] = {"name": f"{config['metadata']['name']}-{label}"}
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca_bundle).decode(),
            }
            hook["namespaceSelector"] = {"matchLabels": {TEST_LABEL: label}}
        found.append((resource, config))
    return found


BROKEN_BOOSTER = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelBooster",
    "metadata": {"name": "probe"},
    "spec": {
        "backend": {
            "name": "b",
            "type": "vLLM",
            "modelURI": "hf://a/b",
            "replicas": 1,
            "workers": [{"type": "server", "image": "a b"}],
        }
    },
}


async def _wait_for_webhook(client: KubeClient, namespace: str) -> None:
    """The API server picks up new webhook configurations asynchronously: wait until ours denies."""
    for _ in range(300):
        try:
            await client.create(MODELBOOSTERS, BROKEN_BOOSTER, namespace, dry_run=True)
        except Invalid as exc:
            if "admission webhook" in exc.message:
                return
        await asyncio.sleep(0.1)
    raise AssertionError("the webhook never took effect")


@pytest.fixture(scope="module")
async def admission(envtest: EnvTest) -> AsyncIterator[Admission]:
    envtest.install_crds(list(build_crds().values()))
    label = uuid.uuid4().hex[:8]
    client = await KubeClient.from_kubeconfig(str(envtest.kubeconfig_path))
    namespace, plain = f"admission-{label}", f"admission-plain-{label}"
    await client.create(NAMESPACES, {"metadata": {"name": namespace, "labels": {TEST_LABEL: label}}})
    await client.create(NAMESPACES, {"metadata": {"name": plain}})
    certs = generate(["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
    pair = (certs.serving.cert, certs.serving.key)
    server = WebhookServer(lambda: pair, host="127.0.0.1", port=0)
    add_handlers(server)
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 30)
    assert server.port is not None
    configs = _webhook_configurations(label, server.port, certs.ca_bundle)
    try:
        for resource, config in configs:
            await client.create(resource, config)
        await _wait_for_webhook(client, namespace)
        yield Admission(client, namespace, plain, server)
    finally:
        for resource, config in configs:
            try:
                await client.delete(resource, config["metadata"]["name"])
            except NotFound:
                pass
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for name in (namespace, plain):
            try:
                await client.delete(NAMESPACES, name)
            except NotFound:
                pass
        await client.close()


def _place(document: dict[str, Any], namespace: str, name: str | None) -> dict[str, Any]:
    document = copy.deepcopy(document)
    metadata = document.setdefault("metadata", {})
    metadata["namespace"] = namespace
    if name is not None:
        metadata["name"] = name
    metadata.pop("generation", None)
    return document


async def _create(client: KubeClient, resource: ResourceType, document: dict[str, Any], namespace: str) -> Any:
    return await client.request("POST", resource.path(namespace), body=document, query={"fieldValidation": "Strict"})


def _matches(error: ApiError, path: str | None, fragment: str) -> bool:
    if path is None:
        return fragment in error.message
    causes = error.causes if isinstance(error, Invalid) else []
    return any(cause.field == path and fragment in f"{cause.field}: {cause.message}" for cause in causes)


def _describe(error: ApiError) -> str:
    causes = error.causes if isinstance(error, Invalid) else []
    lines = [f"{error.status} {error.reason}: {error.message}"]
    lines += [f"  cause {cause.reason} {cause.field}: {cause.message}" for cause in causes]
    return "\n".join(lines)


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert set(SERVER_EXPECT) <= {case.name for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_invalid_manifest_is_rejected_by_the_api_server(admission: Admission, case: Any) -> None:
    new, old = case.documents()
    name = None if case.name == "ms-generated-name-too-long" else f"c-{uuid.uuid4().hex[:8]}"
    new = _place(new, admission.namespace, name)
    resource = RESOURCES[corpus.load_base(case.base)["kind"]]
    path, fragment = SERVER_EXPECT.get(case.name, (case.expect_path, case.expect_message))
    with pytest.raises(ApiError) as caught:
        if old is None:
            await _create(admission.client, resource, new, admission.namespace)
        else:
            stored = await _create(
                admission.client, resource, _place(old, admission.namespace, name), admission.namespace
            )
            new["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
            await admission.client.request(
                "PUT",
                resource.path(admission.namespace, new["metadata"]["name"]),
                body=new,
                query={"fieldValidation": "Strict"},
            )
    assert _matches(caught.value, path, fragment), f"want {path}: {fragment}\ngot {_describe(caught.value)}"


def _expected(document: dict[str, Any]) -> dict[str, Any]:
    """What the API server should store: the document plus the CRD (and mutating webhook) defaults."""
    kind = document["kind"]
    if kind == "AutoscalingPolicy":
        document = copy.deepcopy(document)
        for operation in autoscaling_policy_patch(document):
            parent = document
            *parts, last = operation["path"].strip("/").split("/")
            for part in parts:
                parent = parent[part]
            parent[last] = operation["value"]
    model = {"ModelServing": ModelServing, "AutoscalingPolicy": AutoscalingPolicy, "ModelBooster": ModelBooster}[kind]
    return to_dict(model.model_validate(document, by_alias=True, by_name=False), with_defaults=True)


@pytest.mark.parametrize("base", corpus.base_names())
async def test_valid_manifest_is_stored_with_the_defaults(admission: Admission, base: str) -> None:
    document = _place(corpus.load_base(base), admission.namespace, None)
    stored = await _create(admission.client, RESOURCES[document["kind"]], document, admission.namespace)
    expected = _expected(document)
    assert helpers.contains(stored["spec"], expected["spec"]), (stored["spec"], expected["spec"])
    assert helpers.contains(stored["spec"], document["spec"])


async def test_seed_defaults_are_filled_in(admission: Admission) -> None:
    document = _place(corpus.load_base("modelserving-pd"), admission.namespace, "defaults")
    del document["spec"]["replicas"], document["spec"]["schedulerName"], document["spec"]["recoveryPolicy"]
    del document["spec"]["revisionHistoryLimit"], document["spec"]["template"]["restartGracePeriodSeconds"]
    del document["spec"]["plugins"][0]["type"], document["spec"]["rolloutStrategy"]["updateMethod"]
    del document["spec"]["rolloutStrategy"]["type"], document["spec"]["template"]["roles"][1]["replicas"]
    document["spec"]["template"]["networkTopology"]["groupPolicy"].pop("mode")
    document["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"].pop("maxUnavailable")
    document["spec"]["rolloutStrategy"]["evictionStrategy"].pop("protectionLevel")
    stored = (await _create(admission.client, MODELSERVINGS, document, admission.namespace))["spec"]
    assert (stored["replicas"], stored["schedulerName"], stored["recoveryPolicy"]) == (1, "volcano", "RoleRecreate")
    assert stored["revisionHistoryLimit"] == 10 and stored["template"]["restartGracePeriodSeconds"] == 0
    assert stored["plugins"][0]["type"] == "BuiltIn"
    rollout = stored["rolloutStrategy"]
    assert (rollout["type"], rollout["updateMethod"]) == ("ServingGroupRollingUpdate", "Recreate")
    assert rollout["rollingUpdateConfiguration"]["maxUnavailable"] == 1
    assert rollout["evictionStrategy"]["protectionLevel"] == "ServingGroup"
    roles = stored["template"]["roles"]
    assert roles[1]["replicas"] == 1 and [role["maxUnavailable"] for role in roles] == [1, 1]
    assert stored["template"]["networkTopology"]["groupPolicy"]["mode"] == "hard"
    # A ModelBooster worker's type and a pod metric source's uri/port.
    booster = _place(corpus.load_base("modelbooster-pd"), admission.namespace, "defaults")
    booster["spec"]["backend"]["workers"][0].pop("type")
    booster["spec"]["backend"]["workers"][0]["config"].pop("kv-transfer-config")
    booster["spec"]["backend"]["workers"][1]["config"].pop("kv-transfer-config")
    booster["spec"]["backend"]["workers"] = booster["spec"]["backend"]["workers"][1:]
    booster["spec"]["backend"]["type"] = "vLLMDisaggregated"
    stored_booster = await _create(admission.client, MODELBOOSTERS, booster, admission.namespace)
    assert stored_booster["spec"]["backend"]["workers"][0]["type"] == "decode"
    policy = _place(corpus.load_base("autoscalingpolicy-disaggregated"), admission.namespace, "defaults")
    stored_policy = (await _create(admission.client, AUTOSCALINGPOLICIES, policy, admission.namespace))["spec"]
    source = stored_policy["disaggregatedTarget"]["roles"]["decode"]["metricSources"]["num_requests_waiting"]["pod"]
    assert source == {"port": 8000, "uri": "/metrics"}
    assert stored_policy["tolerancePercent"] == 10


async def test_mutating_defaults_agree_with_the_crd_defaults(admission: Admission) -> None:
    base = corpus.load_base("autoscalingpolicy-heterogeneous")
    spelled_out = copy.deepcopy(base)
    spelled_out["spec"]["behavior"] = {"scaleUp": {"stablePolicy": {}, "panicPolicy": {}}, "scaleDown": {}}
    # Without the webhook (plain namespace) the CRD fills the empty sections ...
    crd_only = await _create(
        admission.client,
        AUTOSCALINGPOLICIES,
        _place(spelled_out, admission.plain_namespace, "spelled"),
        admission.plain_namespace,
    )
    # ... with it, the mutating webhook adds the sections the policy lacks.
    mutated = await _create(
        admission.client, AUTOSCALINGPOLICIES, _place(base, admission.namespace, "mutated"), admission.namespace
    )
    assert mutated["spec"]["behavior"] == crd_only["spec"]["behavior"]
    assert mutated["spec"]["behavior"]["scaleUp"]["panicPolicy"]["panicModeHold"] == "60s"
    partial = copy.deepcopy(base)
    partial["spec"]["behavior"] = {"scaleUp": {"stablePolicy": {"instances": 4, "period": "1m"}}}
    stored = await _create(
        admission.client, AUTOSCALINGPOLICIES, _place(partial, admission.namespace, "partial"), admission.namespace
    )
    behavior = stored["spec"]["behavior"]
    assert behavior["scaleUp"]["stablePolicy"] == {"instances": 4, "percent": 100, "period": "1m", "selectPolicy": "Or"}
    assert behavior["scaleUp"]["panicPolicy"] == crd_only["spec"]["behavior"]["scaleUp"]["panicPolicy"]
    assert behavior["scaleDown"] == crd_only["spec"]["behavior"]["scaleDown"]


async def test_update_is_checked_against_the_stored_object(admission: Admission) -> None:
    document = _place(corpus.load_base("modelserving-role-rolling"), admission.namespace, "updates")
    stored = await _create(admission.client, MODELSERVINGS, document, admission.namespace)
    # A valid change goes through; then a role rename is refused (CEL and webhook agree on the message).
    stored["spec"]["template"]["roles"][0]["replicas"] = 3
    stored["spec"]["rolloutStrategy"]["evictionStrategy"]["roleMinAvailable"]["prefill"] = 2
    updated = await admission.client.replace(MODELSERVINGS, stored, admission.namespace)
    updated["spec"]["template"]["roles"][0]["name"] = "prefill2"
    with pytest.raises(Invalid) as caught:
        await admission.client.replace(MODELSERVINGS, updated, admission.namespace)
    assert _matches(
        caught.value, "spec.template.roles", "role names are immutable; existing role names are [prefill decode]"
    )
    # Metadata-only updates and status writes are not blocked.
    fresh = await admission.client.get(MODELSERVINGS, "updates", admission.namespace)
    fresh["metadata"]["labels"] = {"team": "llm"}
    await admission.client.replace(MODELSERVINGS, fresh, admission.namespace)
    await admission.client.patch(
        MODELSERVINGS, "updates", {"status": {"replicas": 1}}, admission.namespace, subresource="status"
    )


async def test_lora_annotations_are_checked_on_create_and_on_a_metadata_only_update(admission: Admission) -> None:
    import json

    from kthena_py.vocab.labels import LORA_ADAPTERS

    path = f"metadata.annotations[{LORA_ADAPTERS}]"
    document = _place(corpus.load_base("modelserving-role-rolling"), admission.namespace, "lora")
    document["metadata"]["annotations"] = {LORA_ADAPTERS: json.dumps([{"name": "-fin", "source": "hf://a/fin"}])}
    with pytest.raises(Invalid) as caught:
        await _create(admission.client, MODELSERVINGS, document, admission.namespace)
    assert _matches(caught.value, f"{path}[0].name", "is not a valid adapter name"), _describe(caught.value)
    document["metadata"]["annotations"] = {LORA_ADAPTERS: json.dumps([{"name": "fin", "source": "hf://a/fin"}])}
    await _create(admission.client, MODELSERVINGS, document, admission.namespace)
    twice = json.dumps([{"name": "fin", "source": "hf://a/fin"}, {"name": "fin", "source": "hf://a/fin2"}])
    with pytest.raises(Invalid) as caught:
        await admission.client.patch(
            MODELSERVINGS, "lora", {"metadata": {"annotations": {LORA_ADAPTERS: twice}}}, admission.namespace
        )
    assert _matches(caught.value, f"{path}[1].name", "is listed twice"), _describe(caught.value)


# -- hypothesis: what the models accept round-trips, changed only by defaults ---------------------------

ROLE_NAMES = ["prefill", "decode", "router", "cache"]
images = st.sampled_from(["nginx", "vllm/vllm-openai:v0.10.1", "busybox:1.36"])
small = st.integers(0, 3)
labels = st.dictionaries(st.sampled_from(["app", "tier", "team"]), st.sampled_from(["a", "b-1", "x.y"]), max_size=2)


def _template(name: str) -> st.SearchStrategy[dict[str, Any]]:
    container = st.fixed_dictionaries(
        {"name": st.just(name), "image": images},
        optional={
            "args": st.lists(st.sampled_from(["--a", "1", "x y"]), max_size=2),
            "resources": st.fixed_dictionaries(
                {"requests": st.fixed_dictionaries({"cpu": st.sampled_from(["1", "500m", 2])})}
            ),
        },
    )
    return st.fixed_dictionaries(
        {"spec": st.fixed_dictionaries({"containers": st.lists(container, min_size=1, max_size=1)})},
        optional={"metadata": st.fixed_dictionaries({}, optional={"labels": labels, "annotations": labels})},
    )


@st.composite
def modelservings(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(ROLE_NAMES), min_size=1, max_size=4, unique=True))
    roles = []
    for name in names:
        role: dict[str, Any] = {"name": name, "entryTemplate": draw(_template("engine"))}
        workers = draw(small)
        role["workerReplicas"] = workers
        if workers or draw(st.booleans()):
            role["workerTemplate"] = draw(_template("worker"))
        if draw(st.booleans()):
            role["replicas"] = draw(st.integers(1, 3))
        roles.append(role)
    template: dict[str, Any] = {"roles": roles}
    if draw(st.booleans()):
        template["restartGracePeriodSeconds"] = draw(st.integers(0, 60))
    if draw(st.booleans()):
        template["gangPolicy"] = {"minRoleReplicas": {names[0]: 1}}
    if draw(st.booleans()):
        template["networkTopology"] = {
            "groupPolicy": draw(
                st.fixed_dictionaries(
                    {}, optional={"mode": st.sampled_from(["hard", "soft"]), "highestTierAllowed": small}
                )
            )
        }
    spec: dict[str, Any] = {"template": template}
    optional = {
        "replicas": st.integers(0, 4),
        "schedulerName": st.sampled_from(["volcano", "default-scheduler"]),
        "recoveryPolicy": st.sampled_from(["RoleRecreate", "None", "ServingGroupRecreate"]),
        "revisionHistoryLimit": st.integers(0, 20),
        "plugins": st.lists(st.fixed_dictionaries({"name": st.just("p1")}, optional={"config": labels}), max_size=1),
        "rolloutStrategy": st.fixed_dictionaries(
            {},
            optional={
                "updateMethod": st.sampled_from(["Recreate", "InPlace"]),
                "rollingUpdateConfiguration": st.fixed_dictionaries(
                    {},
                    optional={
                        "maxUnavailable": st.sampled_from([1, 2, "50%"]),
                        "maxSurge": st.sampled_from([0, 1, "25%"]),
                    },
                ),
            },
        ),
    }
    spec.update(draw(st.fixed_dictionaries({}, optional=optional)))
    return {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "metadata": {}, "spec": spec}


stable_policies = st.fixed_dictionaries(
    {},
    optional={
        "instances": small,
        "percent": st.integers(0, 1000),
        "period": st.sampled_from(["15s", "1m", "0s"]),
        "selectPolicy": st.sampled_from(["Or", "And"]),
        "stabilizationWindow": st.sampled_from(["0s", "5m"]),
    },
)


@st.composite
def autoscalingpolicies(draw: st.DrawFn) -> dict[str, Any]:
    minimum = draw(small)
    target = {
        "minReplicas": minimum,
        "maxReplicas": minimum + draw(st.integers(1, 5)),
        "target": {
            "targetRef": {"kind": "ModelServing", "name": "ms"},
            "metricSources": {
                "rps": {
                    "pod": draw(
                        st.fixed_dictionaries({}, optional={"port": st.integers(1, 65535), "uri": st.just("/stats")})
                    )
                }
            },
        },
    }
    behavior = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "scaleDown": stable_policies,
                "scaleUp": st.fixed_dictionaries(
                    {},
                    optional={
                        "stablePolicy": stable_policies,
                        "panicPolicy": st.fixed_dictionaries(
                            {},
                            optional={"percent": st.integers(0, 1000), "panicThresholdPercent": st.integers(110, 1000)},
                        ),
                    },
                ),
            },
        )
    )
    spec: dict[str, Any] = {
        "metrics": [{"name": "rps", "targetValue": draw(st.sampled_from(["10", "500m", 3]))}],
        "homogeneousTarget": target,
    }
    if draw(st.booleans()):
        spec["behavior"] = behavior
    if draw(st.booleans()):
        spec["tolerancePercent"] = draw(st.integers(0, 100))
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {},
        "spec": spec,
    }


@st.composite
def modelboosters(draw: st.DrawFn) -> dict[str, Any]:
    worker = draw(
        st.fixed_dictionaries(
            {"image": images},
            optional={
                "replicas": small,
                "pods": small,
                "config": st.fixed_dictionaries({}, optional={"port": st.integers(1, 65535)}),
            },
        )
    )
    backend = {
        "name": "backend",
        "type": "vLLM",
        "modelURI": "hf://Qwen/Qwen2.5",
        "replicas": draw(small),
        "workers": [worker],
    }
    if draw(st.booleans()):
        backend["cacheURI"] = "hostpath://tmp/cache"
    spec: dict[str, Any] = {"backend": backend}
    spec.update(draw(st.fixed_dictionaries({}, optional={"name": st.just("qwen"), "owner": st.just("team")})))
    return {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelBooster", "metadata": {}, "spec": spec}


@settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(document=st.one_of(modelservings(), autoscalingpolicies(), modelboosters()))
async def test_accepted_documents_round_trip_except_for_defaults(
    admission: Admission, document: dict[str, Any]
) -> None:
    assume(validate_document(document) == [])
    document = _place(document, admission.namespace, f"rt-{uuid.uuid4().hex[:10]}")
    stored = await _create(admission.client, RESOURCES[document["kind"]], document, admission.namespace)
    assert stored["spec"] == _expected(document)["spec"]


# -- the manager's own certificate ----------------------------------------------------------------------


@pytest.fixture
def guarded_configurations(envtest: EnvTest) -> Iterator[None]:
    """Install the manifests' webhook configurations with a selector that matches no namespace."""
    paths = {
        "validatingwebhookconfigurations": WEBHOOK_MANIFESTS / "validating_webhook_configuration.yaml",
        "mutatingwebhookconfigurations": WEBHOOK_MANIFESTS / "mutating_webhook_configuration.yaml",
    }
    created = []
    for plural, path in paths.items():
        config = yaml.safe_load(path.read_text())
        for hook in config["webhooks"]:
            hook["namespaceSelector"] = {"matchLabels": {"kthena-py/never": "selected"}}
        collection = f"/apis/admissionregistration.k8s.io/v1/{plural}"
        envtest.client.raw("DELETE", f"{collection}/{config['metadata']['name']}")
        envtest.client.create(collection, config)
        created.append(f"{collection}/{config['metadata']['name']}")
    yield
    for path in created:
        envtest.client.raw("DELETE", path)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now


async def _ca_bundles(client: KubeClient) -> set[str]:
    bundles = set()
    for resource, name in (
        (VALIDATING_WEBHOOKS, VALIDATING_CONFIGURATION),
        (MUTATING_WEBHOOKS, MUTATING_CONFIGURATION),
    ):
        config = await client.get(resource, name)
        bundles.update(hook["clientConfig"].get("caBundle", "") for hook in config["webhooks"])
    return bundles


async def test_certificate_manager_shares_rotates_and_injects(
    kube: KubeClient, namespace: str, guarded_configurations: None
) -> None:
    clock = Clock()
    day = datetime.timedelta(days=1)

    def replica() -> CertificateManager:
        return CertificateManager(
            kube,
            namespace=namespace,
            secret_name="webhook-cert",
            hosts=service_hosts(namespace),
            validating_webhooks=[VALIDATING_CONFIGURATION],
            mutating_webhooks=[MUTATING_CONFIGURATION],
            now=clock,
            cert_validity=30 * day,
            ca_validity=365 * day,
            rotate_before=10 * day,
        )

    first, second = replica(), replica()
    created = await asyncio.gather(first.run_once(), second.run_once())
    assert created == [None, None]
    assert first.current() == second.current() is not None, "racing replicas must end up with one certificate"
    secret = await kube.get(SECRETS, "webhook-cert", namespace)
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert await _ca_bundles(kube) == {secret["data"]["ca.crt"]}
    # Nothing to do while the certificate is fresh.
    version = secret["metadata"]["resourceVersion"]
    await first.run_once()
    assert (await kube.get(SECRETS, "webhook-cert", namespace))["metadata"]["resourceVersion"] == version
    # 21 days later the serving certificate is renewed by one replica, with the same CA; the other adopts it.
    clock.now += 21 * day
    before = first.certificates
    await first.run_once()
    await second.run_once()
    assert first.certificates is not None and before is not None
    assert first.certificates.serving != before.serving and first.certificates.ca == before.ca
    assert second.current() == first.current()
    assert await _ca_bundles(kube) == {base64.b64encode(before.ca_bundle).decode()}
    # Near the CA's end a new CA is made; the bundle trusts both until the old one expires.
    clock.now += 300 * day
    await first.run_once()
    renewed = first.certificates
    assert renewed is not None and renewed.ca != before.ca
    bundle = base64.b64decode(next(iter(await _ca_bundles(kube))))
    assert renewed.ca.cert in bundle and before.ca.cert in bundle
    # A broken Secret is replaced.
    await kube.patch(SECRETS, "webhook-cert", {"data": {"tls.crt": base64.b64encode(b"junk").decode()}}, namespace)
    await second.run_once()
    assert second.current() is not None and second.current() != (b"junk", renewed.serving.key)


async def test_register_serves_the_managed_certificate(
    kube: KubeClient, namespace: str, guarded_configurations: None
) -> None:
    manager = Manager(
        kube, ManagerOptions(metrics_bind_address="0", health_probe_bind_address="127.0.0.1:0", namespace=namespace)
    )
    server = register(manager, 0, None, "self", bind_address="127.0.0.1", namespace=namespace)
    assert server is None, "port 0 disables the webhooks"
    server = register(manager, 1, None, "self", bind_address="127.0.0.1", namespace=namespace)
    assert server is not None
    server.requested_port = 0  # let the OS pick
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        for _ in range(600):
            if server.serving:
                break
            await asyncio.sleep(0.05)
        assert server.serving and server.port
        secret = await kube.get(SECRETS, "kthena-py-webhook-server-cert", namespace)
        ca = base64.b64decode(secret["data"]["ca.crt"])
        for _ in range(100):
            if await _ca_bundles(kube) == {secret["data"]["ca.crt"]}:
                break
            await asyncio.sleep(0.05)
        assert await _ca_bundles(kube) == {secret["data"]["ca.crt"]}
        context = ssl.create_default_context(cadata=ca.decode())
        host = service_hosts(namespace)[0]
        _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=context, server_hostname=host)
        writer.close()
        await writer.wait_closed()
        assert "webhook" in manager.probes._ready_checks and manager.probes._ready_checks["webhook"]()
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
