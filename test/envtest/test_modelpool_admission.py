"""ModelPool on a real kube-apiserver: the CRD, the API server's CEL rules, and the webhook's rules across objects.

The webhook server runs in-process on 127.0.0.1 with a throw-away certificate and the test's client as its
lister (as the manager passes its own); copies of the manifests' ModelPool and AutoscalingPolicy webhooks point
at it by ``url`` and select only the test's namespace, so no other test is affected.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.controllers.admission import add_handlers
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELPOOLS
from kthena_py.kube import Invalid, KubeClient, NotFound
from kthena_py.kube.resources import NAMESPACES, VALIDATING_WEBHOOKS
from kthena_py.runtime.certs import generate
from kthena_py.runtime.webhook import WebhookServer
from kthena_py.testing.controlplane import EnvTest, find_kubectl
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
TEST_LABEL = "kthena-py.io/modelpool-test"


def _pool(name: str, *members: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {"name": name},
        "spec": {"members": [{"modelServingRef": {"name": member}} for member in members], **spec},
    }


def _policy(name: str, target: str | None = None, *, heterogeneous: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"metrics": [{"name": "kv_cache", "targetValue": "80"}]}
    if heterogeneous:
        spec["heterogeneousTarget"] = {
            "params": [
                {"target": {"targetRef": {"name": each}}, "minReplicas": 0, "maxReplicas": 2} for each in heterogeneous
            ]
        }
    else:
        spec["homogeneousTarget"] = {
            "target": {"targetRef": {"kind": "ModelServing", "name": target}},
            "minReplicas": 1,
            "maxReplicas": 3,
        }
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _causes(error: Invalid) -> dict[str, str]:
    return {cause.field: cause.message for cause in error.causes}


async def test_the_crd_is_served_with_its_short_name_defaults_and_columns(
    envtest: EnvTest, kube: KubeClient, namespace: str
) -> None:
    status, body = envtest.client.raw("GET", "/apis/serving.kthena-py.io/v1alpha1")
    assert status == 200
    resources = {r["name"]: r for r in body["resources"]}
    assert resources["modelpools"]["shortNames"] == ["mpool"] and resources["modelpools"]["categories"] == ["kthena"]
    assert resources["modelpools"]["singularName"] == "modelpool" and "modelpools/status" in resources
    stored = await kube.create(MODELPOOLS, _pool("gpu0", "llama", "qwen", default="llama"), namespace)
    assert {key: stored["spec"][key] for key in ("swapPolicy", "swapBudget", "slots")} == {
        "swapPolicy": "sticky",
        "swapBudget": "300s",
        "slots": 1,
    }
    status_body = {"phase": "Swapping", "residentMember": "llama", "pendingMember": "qwen"}
    await kube.patch(MODELPOOLS, "gpu0", {"status": status_body}, namespace, subresource="status")
    argv = ["--kubeconfig", str(envtest.kubeconfig_path), "get", "mpool", "-n", namespace]
    process = await asyncio.create_subprocess_exec(
        str(find_kubectl()), *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err
    header, row = out.decode().splitlines()[:2]
    assert header.split() == ["NAME", "RESIDENT", "PENDING", "PHASE", "SLOTS", "AGE"]
    assert row.split()[:5] == ["gpu0", "llama", "qwen", "Swapping", "1"]


async def test_the_api_server_alone_refuses_a_foreign_default_a_zero_budget_and_no_members(
    kube: KubeClient, namespace: str
) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("foreign", "a", default="b"), namespace)
    assert "must name a member of the pool" in _causes(caught.value)["spec.default"]
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("zero", "a", swapBudget="0s"), namespace)
    assert "must be a positive duration" in _causes(caught.value)["spec.swapBudget"]
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("empty"), namespace)
    assert "spec.members" in _causes(caught.value)
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("noslot", "a", slots=0), namespace)
    assert "spec.slots" in _causes(caught.value)


@pytest.fixture
async def webhook(envtest: EnvTest, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """The ModelPool and AutoscalingPolicy webhooks of manifests/webhook, in-process, for this namespace only."""
    label = uuid.uuid4().hex[:8]
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": {TEST_LABEL: label}}})
    certs = generate(["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
    pair = (certs.serving.cert, certs.serving.key)
    server = WebhookServer(lambda: pair, host="127.0.0.1", port=0)
    add_handlers(server, kube)
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 30)
    config = yaml.safe_load((ROOT / "manifests" / "webhook" / "validating_webhook_configuration.yaml").read_text())
    hooks = [h for h in config["webhooks"] if h["rules"][0]["resources"] in (["modelpools"], ["autoscalingpolicies"])]
    assert len(hooks) == 2
    for hook in hooks:
        hook["clientConfig"] = {
            "url": f"https://127.0.0.1:{server.port}{hook['clientConfig']['service']['path']}",
            "caBundle": base64.b64encode(certs.ca_bundle).decode(),
        }
        hook["namespaceSelector"] = {"matchLabels": {TEST_LABEL: label}}
    name = f"modelpool-test-{label}"
    await kube.create(VALIDATING_WEBHOOKS, {**config, "metadata": {"name": name}, "webhooks": hooks})

    async def denies() -> bool:
        try:
            await kube.create(MODELPOOLS, _pool("probe", "x", "x"), namespace, dry_run=True)
        except Invalid as exc:
            return "admission webhook" in exc.message
        return False

    try:
        await eventually(denies, timeout=30, description="the webhook takes effect")
        yield namespace
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(VALIDATING_WEBHOOKS, name)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_webhook_refuses_a_member_listed_twice(webhook: str, kube: KubeClient) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("twice", "a", "b", "a"), webhook)
    assert "admission webhook" in caught.value.message
    assert _causes(caught.value)["spec.members[2].modelServingRef.name"] == 'Duplicate value: "a"'


async def test_a_modelserving_in_two_pools_is_refused_naming_the_first_pool(webhook: str, kube: KubeClient) -> None:
    await kube.create(MODELPOOLS, _pool("gpu0", "llama", "qwen"), webhook)
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("gpu1", "mistral", "qwen"), webhook)
    message = _causes(caught.value)["spec.members[1].modelServingRef.name"]
    assert message.startswith('Forbidden: ModelServing "qwen" is already a member of ModelPool "gpu0"')
    await kube.create(MODELPOOLS, _pool("gpu1", "mistral"), webhook)
    # Adding a member of another pool by an update is refused too; an unrelated update of the same pool is not.
    stored = await kube.get(MODELPOOLS, "gpu1", webhook)
    grown = copy.deepcopy(stored)
    grown["spec"]["members"].append({"modelServingRef": {"name": "llama"}})
    with pytest.raises(Invalid) as caught:
        await kube.replace(MODELPOOLS, grown, webhook)
    assert 'ModelPool "gpu0"' in _causes(caught.value)["spec.members[1].modelServingRef.name"]
    resized = copy.deepcopy(stored)
    resized["spec"]["slots"] = 2
    assert (await kube.replace(MODELPOOLS, resized, webhook))["spec"]["slots"] == 2


async def test_an_autoscalingpolicy_on_a_member_is_refused_with_the_pool_and_the_reason(
    webhook: str, kube: KubeClient
) -> None:
    await kube.create(MODELPOOLS, _pool("gpu0", "llama", "qwen"), webhook)
    with pytest.raises(Invalid) as caught:
        await kube.create(AUTOSCALINGPOLICIES, _policy("scale-qwen", "qwen"), webhook)
    assert _causes(caught.value)["spec.homogeneousTarget.target.targetRef.name"] == (
        'Forbidden: ModelServing "qwen" is a member of ModelPool "gpu0": the pool controller is the only writer '
        "of its members' replicas, so no AutoscalingPolicy may target it"
    )
    with pytest.raises(Invalid) as caught:
        await kube.create(AUTOSCALINGPOLICIES, _policy("fleet", heterogeneous=("mistral", "llama")), webhook)
    assert 'ModelPool "gpu0"' in _causes(caught.value)["spec.heterogeneousTarget.params[1].target.targetRef.name"]
    await kube.create(AUTOSCALINGPOLICIES, _policy("scale-mistral", "mistral"), webhook)


async def test_a_pool_listing_an_autoscaled_modelserving_is_refused(webhook: str, kube: KubeClient) -> None:
    await kube.create(AUTOSCALINGPOLICIES, _policy("scale-llama", "llama"), webhook)
    with pytest.raises(Invalid) as caught:
        await kube.create(MODELPOOLS, _pool("gpu0", "llama", "qwen"), webhook)
    message = _causes(caught.value)["spec.members[0].modelServingRef.name"]
    assert 'AutoscalingPolicy "scale-llama"' in message and "only writer of its members' replicas" in message
    await kube.delete(AUTOSCALINGPOLICIES, "scale-llama", webhook)
    await kube.create(MODELPOOLS, _pool("gpu0", "llama", "qwen"), webhook)
