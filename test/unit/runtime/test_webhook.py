"""The admission webhook server and the certificate helpers, exercised in-process on loopback."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from kthena_py.controllers.admission import MUTATING_PATHS, VALIDATING_PATHS, add_handlers
from kthena_py.runtime import metrics
from kthena_py.runtime.certs import generate, new_ca, new_serving_cert, rotation_reason
from kthena_py.runtime.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    FileCertSource,
    WebhookServer,
)

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
HOSTS = ["127.0.0.1", "webhook.test.svc"]


def _review(obj: Any, *, operation: str = "CREATE", old: Any = None, uid: str = "u-1") -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "workload.serving.volcano.sh", "version": "v1alpha1", "kind": obj.get("kind", "")},
        "resource": {"group": "workload.serving.volcano.sh", "version": "v1alpha1", "resource": "x"},
        "operation": operation,
        "name": (obj.get("metadata") or {}).get("name", ""),
        "namespace": "default",
        "object": obj,
        "userInfo": {"username": "admin"},
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class Pair:
    """A mutable certificate source."""

    def __init__(self) -> None:
        self.value: tuple[bytes, bytes] | None = None

    def __call__(self) -> tuple[bytes, bytes] | None:
        return self.value


def _client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = True
    return context


@pytest.fixture
async def served() -> AsyncIterator[tuple[WebhookServer, Pair, bytes]]:
    certs = generate(HOSTS, now=datetime.datetime.now(datetime.UTC))
    source = Pair()
    source.value = (certs.serving.cert, certs.serving.key)
    server = WebhookServer(source, host="127.0.0.1", port=0, reload_interval=0.05)
    add_handlers(server)

    async def echo(request: AdmissionRequest) -> AdmissionResponse:
        return AdmissionResponse.allow(patch=[{"op": "add", "path": "/x", "value": request.operation}])

    async def boom(request: AdmissionRequest) -> AdmissionResponse:
        raise RuntimeError("handler bug")

    async def slow(request: AdmissionRequest) -> AdmissionResponse:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    server.add_handler("/echo", echo)
    server.add_handler("/boom", boom)
    server.add_handler("/slow", slow)
    server.handler_timeout = 0.2
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 30)
    try:
        yield server, source, certs.ca_bundle
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _post(
    server: WebhookServer, ca: bytes, path: str, body: Any, content_type: str = "application/json"
) -> tuple[int, Any]:
    url = f"https://127.0.0.1:{server.port}{path}"
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=data, headers={"Content-Type": content_type}, ssl=_client_context(ca)) as response,
    ):
        text = await response.text()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text


MS = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "demo", "namespace": "default"},
    "spec": {
        "template": {
            "roles": [
                {"name": "decode", "workerReplicas": 0, "entryTemplate": {"spec": {"containers": [{"name": "c"}]}}}
            ]
        }
    },
}


async def test_allows_a_valid_object_and_echoes_the_uid(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    status, review = await _post(server, ca, VALIDATING_PATHS["ModelServing"], _review(MS, uid="abc"))
    assert status == 200
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert review["response"] == {"uid": "abc", "allowed": True}


async def test_denies_with_kthena_message_and_field_causes(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    bad = json.loads(json.dumps(MS))
    bad["spec"]["replicas"] = -1
    bad["spec"]["template"]["roles"][0]["workerReplicas"] = 2
    status, review = await _post(server, ca, VALIDATING_PATHS["ModelServing"], _review(bad))
    assert status == 200
    response = review["response"]
    assert response["allowed"] is False
    result = response["status"]
    assert result["code"] == 422 and result["reason"] == "Invalid" and result["status"] == "Failure"
    assert result["message"].startswith("validation failed:\n  - spec.replicas: Invalid value: -1: replicas must")
    causes = {cause["field"]: cause for cause in result["details"]["causes"]}
    assert causes["spec.replicas"]["reason"] == "FieldValueInvalid"
    assert causes["spec.template.roles[0].workerTemplate"]["reason"] == "FieldValueRequired"
    assert causes["spec.template.roles[0].workerTemplate"]["message"].startswith("Required value: workerTemplate")
    assert result["details"]["kind"] == "ModelServing" and result["details"]["name"] == "demo"


async def test_update_rules_use_the_old_object(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    renamed = json.loads(json.dumps(MS))
    renamed["spec"]["template"]["roles"][0]["name"] = "generate"
    _, review = await _post(server, ca, VALIDATING_PATHS["ModelServing"], _review(renamed, operation="UPDATE", old=MS))
    assert review["response"]["allowed"] is False
    assert "role names are immutable; existing role names are [decode]" in review["response"]["status"]["message"]


async def test_metadata_only_update_and_deletion_are_not_evaluated(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    stale = json.loads(json.dumps(MS))
    stale["spec"]["replicas"] = -1  # invalid under today's rules, stored before them
    relabelled = json.loads(json.dumps(stale))
    relabelled["metadata"]["labels"] = {"team": "a"}
    path = VALIDATING_PATHS["ModelServing"]
    _, review = await _post(server, ca, path, _review(relabelled, operation="UPDATE", old=stale))
    assert review["response"]["allowed"] is True
    deleting = json.loads(json.dumps(stale))
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deleting["spec"]["replicas"] = -2
    _, review = await _post(server, ca, path, _review(deleting, operation="UPDATE", old=stale))
    assert review["response"]["allowed"] is True
    _, review = await _post(server, ca, path, _review(stale, operation="DELETE", old=stale))
    assert review["response"]["allowed"] is True


async def test_old_object_our_schema_rejects_is_ignored(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    old = json.loads(json.dumps(MS))
    old["spec"]["replicas"] = "two"  # not even schema-valid
    new = json.loads(json.dumps(MS))
    new["spec"]["replicas"] = 3
    _, review = await _post(server, ca, VALIDATING_PATHS["ModelServing"], _review(new, operation="UPDATE", old=old))
    assert review["response"]["allowed"] is True


async def test_modelbooster_gets_the_deprecation_warning(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    booster = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": {"name": "qwen"},
        "spec": {
            "backend": {
                "name": "b",
                "type": "vLLM",
                "modelURI": "hf://Qwen/Qwen2.5",
                "replicas": 1,
                "workers": [{"type": "server", "image": "vllm"}],
            }
        },
    }
    _, review = await _post(server, ca, VALIDATING_PATHS["ModelBooster"], _review(booster))
    assert review["response"]["allowed"] is True
    assert "ModelBooster is deprecated" in review["response"]["warnings"][0]
    relabelled = json.loads(json.dumps(booster))
    relabelled["metadata"]["labels"] = {"a": "b"}
    path = VALIDATING_PATHS["ModelBooster"]
    _, review = await _post(server, ca, path, _review(relabelled, operation="UPDATE", old=booster))
    assert "warnings" not in review["response"]


async def test_mutating_webhook_returns_a_json_patch(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    policy = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "AutoscalingPolicy", "spec": {}}
    _, review = await _post(server, ca, MUTATING_PATHS["AutoscalingPolicy"], _review(policy))
    response = review["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    (operation,) = json.loads(base64.b64decode(response["patch"]))
    assert operation["op"] == "add" and operation["path"] == "/spec/behavior"
    assert operation["value"]["scaleDown"] == {"instances": 1, "percent": 100, "period": "15s", "selectPolicy": "Or"}
    assert operation["value"]["scaleUp"]["panicPolicy"] == {
        "percent": 1000,
        "panicThresholdPercent": 200,
        "panicModeHold": "60s",
    }


async def test_protocol_errors(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, _, ca = served
    path = VALIDATING_PATHS["ModelServing"]
    status, _ = await _post(server, ca, path, _review(MS), content_type="text/plain")
    assert status == 400
    status, _ = await _post(server, ca, path, b"{not json")
    assert status == 400
    status, _ = await _post(server, ca, path, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
    assert status == 400
    status, _ = await _post(server, ca, "/nowhere", _review(MS))
    assert status == 404
    status, _ = await _post(server, ca, path, b"x" * (server.max_body_bytes + 1))
    assert status == 413


async def test_handler_failures_deny_with_500_and_the_server_survives(
    served: tuple[WebhookServer, Pair, bytes],
) -> None:
    server, _, ca = served
    _, review = await _post(server, ca, "/boom", _review(MS))
    assert review["response"]["allowed"] is False
    assert review["response"]["status"]["code"] == 500 and "handler bug" in review["response"]["status"]["message"]
    _, review = await _post(server, ca, "/slow", _review(MS))
    assert review["response"]["status"]["message"] == "admission handler timed out"
    _, review = await _post(server, ca, "/echo", _review(MS, operation="UPDATE", old=MS))
    assert json.loads(base64.b64decode(review["response"]["patch"])) == [{"op": "add", "path": "/x", "value": "UPDATE"}]
    sample = metrics.REGISTRY.get_sample_value(
        "controller_runtime_webhook_requests_total", {"webhook": "/boom", "code": "200"}
    )
    assert sample is not None and sample >= 1


async def _peer_certificate(port: int, ca: bytes) -> x509.Certificate:
    context = _client_context(ca)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        await writer.wait_closed()
        del reader


async def test_a_new_certificate_is_served_without_restart(served: tuple[WebhookServer, Pair, bytes]) -> None:
    server, source, ca = served
    assert server.port is not None
    before = await _peer_certificate(server.port, ca)
    renewed = generate(HOSTS, now=datetime.datetime.now(datetime.UTC))
    source.value = (renewed.serving.cert, renewed.serving.key)
    for _ in range(200):
        await asyncio.sleep(0.02)
        try:
            after = await _peer_certificate(server.port, renewed.ca_bundle)
        except ssl.SSLError:
            continue
        assert after.serial_number != before.serial_number
        break
    else:
        raise AssertionError("the renewed certificate was never served")


async def test_waits_for_a_certificate_and_reads_files(tmp_path: Path) -> None:
    server = WebhookServer(FileCertSource(tmp_path), host="127.0.0.1", port=0)
    add_handlers(server)
    task = asyncio.create_task(server.start(poll=0.01))
    await asyncio.sleep(0.05)
    assert not task.done() and not server.serving
    certs = generate(HOSTS, now=datetime.datetime.now(datetime.UTC))
    (tmp_path / "tls.key").write_bytes(certs.serving.key)
    (tmp_path / "tls.crt").write_bytes(certs.serving.cert)
    await asyncio.wait_for(task, 10)
    try:
        assert server.serving and server.port
        status, review = await _post(server, certs.ca_bundle, VALIDATING_PATHS["ModelServing"], _review(MS))
        assert status == 200 and review["response"]["allowed"] is True
    finally:
        await server.stop()


def test_add_handler_needs_an_absolute_path() -> None:
    async def allow(request: AdmissionRequest) -> AdmissionResponse:
        return AdmissionResponse.allow()

    server = WebhookServer(lambda: None)
    with pytest.raises(ValueError, match="must start with"):
        server.add_handler("validate", allow)
    assert "validate" not in server.handlers
    server.add_handler("/validate", allow)
    assert server.handlers["/validate"] is allow


# -- certificates -----------------------------------------------------------------------------------------


def test_generated_certificates_chain_and_cover_the_hosts() -> None:
    certs = generate(HOSTS, now=NOW)
    ca = x509.load_pem_x509_certificate(certs.ca.cert)
    leaf = x509.load_pem_x509_certificate(certs.serving.cert)
    leaf.verify_directly_issued_by(ca)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert san.get_values_for_type(x509.DNSName) == ["webhook.test.svc"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert certs.ca_bundle == certs.ca.cert
    assert rotation_reason(certs, HOSTS, now=NOW) is None


def test_rotation_reasons() -> None:
    certs = generate(HOSTS, now=NOW, cert_validity=datetime.timedelta(days=90))
    validity = datetime.timedelta(days=90)
    assert rotation_reason(certs, HOSTS, now=NOW, cert_validity=validity) is None
    later = NOW + datetime.timedelta(days=61)
    assert rotation_reason(certs, HOSTS, now=later, cert_validity=validity) == "serving certificate expires soon"
    assert "lacks other.svc" in str(rotation_reason(certs, [*HOSTS, "other.svc"], now=NOW, cert_validity=validity))
    foreign = new_ca("other", now=NOW)
    wrong = type(certs)(foreign, certs.serving, foreign.cert)
    assert rotation_reason(wrong, HOSTS, now=NOW) == "serving certificate not signed by the CA"
    mismatched = type(certs)(certs.ca, type(certs.serving)(certs.serving.cert, foreign.key), certs.ca_bundle)
    assert rotation_reason(mismatched, HOSTS, now=NOW) == "key does not match the serving certificate"
    old_ca = generate(HOSTS, now=NOW, ca_validity=datetime.timedelta(days=400))
    assert rotation_reason(old_ca, HOSTS, now=NOW) == "CA expires soon"
    garbage = type(certs)(certs.ca, type(certs.serving)(b"junk", certs.serving.key), certs.ca_bundle)
    assert rotation_reason(garbage, HOSTS, now=NOW) == "unreadable certificate"


def test_renewal_with_the_same_ca_keeps_old_trust() -> None:
    first = generate(HOSTS, now=NOW)
    second = generate(HOSTS, now=NOW, ca=first.ca, extra_trusted=[first.ca_bundle])
    assert second.ca == first.ca and second.ca_bundle == first.ca_bundle
    x509.load_pem_x509_certificate(second.serving.cert).verify_directly_issued_by(
        x509.load_pem_x509_certificate(first.ca.cert)
    )
    capped = new_serving_cert(first.ca, HOSTS, now=NOW, validity=datetime.timedelta(days=100000))
    leaf = x509.load_pem_x509_certificate(capped.cert)
    assert leaf.not_valid_after_utc <= x509.load_pem_x509_certificate(first.ca.cert).not_valid_after_utc
    with pytest.raises(ValueError, match="at least one"):
        new_serving_cert(first.ca, [], now=NOW)
