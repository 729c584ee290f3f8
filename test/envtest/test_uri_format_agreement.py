"""``serverURL``'s ``format: uri``: the offline validator and a real kube-apiserver give the same verdict.

Every value of the unit table (``test/unit/api/test_uri_format.py``) goes into an otherwise valid
AutoscalingPolicy that is created with ``dryRun=All`` (nothing is stored, no webhook selects the namespace); the
API server must accept it exactly when ``kthena-py validate`` (:func:`validate_document`) does, and a refusal must
name the field.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kthena_py.api.validation import validate_document
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES
from kthena_py.kube import Cause, Invalid, KubeClient
from kthena_py.testing.controlplane import EnvTest

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
#: Where the API server reports a bad serverURL (schema errors name a map key as a path segment).
SERVER_PATH = "spec.homogeneousTarget.target.metricSources.rps.prometheus.serverURL"


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


table = _load_module("kthena_py_test_uri_format", ROOT / "test" / "unit" / "api" / "test_uri_format.py")
CASES: list[tuple[str, str | None]] = table.CASES


def test_the_served_crd_declares_format_uri(envtest: EnvTest) -> None:
    name = f"{AUTOSCALINGPOLICIES.plural}.{AUTOSCALINGPOLICIES.group}"
    status, crd = envtest.client.raw("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    assert status == 200
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == AUTOSCALINGPOLICIES.version]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    target = spec["homogeneousTarget"]["properties"]["target"]["properties"]
    source = target["metricSources"]["additionalProperties"]["properties"]["prometheus"]["properties"]
    assert source["serverURL"]["format"] == "uri"


#: The note the API server adds when a schema error keeps it from running the CEL rules.
CEL_SKIPPED = "validation rules were not checked because the object was invalid"


def _field_causes(error: Invalid) -> list[Cause]:
    return [cause for cause in error.causes if CEL_SKIPPED not in cause.message]


async def _server_accepts(kube: KubeClient, document: dict[str, Any], namespace: str) -> bool:
    try:
        await kube.create(AUTOSCALINGPOLICIES, document, namespace, dry_run=True)
    except Invalid as exc:
        causes = _field_causes(exc)
        described = (exc.message, [f"{cause.field}: {cause.message}" for cause in exc.causes])
        assert causes and all(cause.field == SERVER_PATH for cause in causes), described
        return False
    return True


@pytest.mark.parametrize(("value", "reason"), CASES, ids=[repr(value) for value, _ in CASES])
async def test_offline_and_server_verdicts_agree(
    kube: KubeClient, namespace: str, value: str, reason: str | None
) -> None:
    document = table.policy(value, namespace=namespace)
    offline = validate_document(document)
    server = await _server_accepts(kube, document, namespace)
    assert server == (not offline), f"server accepts: {server}; offline: {[str(e) for e in offline]}"
    assert server == (reason is None)


async def test_server_wording_for_a_bad_uri(kube: KubeClient, namespace: str) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(
            AUTOSCALINGPOLICIES, table.policy("http://prom:abc", namespace=namespace), namespace, dry_run=True
        )
    (cause,) = _field_causes(caught.value)
    assert cause.message.endswith(f'{SERVER_PATH} in body must be of type uri: "http://prom:abc"'), cause.message
