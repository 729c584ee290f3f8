"""LLMKube InferenceService -> ModelServing (+ Service, + AutoscalingPolicy): one role, one engine container.

Guarantees:

* The ModelServing is named like the InferenceService and gated on the ModelCache imported from its ``modelRef``
  (the annotation :data:`~kthena_py.vocab.labels.MODEL_CACHE`) unless ``skipModelInit`` is true; its one role
  ``server`` has one entry pod and no workers; the engine container is ``engine`` with the named port ``http``.
* The referenced Model, when it is in the input, supplies the GPU request (:mod:`.gpu`), the primary file the
  engine loads, the projector, and CPU/memory requests the service does not set itself.
* A Service is always emitted (LLMKube always creates one); an AutoscalingPolicy when ``autoscaling`` is set,
  except for a member of a ModelPool of the input: the pool controller is the only writer of its members'
  replicas, so the autoscaling fields are reported dropped.
* Every field present appears once in the report under its row of
  :data:`~kthena_py.importers.llmkube.inferenceservice_table.INFERENCESERVICE_TABLE`; a row LLMKube ignores for
  the service's runtime (or for a pool member) is reported ``dropped`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kthena_py.importers.context import ImportContext, ImportDocument
from kthena_py.importers.documents import (
    boolean,
    integer,
    mapping,
    object_list,
    report_fields,
    string,
    string_list,
    string_map,
)
from kthena_py.importers.llmkube.autoscaling import autoscaling_policy
from kthena_py.importers.llmkube.common import API_VERSION, emitted_metadata
from kthena_py.importers.llmkube.engine import (
    DEFAULT_PORTS,
    MODEL_PATH,
    RUNTIMES,
    default_image,
    engine_command,
    model_path,
)
from kthena_py.importers.llmkube.gpu import GpuRequest, gpu_request
from kthena_py.importers.llmkube.inferenceservice_table import INFERENCESERVICE_TABLE, RUNTIME_OF_ROW
from kthena_py.importers.llmkube.model import staging_source
from kthena_py.importers.llmkube.service import endpoint_service
from kthena_py.importers.report import ImportFailure, Outcome, ReportLine
from kthena_py.vocab.labels import MODEL_CACHE

__all__ = ["MODELSERVING_API_VERSION", "pool_of", "priority_class", "translate_inferenceservice"]

MODELSERVING_API_VERSION = "workload.serving.volcano.sh/v1alpha1"
_PROBE_DEFAULT_RUNTIMES = ("llamacpp", "vllm", "tgi")
_EXTRA_ARGS_RUNTIMES = ("llamacpp", "vllm")


def priority_class(priority: str | None, explicit: str | None) -> str | None:
    """The pod's PriorityClass: ``explicit`` wins; LLMKube's ``normal`` (the default) is the cluster default."""
    if explicit:
        return explicit
    if priority and priority != "normal":
        return f"llmkube-{priority}"
    return None


def pool_of(doc: ImportDocument, context: ImportContext) -> str | None:
    """The name of a ModelPool of the input (same namespace) listing ``doc`` as a member, if any."""
    for other in context.documents:
        if other.kind != "ModelPool" or other.api_version != API_VERSION or other.namespace != doc.namespace:
            continue
        spec = other.body.get("spec")
        members = spec.get("members") if isinstance(spec, Mapping) else None
        for member in members if isinstance(members, list) else []:
            ref = member.get("inferenceServiceRef") if isinstance(member, Mapping) else None
            if isinstance(ref, Mapping) and ref.get("name") == doc.name:
                return other.name
    return None


def _draft_repo(doc: ImportDocument, context: ImportContext) -> str | None:
    name = string(doc, "spec.vllmConfig.speculative.model")
    draft = context.find("Model", name) if name else None
    source = string(draft, "spec.source") if draft is not None else None
    if not source:
        return None
    if source.startswith("hf://"):
        return source.removeprefix("hf://")
    if "://" not in source and not source.startswith("/"):
        return source
    return None


def _staged_files(model: ImportDocument | None) -> tuple[list[str] | None, str | None]:
    """The Model's staged files and its projector's staged path (as the ModelCache will hold them)."""
    if model is None:
        return None, None
    files = list(string_list(model, "spec.files") or [])
    mmproj = string(model, "spec.mmproj")
    staged = staging_source(string(model, "spec.source"), files + ([mmproj] if mmproj else []))
    if isinstance(staged, str):
        return None, None
    _, entries = staged
    primary = entries[: len(files)]
    return primary or None, (f"{MODEL_PATH}/{entries[-1]}" if mmproj else None)


def _resources(doc: ImportDocument, model: ImportDocument | None, gpu: GpuRequest) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    cpu = string(doc, "spec.resources.cpu") or (string(model, "spec.resources.cpu") if model else None)
    memory = string(doc, "spec.resources.memory") or (string(model, "spec.resources.memory") if model else None)
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    host_memory = string(doc, "spec.resources.hostMemory")
    if host_memory:
        requests["memory"] = host_memory
        limits["memory"] = host_memory
    resources: dict[str, Any] = {}
    if gpu.count > 0 and not gpu.claims:
        limits[gpu.resource] = gpu.count
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    if gpu.claims:
        resources["claims"] = [{"name": claim.get("name")} for claim in gpu.claims]
    return resources


def _tolerations(doc: ImportDocument, gpu: GpuRequest) -> list[dict[str, Any]]:
    tolerations = [dict(item) for item in object_list(doc, "spec.tolerations") or []]
    if gpu.count > 0 and not any(item.get("key") == gpu.toleration_key for item in tolerations):
        tolerations.append({"key": gpu.toleration_key, "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def _container(
    doc: ImportDocument, context: ImportContext, runtime: str, model: ImportDocument | None, gpu: GpuRequest
) -> dict[str, Any]:
    vendor = (string(model, "spec.hardware.gpu.vendor") if model else None) or "nvidia"
    image = string(doc, "spec.image") or default_image(runtime, gpu, vendor)
    if not image:
        raise ImportFailure(doc.index, doc.source, "spec.image", f"runtime {runtime} has no default image: set one")
    port = integer(doc, "spec.containerPort") or DEFAULT_PORTS[runtime]
    skip = boolean(doc, "spec.skipModelInit") is True
    files, mmproj = _staged_files(model)
    model_arg = None if skip else model_path(model, files)
    engine = engine_command(
        doc,
        runtime,
        model_arg=model_arg,
        port=port,
        gpu=gpu,
        mmproj=None if skip else mmproj,
        draft_repo=_draft_repo(doc, context),
    )
    container: dict[str, Any] = {"name": "engine", "image": image}
    if engine.command:
        container["command"] = engine.command
    if engine.args:
        container["args"] = engine.args
    env = [dict(item) for item in object_list(doc, "spec.env") or []] + engine.env
    if env:
        container["env"] = env
    container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    resources = _resources(doc, model, gpu)
    if resources:
        container["resources"] = resources
    security = mapping(doc, "spec.securityContext")
    if security:
        container["securityContext"] = dict(security)
    for field, key in (("liveness", "livenessProbe"), ("readiness", "readinessProbe"), ("startup", "startupProbe")):
        probe = mapping(doc, f"spec.probeOverrides.{field}")
        if probe:
            container[key] = dict(probe)
    if "readinessProbe" not in container and runtime in _PROBE_DEFAULT_RUNTIMES:
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
    return container


def _pod_spec(doc: ImportDocument, container: dict[str, Any], gpu: GpuRequest) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [container]}
    pulls = object_list(doc, "spec.imagePullSecrets")
    if pulls:
        pod["imagePullSecrets"] = [dict(item) for item in pulls]
    node_selector = string_map(doc, "spec.nodeSelector")
    if node_selector:
        pod["nodeSelector"] = node_selector
    tolerations = _tolerations(doc, gpu)
    if tolerations:
        pod["tolerations"] = tolerations
    runtime_class = string(doc, "spec.runtimeClassName")
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    priority = priority_class(string(doc, "spec.priority"), string(doc, "spec.priorityClassName"))
    if priority:
        pod["priorityClassName"] = priority
    security = mapping(doc, "spec.podSecurityContext")
    if security:
        pod["securityContext"] = dict(security)
    if gpu.claims:
        pod["resourceClaims"] = [dict(claim) for claim in gpu.claims]
    return pod


def _model_serving(
    doc: ImportDocument, context: ImportContext, runtime: str, model: ImportDocument | None, pool: str | None
) -> dict[str, Any]:
    model_ref = string(doc, "spec.modelRef")
    gpu = gpu_request(doc, model)
    container = _container(doc, context, runtime, model, gpu)
    template_metadata: dict[str, Any] = {}
    pod_labels = string_map(doc, "spec.podLabels")
    if pod_labels:
        template_metadata["labels"] = pod_labels
    pod_annotations = string_map(doc, "spec.podAnnotations")
    if pod_annotations:
        template_metadata["annotations"] = pod_annotations
    entry: dict[str, Any] = {"spec": _pod_spec(doc, container, gpu)}
    if template_metadata:
        entry = {"metadata": template_metadata, **entry}
    metadata = emitted_metadata(doc)
    if boolean(doc, "spec.skipModelInit") is not True and model_ref:
        metadata["annotations"][MODEL_CACHE] = model_ref
    replicas = integer(doc, "spec.replicas")
    if pool is not None:
        replicas = 0
    return {
        "apiVersion": MODELSERVING_API_VERSION,
        "kind": "ModelServing",
        "metadata": metadata,
        "spec": {
            "replicas": 1 if replicas is None else replicas,
            "template": {"roles": [{"name": "server", "replicas": 1, "entryTemplate": entry, "workerReplicas": 0}]},
        },
    }


Override = tuple[Outcome, str]
"""A report line of one document that differs from its row: the outcome and the note that says why."""


def _runtime_override(path: str, runtime: str) -> Override | None:
    owner = RUNTIME_OF_ROW.get(path)
    if owner is not None and owner != runtime:
        return "dropped", f"LLMKube reads it for runtime {owner} only, this service runs {runtime}"
    if path == "spec.args" and runtime != "generic":
        return "dropped", f"LLMKube reads args for runtime generic only, this service runs {runtime}"
    if path == "spec.extraArgs" and runtime not in _EXTRA_ARGS_RUNTIMES:
        return "dropped", f"LLMKube ignores extraArgs for runtime {runtime}"
    return None


def _line(line: ReportLine, override: Override | None) -> ReportLine:
    if override is None:
        return line
    outcome, note = override
    return replace(line, outcome=outcome, target="" if outcome == "dropped" else line.target, note=note)


def _overrides(
    doc: ImportDocument, context: ImportContext, rows: list[ReportLine], runtime: str, pool: str | None
) -> tuple[dict[str, Override], dict[str, Any] | None]:
    """How this document's report differs from the table, and its AutoscalingPolicy (if any)."""
    overrides: dict[str, Override] = {}
    for rule in rows:
        found = _runtime_override(rule.path, runtime)
        if found is not None:
            overrides[rule.path] = found
    if runtime == "vllm" and boolean(doc, "spec.vllmConfig.speculative.enabled") and not _draft_repo(doc, context):
        overrides["spec.vllmConfig.speculative.model"] = (
            "dropped",
            "the draft Model is not in the input or not on Hugging Face",
        )
    autoscaling = [rule.path for rule in rows if rule.path.startswith("spec.autoscaling.")]
    if pool is not None:
        note = f"member of ModelPool {pool}: the pool controller is the only writer of its members' replicas"
        overrides.update({path: ("dropped", note) for path in autoscaling})
        if any(rule.path == "spec.replicas" for rule in rows):
            overrides["spec.replicas"] = (
                "approximated",
                f"member of ModelPool {pool}: starts at 0, the pool brings it up",
            )
        return overrides, None
    if not mapping(doc, "spec.autoscaling"):
        return overrides, None
    port = integer(doc, "spec.containerPort") or DEFAULT_PORTS[runtime]
    plan = autoscaling_policy(doc, port, runtime)
    if plan.policy is None:
        note = "every metric is a Resource metric: no AutoscalingPolicy is emitted"
        overrides.update({path: ("dropped", note) for path in autoscaling})
        return overrides, None
    if plan.dropped_metrics:
        dropped = ", ".join(plan.dropped_metrics)
        overrides["spec.autoscaling.metrics[].targetAverageUtilization"] = (
            "dropped",
            f"Resource metric(s) {dropped} dropped",
        )
    if runtime == "vllm" and not object_list(doc, "spec.autoscaling.metrics"):
        overrides["spec.autoscaling.maxReplicas"] = (
            "mapped",
            "no metrics listed: vllm:num_requests_running at 2 instead of LLMKube's default "
            "llamacpp:requests_processing, which vLLM does not export",
        )
    return overrides, plan.policy


def translate_inferenceservice(
    doc: ImportDocument, context: ImportContext
) -> tuple[list[dict[str, Any]], list[ReportLine]]:
    """The ModelServing, Service and (maybe) AutoscalingPolicy of an InferenceService, and the field report."""
    rows = report_fields(doc, INFERENCESERVICE_TABLE)
    model_ref = string(doc, "spec.modelRef")
    if not model_ref:
        raise ImportFailure(doc.index, doc.source, "spec.modelRef", "required: the Model to serve")
    runtime = string(doc, "spec.runtime") or "llamacpp"
    if runtime not in RUNTIMES:
        raise ImportFailure(doc.index, doc.source, "spec.runtime", f"{runtime!r} is not one of {', '.join(RUNTIMES)}")
    pool = pool_of(doc, context)
    serving = _model_serving(doc, context, runtime, context.find("Model", model_ref), pool)
    overrides, policy = _overrides(doc, context, rows, runtime, pool)
    objects = [serving, endpoint_service(doc)] + ([policy] if policy is not None else [])
    return objects, [_line(line, overrides.get(line.path)) for line in rows]
