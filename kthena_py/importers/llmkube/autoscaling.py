"""An InferenceService's ``autoscaling`` -> an AutoscalingPolicy bound to its ModelServing.

Guarantees:

* Pods metrics become policy metrics (``targetAverageValue`` -> ``targetValue``) scraped from each entry pod's
  ``/metrics`` on the engine port; Resource metrics (CPU or memory utilization) are left out and named in
  :attr:`PolicyPlan.dropped_metrics`. No metric at all: LLMKube's default, ``llamacpp:requests_processing`` at 2,
  except for vLLM, which does not export it: ``vllm:num_requests_running`` at 2 (:func:`default_metric`).
* ``minReplicas`` defaults to 1 (LLMKube's default), ``maxReplicas`` is required by LLMKube and here.
* Only Pods metrics left out: no policy (``policy`` is ``None``), since a policy with no metric cannot scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kthena_py.importers.context import ImportDocument
from kthena_py.importers.documents import integer, object_list
from kthena_py.importers.llmkube.common import emitted_metadata
from kthena_py.importers.report import ImportFailure

__all__ = ["DEFAULT_METRIC", "VLLM_DEFAULT_METRIC", "PolicyPlan", "autoscaling_policy", "default_metric"]

DEFAULT_METRIC = ("llamacpp:requests_processing", "2")
VLLM_DEFAULT_METRIC = ("vllm:num_requests_running", "2")
AUTOSCALING_API_VERSION = "workload.serving.volcano.sh/v1alpha1"


@dataclass(frozen=True)
class PolicyPlan:
    """The AutoscalingPolicy (or none) and the metrics that could not be carried."""

    policy: dict[str, Any] | None
    dropped_metrics: tuple[str, ...]


def _metric_value(doc: ImportDocument, index: int, item: dict[str, Any]) -> str:
    value = item.get("targetAverageValue")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        path = "spec.autoscaling.metrics[].targetAverageValue"
        raise ImportFailure(doc.index, doc.source, path, f"Pods metric #{index} needs a targetAverageValue")
    return value


def default_metric(runtime: str) -> tuple[str, str]:
    """The metric a policy scales on when the InferenceService lists none."""
    return VLLM_DEFAULT_METRIC if runtime == "vllm" else DEFAULT_METRIC


def autoscaling_policy(doc: ImportDocument, port: int, runtime: str) -> PolicyPlan:
    """The AutoscalingPolicy of ``doc`` (which has ``spec.autoscaling``) for an engine on ``port``."""
    maximum = integer(doc, "spec.autoscaling.maxReplicas")
    if maximum is None:
        raise ImportFailure(doc.index, doc.source, "spec.autoscaling.maxReplicas", "required with autoscaling")
    minimum = integer(doc, "spec.autoscaling.minReplicas")
    items = object_list(doc, "spec.autoscaling.metrics") or []
    metrics: list[tuple[str, str]] = []
    dropped: list[str] = []
    for index, item in enumerate(items):
        name, kind = item.get("name"), item.get("type")
        if not isinstance(name, str) or not name:
            raise ImportFailure(
                doc.index, doc.source, "spec.autoscaling.metrics[].name", f"metric #{index} has no name"
            )
        if kind == "Resource":
            dropped.append(name)
        elif kind == "Pods":
            metrics.append((name, _metric_value(doc, index, dict(item))))
        else:
            path = "spec.autoscaling.metrics[].type"
            raise ImportFailure(doc.index, doc.source, path, f"metric {name!r}: type must be Pods or Resource")
    if not items:
        metrics.append(default_metric(runtime))
    if not metrics:
        return PolicyPlan(None, tuple(dropped))
    sources = {name: {"pod": {"name": name, "uri": "/metrics", "port": port}} for name, _ in metrics}
    policy = {
        "apiVersion": AUTOSCALING_API_VERSION,
        "kind": "AutoscalingPolicy",
        "metadata": emitted_metadata(doc),
        "spec": {
            "metrics": [{"name": name, "targetValue": value} for name, value in metrics],
            "homogeneousTarget": {
                "minReplicas": 1 if minimum is None else minimum,
                "maxReplicas": maximum,
                "target": {"targetRef": {"kind": "ModelServing", "name": doc.name}, "metricSources": sources},
            },
        },
    }
    return PolicyPlan(policy, tuple(dropped))
