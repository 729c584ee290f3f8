"""The ModelServer and ModelRoute (``networking.serving.volcano.sh/v1alpha1``) a booster expands into.

Guarantees (modelbooster.md sections 5 and 6):

* ModelServer ``<booster>-<backend>``: ``model`` is the ``served-model-name`` of the first server or decode
  worker (else the booster's name), engine ``vLLM``, pods selected by the ``model-uid`` label, the engine port,
  Kthena's retry policy, the PD group keys for ``vLLMDisaggregated`` and the KV connector type the prefill and
  decode workers agree on. For a multi-node ``vLLM`` backend the selector also requires
  ``modelserving.volcano.sh/entry: "true"``, so Ray worker pods (which serve no HTTP) get no traffic.
* ModelRoute ``<booster>``: ``modelName`` is ``spec.name`` or the booster's name; one rule ``default`` with the
  booster's ``modelMatch`` and the ModelServer as its only target (the CRD defaults the weight).
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.modelbooster import ModelBooster
from kthena_py.api.validation.modelbooster import kv_connector_type
from kthena_py.vocab.labels import SERVING_ENTRY, SERVING_GROUP_NAME, SERVING_ROLE

from . import naming
from .engine import config_of, config_value, engine_port
from .errors import ExpandError

__all__ = ["build_modelroute", "build_modelserver", "model_name", "served_model_name"]

_ENTRY_LABEL = SERVING_ENTRY


def served_model_name(booster: ModelBooster) -> str:
    """The name the engines serve and the router rewrites requests to (the ModelServer's ``spec.model``)."""
    worker = next((w for w in booster.spec.backend.workers if w.type in ("server", "decode")), None)
    if worker is not None:
        value = config_value(config_of(worker), "served-model-name")
        if isinstance(value, str) and value:
            return value
    return booster.name


def model_name(booster: ModelBooster) -> str:
    """The request-facing model name: ``spec.name``, defaulting to the booster's name."""
    return booster.spec.name or booster.name


def _meta(booster: ModelBooster, name: str, backend_name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": booster.namespace,
        "labels": naming.booster_labels(booster, backend_name, naming.revision(spec)),
        "ownerReferences": [naming.owner_reference(booster)],
    }


def build_modelserver(booster: ModelBooster) -> dict[str, Any]:
    """The ModelServer ``<booster>-<backend>``.

    Raises:
        ExpandError: An unsupported backend type, a bad port or an inconsistent KV connector configuration.
    """
    backend = booster.spec.backend
    kind = str(backend.type)
    if kind not in ("vLLM", "vLLMDisaggregated"):
        raise ExpandError(f"not support {kind} backend yet, please use vLLM backend")
    match: dict[str, str] = {naming.LABEL_MODEL_UID: booster.uid}
    selector: dict[str, Any] = {"matchLabels": match}
    if kind == "vLLMDisaggregated":
        selector["pdGroup"] = {
            "groupKey": SERVING_GROUP_NAME,
            "prefillLabels": {SERVING_ROLE: "prefill"},
            "decodeLabels": {SERVING_ROLE: "decode"},
        }
    elif (backend.workers[0].pods or 0) > 1:
        match[_ENTRY_LABEL] = "true"
    spec: dict[str, Any] = {
        "model": served_model_name(booster),
        "inferenceEngine": "vLLM",
        "workloadSelector": selector,
        "workloadPort": {"port": engine_port(backend)},
        "trafficPolicy": {"retry": {"attempts": 5, "retryInterval": "0s"}},
    }
    try:
        connector = kv_connector_type(backend)
    except ValueError as exc:
        raise ExpandError(str(exc)) from exc
    if connector is not None:
        spec["kvConnector"] = {"type": connector}
    return {
        "apiVersion": naming.NETWORKING_API_VERSION,
        "kind": "ModelServer",
        "metadata": _meta(booster, naming.modelserver_name(booster), backend.name, spec),
        "spec": spec,
    }


def build_modelroute(booster: ModelBooster) -> dict[str, Any]:
    """The ModelRoute ``<booster>``, routing ``modelName`` to the ModelServer."""
    rule: dict[str, Any] = {"name": "default"}
    if booster.spec.model_match is not None:
        rule["modelMatch"] = dict(booster.spec.model_match)
    rule["targetModels"] = [{"modelServerName": naming.modelserver_name(booster)}]
    spec: dict[str, Any] = {"modelName": model_name(booster), "rules": [rule]}
    return {
        "apiVersion": naming.NETWORKING_API_VERSION,
        "kind": "ModelRoute",
        "metadata": _meta(booster, naming.modelroute_name(booster), "", spec),
        "spec": spec,
    }
