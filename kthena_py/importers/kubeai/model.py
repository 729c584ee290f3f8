"""KubeAI Model -> ModelServing (+ ModelCache, + AutoscalingPolicy), with the field report.

Guarantees:

* One ModelServing named like the Model, one role ``server`` with one entry pod and no workers, the engine's
  container (:mod:`~kthena_py.importers.kubeai.engines`), the resource profile's resources and placement.
* ``cacheProfile`` adds a ModelCache of the same name and the gate annotation; the engine then reads the staged
  copy (``$(KTHENA_MODEL_PATH)``) instead of downloading.
* Unless ``autoscalingDisabled``, an AutoscalingPolicy of the same name targets the ModelServing on the
  activator's demand; ``minReplicas: 0`` (KubeAI's default) also sets the activator's scale-from-zero annotation.
* ``adapters`` become the LoRA annotation (vLLM's runtime endpoint loads them).
* Every emitted object carries the origin labels and annotation; every present field gets one report line; bad
  values raise :class:`~kthena_py.importers.report.ImportFailure` naming the field.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from kthena_py.api.common import API_VERSION, AUTOSCALING_POLICY_KIND, MODEL_SERVING_KIND
from kthena_py.api.modelcache import MODEL_CACHE_API_VERSION, MODEL_CACHE_KIND, MODEL_CACHE_MOUNT_PATH
from kthena_py.importers.context import ImportContext, ImportDocument, Peer, ResourceProfile, origin_metadata
from kthena_py.importers.documents import (
    boolean,
    integer,
    object_list,
    report_fields,
    string,
    string_list,
    string_map,
)
from kthena_py.importers.kubeai.engines import ENGINES, EngineLaunch, engine_container, runtime_sidecar
from kthena_py.importers.kubeai.fields import MODEL_FIELDS
from kthena_py.importers.kubeai.profiles import DEFAULT_RESOURCE_PROFILES, engine_image, scaled
from kthena_py.importers.metadata import carried_metadata
from kthena_py.importers.report import ImportFailure, ReportLine
from kthena_py.vocab.labels import ACTIVATOR_SCALE_FROM_ZERO, LORA_ADAPTERS, LORA_ENDPOINT, MODEL_CACHE

__all__ = [
    "CACHE_CLAIM_PREFIX",
    "DEFAULT_SCALE_DOWN_DELAY_SECONDS",
    "DEFAULT_TARGET_REQUESTS",
    "DEMAND_METRIC",
    "MAX_REPLICAS_UNLIMITED",
    "MAX_STABILIZATION_SECONDS",
    "PROMETHEUS_URL",
    "translate_model",
]

PEER: Peer = "kubeai"
DEFAULT_TARGET_REQUESTS = 100
DEFAULT_SCALE_DOWN_DELAY_SECONDS = 30
MAX_REPLICAS_UNLIMITED = 1_000_000
MAX_STABILIZATION_SECONDS = 1800
"""kthena_py's largest scale-down stabilization window (30 minutes)."""
CACHE_CLAIM_PREFIX = "shared-model-cache-"
DEMAND_METRIC = "demand"
PROMETHEUS_URL = "http://prometheus.monitoring:9090"
"""A placeholder the user edits: where the activator's demand gauges are scraped into."""
MODEL_MOUNT = "/model"
CACHED_MODEL = "$(KTHENA_MODEL_PATH)"
_CACHE_SCHEMES = ("hf://", "s3://", "gs://", "oss://")
_DEMAND_QUERY = (
    'sum({{__name__=~"kthena_activator_requests_(held|in_flight)", namespace="{namespace}", '
    'modelserving="{name}"}}) or vector(0)'
)


def _fail(doc: ImportDocument, path: str, message: str) -> ImportFailure:
    return ImportFailure(doc.index, doc.source, path, message)


def _required(doc: ImportDocument, path: str) -> str:
    value = string(doc, path)
    if not value:
        raise _fail(doc, path, "required")
    return value


def _resource_profile(doc: ImportDocument, context: ImportContext) -> tuple[ResourceProfile, int] | None:
    text = string(doc, "spec.resourceProfile")
    if not text:
        return None
    name, _, count_text = text.partition(":")
    if not count_text.isdigit() or int(count_text) < 1:
        raise _fail(doc, "spec.resourceProfile", f"expected <profile>:<count> with a count >= 1, got {text!r}")
    profiles = context.options.kubeai_profiles
    known = DEFAULT_RESOURCE_PROFILES if profiles is None else profiles
    if name not in known:
        where = "in --kubeai-config" if profiles is not None else "among KubeAI's default profiles"
        raise _fail(doc, "spec.resourceProfile", f"unknown profile {name!r} {where} ({', '.join(sorted(known))})")
    return known[name], int(count_text)


def _model_argument(doc: ImportDocument, engine: str, url: str, cached: bool) -> tuple[str, dict[str, Any] | None]:
    """The engine's model argument, and a volume (``pvc://``) to mount at :data:`MODEL_MOUNT`."""
    scheme, _, rest = url.partition("://")
    if engine == "OLlama":
        if scheme != "ollama":
            raise _fail(doc, "spec.url", f"the OLlama engine serves ollama:// urls only, got {url!r}")
        return rest, None
    if scheme == "ollama":
        raise _fail(doc, "spec.url", f"ollama:// urls are served by the OLlama engine only, not {engine}")
    if cached:
        # FasterWhisper takes the model in an env value, where $(VAR) only expands variables defined before it (the
        # gate appends KTHENA_MODEL_PATH last), so it gets the mount path itself.
        return (MODEL_CACHE_MOUNT_PATH if engine == "FasterWhisper" else CACHED_MODEL), None
    if scheme == "hf":
        return rest, None
    if scheme == "pvc":
        claim, _, sub = rest.partition("/")
        if not claim:
            raise _fail(doc, "spec.url", f"expected pvc://<claim>[/<path>], got {url!r}")
        return MODEL_MOUNT, {"claim": claim, "subPath": sub}
    if scheme in ("s3", "gs", "oss"):
        raise _fail(doc, "spec.url", f"{scheme}:// urls need a cacheProfile (as in KubeAI)")
    raise _fail(doc, "spec.url", f"unsupported url {url!r} (hf://, pvc://, ollama://, s3://, gs://, oss://)")


def _cache_source(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"s3://{rest}" if scheme in ("gs", "oss") else url


def _adapters(doc: ImportDocument) -> list[dict[str, str]]:
    adapters = object_list(doc, "spec.adapters") or []
    result: list[dict[str, str]] = []
    for item in adapters:
        name, url = item.get("name"), item.get("url")
        if not isinstance(name, str) or not name:
            raise _fail(doc, "spec.adapters[].name", "expected a non-empty string")
        if not isinstance(url, str) or not url:
            raise _fail(doc, "spec.adapters[].url", "expected a non-empty string")
        result.append({"name": name, "source": url})
    return result


def _pod_spec(
    doc: ImportDocument, container: dict[str, Any], profile: tuple[ResourceProfile, int] | None, volume: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container]}
    if profile is not None:
        resource, count = profile
        try:
            resources = {
                key: scaled(values, count)
                for key, values in (("requests", resource.requests), ("limits", resource.limits))
                if values
            }
        except ValueError as exc:
            raise _fail(doc, "spec.resourceProfile", f"profile quantity: {exc}") from None
        if resources:
            container["resources"] = resources
        if resource.node_selector:
            spec["nodeSelector"] = dict(resource.node_selector)
        if resource.tolerations:
            spec["tolerations"] = [dict(item) for item in resource.tolerations]
        if resource.affinity:
            spec["affinity"] = dict(resource.affinity)
        if resource.runtime_class_name:
            spec["runtimeClassName"] = resource.runtime_class_name
    if volume is not None:
        spec["volumes"] = [{"name": "model", "persistentVolumeClaim": {"claimName": volume["claim"], "readOnly": True}}]
        mount: dict[str, Any] = {"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True}
        if volume["subPath"]:
            mount["subPath"] = volume["subPath"]
        container["volumeMounts"] = [mount]
    return spec


def _autoscaling_policy(doc: ImportDocument, minimum: int, maximum: int, target: int, delay: int) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": AUTOSCALING_POLICY_KIND,
        "metadata": {"name": doc.name, "namespace": doc.namespace, **origin_metadata(doc, PEER)},
        "spec": {
            "metrics": [{"name": DEMAND_METRIC, "targetValue": str(target)}],
            "behavior": {"scaleDown": {"stabilizationWindow": f"{delay}s"}},
            "homogeneousTarget": {
                "minReplicas": minimum,
                "maxReplicas": maximum,
                "target": {
                    "targetRef": {"kind": MODEL_SERVING_KIND, "name": doc.name},
                    "metricSources": {
                        DEMAND_METRIC: {
                            "prometheus": {
                                "serverURL": PROMETHEUS_URL,
                                "query": _DEMAND_QUERY.format(namespace=doc.namespace, name=doc.name),
                            }
                        }
                    },
                },
            },
        },
    }


def _model_cache(doc: ImportDocument, source: str, profile: str) -> dict[str, Any]:
    return {
        "apiVersion": MODEL_CACHE_API_VERSION,
        "kind": MODEL_CACHE_KIND,
        "metadata": {"name": doc.name, "namespace": doc.namespace, **origin_metadata(doc, PEER)},
        "spec": {
            "source": source,
            "storage": {"persistentVolumeClaim": {"claimName": f"{CACHE_CLAIM_PREFIX}{profile}"}},
        },
    }


def _refine(lines: list[ReportLine], path: str, **changes: Any) -> None:
    for position, line in enumerate(lines):
        if line.path == path:
            lines[position] = replace(line, **changes)


def translate_model(doc: ImportDocument, context: ImportContext) -> tuple[list[dict[str, Any]], list[ReportLine]]:
    """The objects for one KubeAI Model, and its field report."""
    lines = report_fields(doc, MODEL_FIELDS)
    if not doc.name:
        raise _fail(doc, "metadata.name", "required")
    url = _required(doc, "spec.url")
    engine = _required(doc, "spec.engine")
    if engine not in ENGINES:
        raise _fail(doc, "spec.engine", f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    string_list(doc, "spec.features")
    string(doc, "spec.owner")
    cache_profile = string(doc, "spec.cacheProfile")
    if cache_profile and not url.startswith(_CACHE_SCHEMES):
        raise _fail(doc, "spec.cacheProfile", "only with hf://, s3://, gs:// or oss:// urls (as in KubeAI)")
    adapters = _adapters(doc)
    if adapters and engine != "VLLM":
        raise _fail(doc, "spec.adapters", "adapters are only supported with the VLLM engine (as in KubeAI)")
    profile = _resource_profile(doc, context)
    model, volume = _model_argument(doc, engine, url, cached=bool(cache_profile))
    image = string(doc, "spec.image") or engine_image(
        engine, profile[0].image_name if profile else "", context.options.kubeai_images
    )
    launch = EngineLaunch(
        engine=engine,
        model=model,
        served_name=doc.name,
        image=image,
        args=tuple(string_list(doc, "spec.args") or ()),
        env=string_map(doc, "spec.env"),
        lora=bool(adapters),
    )
    container = engine_container(launch)
    pod_spec = _pod_spec(doc, container, profile, volume)

    replicas = integer(doc, "spec.replicas")
    minimum = integer(doc, "spec.minReplicas")
    maximum = integer(doc, "spec.maxReplicas")
    target = integer(doc, "spec.targetRequests")
    delay = integer(doc, "spec.scaleDownDelaySeconds")
    disabled = bool(boolean(doc, "spec.autoscalingDisabled"))
    for path, value, least in (
        ("spec.replicas", replicas, 0),
        ("spec.minReplicas", minimum, 0),
        ("spec.maxReplicas", maximum, 1),
        ("spec.targetRequests", target, 1),
        ("spec.scaleDownDelaySeconds", delay, 0),
    ):
        if value is not None and value < least:
            raise _fail(doc, path, f"must be >= {least}, got {value}")
    floor = minimum or 0
    if maximum is not None and floor > maximum:
        raise _fail(doc, "spec.minReplicas", f"greater than maxReplicas ({floor} > {maximum})")

    metadata = carried_metadata(doc, PEER)
    annotations: dict[str, str] = metadata["annotations"]
    if adapters:
        annotations[LORA_ADAPTERS] = json.dumps(adapters, separators=(",", ":"))
        annotations[LORA_ENDPOINT] = "sidecar"
        pod_spec["containers"].append(runtime_sidecar(doc.name))
    objects: list[dict[str, Any]] = []
    if cache_profile:
        annotations[MODEL_CACHE] = doc.name
        objects.append(_model_cache(doc, _cache_source(url), cache_profile))
        if not url.startswith(("hf://", "s3://")):
            _refine(
                lines,
                "spec.url",
                outcome="approximated",
                note=f"staged as {_cache_source(url)} from an S3-compatible endpoint: set ENDPOINT (and keys) in "
                "a Secret named by the ModelCache's sourceSecretRef",
            )
    if disabled:
        for path in ("spec.minReplicas", "spec.maxReplicas", "spec.targetRequests", "spec.scaleDownDelaySeconds"):
            _refine(lines, path, outcome="dropped", target="", note="autoscalingDisabled: no AutoscalingPolicy")
    else:
        if delay is not None and delay > MAX_STABILIZATION_SECONDS:
            _refine(
                lines,
                "spec.scaleDownDelaySeconds",
                note=f"{delay}s capped at {MAX_STABILIZATION_SECONDS}s, the longest stabilization window kthena_py "
                "accepts",
            )
            delay = MAX_STABILIZATION_SECONDS
        for path, value in (("spec.minReplicas", minimum), ("spec.maxReplicas", maximum)):
            if value is not None and value > MAX_REPLICAS_UNLIMITED:
                _refine(
                    lines,
                    path,
                    outcome="approximated",
                    note=f"{value} capped at {MAX_REPLICAS_UNLIMITED}, the most kthena_py's policy accepts",
                )
        floor = min(floor, MAX_REPLICAS_UNLIMITED)
        maximum = None if maximum is None else min(maximum, MAX_REPLICAS_UNLIMITED)
        if floor == 0:
            annotations[ACTIVATOR_SCALE_FROM_ZERO] = "true"
        objects.append(
            _autoscaling_policy(
                doc,
                floor,
                MAX_REPLICAS_UNLIMITED if maximum is None else maximum,
                DEFAULT_TARGET_REQUESTS if target is None else target,
                DEFAULT_SCALE_DOWN_DELAY_SECONDS if delay is None else delay,
            )
        )

    serving_spec: dict[str, Any] = {
        "replicas": floor if replicas is None else replicas,
        "template": {
            "roles": [
                {
                    "name": "server",
                    "replicas": 1,
                    "entryTemplate": {
                        "metadata": {"labels": dict(origin_metadata(doc, PEER)["labels"])},
                        "spec": pod_spec,
                    },
                    "workerReplicas": 0,
                }
            ]
        },
    }
    if profile is not None and profile[0].scheduler_name:
        serving_spec["schedulerName"] = profile[0].scheduler_name
    serving = {
        "apiVersion": API_VERSION,
        "kind": MODEL_SERVING_KIND,
        "metadata": {"name": doc.name, "namespace": doc.namespace, **metadata},
        "spec": serving_spec,
    }
    return [serving, *objects], lines
