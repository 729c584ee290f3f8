"""Render ``docs/api.md``: every kind, type and field of the API, from the same sources as the CRDs.

Guarantees: the page is a pure function of the models, the descriptions and the CEL rules, so a test can
regenerate it and compare. Each type is documented once (in the order first reached from ModelServing,
AutoscalingPolicy and ModelBooster), with one row per field: JSON name, type, whether it is required, its
default, its schema validation (enum, bounds, lengths, pattern, format) and its description; the API server
(CEL) rules of the type follow its table. Embedded Kubernetes types link to the Kubernetes API reference.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from kthena_py.api.autoscaling import SelectPolicyType
from kthena_py.api.crdgen import k8s, rules
from kthena_py.api.crdgen.crd import KIND_SPECS
from kthena_py.api.crdgen.descriptions import COMMON_FIELDS, field_description, type_description, value_description
from kthena_py.api.crdgen.schema import EMBEDDED, field_schema, json_default, model_fields, reachable_models, unwrap
from kthena_py.api.duration import Duration
from kthena_py.api.intstr import IntOrString
from kthena_py.api.modelbooster import ModelBackendType, ModelWorkerType
from kthena_py.api.modelserving import (
    PluginTarget,
    PluginType,
    ProtectionLevelType,
    RecoveryPolicy,
    RolloutStrategyType,
    UpdateMethod,
)
from kthena_py.api.networktopology import NetworkTopologyMode
from kthena_py.api.quantity import Quantity

__all__ = ["render_api_docs"]

#: The enum types of the API, by their reference names.
_ENUM_TYPES: dict[str, Any] = {
    "RecoveryPolicy": RecoveryPolicy,
    "RolloutStrategyType": RolloutStrategyType,
    "UpdateMethod": UpdateMethod,
    "ProtectionLevelType": ProtectionLevelType,
    "PluginType": PluginType,
    "PluginTarget": PluginTarget,
    "SelectPolicyType": SelectPolicyType,
    "ModelBackendType": ModelBackendType,
    "ModelWorkerType": ModelWorkerType,
    "NetworkTopologyMode": NetworkTopologyMode,
}
_ENUMS: dict[frozenset[str], str] = {frozenset(get_args(alias)): name for name, alias in _ENUM_TYPES.items()}
_K8S_DOCS = "https://kubernetes.io/docs/reference/kubernetes-api/"
_EMBEDDED_NAMES = {
    k8s.POD_SPEC: ("PodSpec", "workload-resources/pod-v1/#PodSpec"),
    k8s.OBJECT_REFERENCE: ("ObjectReference", "common-definitions/object-reference/"),
    k8s.LABEL_SELECTOR: ("LabelSelector", "common-definitions/label-selector/"),
    k8s.RESOURCE_REQUIREMENTS: ("ResourceRequirements", "workload-resources/pod-v1/#resources"),
    k8s.AFFINITY: ("Affinity", "workload-resources/pod-v1/#scheduling"),
    k8s.TOLERATION: ("Toleration", "workload-resources/pod-v1/#scheduling"),
    k8s.ENV_VAR: ("EnvVar", "workload-resources/pod-v1/#environment-variables"),
    k8s.ENV_FROM_SOURCE: ("EnvFromSource", "workload-resources/pod-v1/#environment-variables"),
}


def _anchor(name: str) -> str:
    return name.lower()


def _cell(text: str) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return re.sub(r"\s+", " ", text).strip()


def _embedded_type(model: type[BaseModel], json_name: str) -> str | None:
    embedded = EMBEDDED.get((model, json_name))
    if embedded is None:
        return None
    if embedded.core is None:
        return embedded.label
    label, page = _EMBEDDED_NAMES[embedded.core]
    return f"{'[]' if embedded.array else ''}[{label}]({_K8S_DOCS}{page}) (core/v1)"


def _type_name(annotation: Any) -> str:
    annotation = unwrap(annotation)
    origin = get_origin(annotation)
    if annotation is IntOrString:
        return "IntOrString"
    if annotation is Quantity:
        return "Quantity"
    if annotation is Duration:
        return "Duration"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{_anchor(annotation.__name__)})"
    if origin is Literal:
        values = frozenset(str(value) for value in get_args(annotation))
        name = _ENUMS.get(values)
        return f"[{name}](#{_anchor(name)})" if name else "string"
    if origin is list:
        return "[]" + _type_name(get_args(annotation)[0])
    if origin is dict:
        return f"map[string]{_type_name(get_args(annotation)[1])}"
    return {str: "string", int: "integer", bool: "boolean", float: "number"}.get(annotation, str(annotation))


def _validation(schema: dict[str, Any]) -> str:
    parts: list[str] = []
    if "enum" in schema:
        parts.append("Enum: " + ", ".join(f"`{value}`" for value in schema["enum"]))
    for key, label in (
        ("minimum", "Minimum"),
        ("maximum", "Maximum"),
        ("minLength", "MinLength"),
        ("maxLength", "MaxLength"),
        ("minItems", "MinItems"),
        ("maxItems", "MaxItems"),
        ("minProperties", "MinProperties"),
        ("maxProperties", "MaxProperties"),
        ("format", "Format"),
    ):
        if key in schema:
            parts.append(f"{label}: {schema[key]}")
    if "pattern" in schema:
        parts.append(f"Pattern: `{schema['pattern']}`")
    if schema.get("x-kubernetes-list-type") == "map":
        parts.append("List map keyed by " + ", ".join(f"`{key}`" for key in schema["x-kubernetes-list-map-keys"]))
    return "<br>".join(parts)


def _rules(model: type[BaseModel]) -> list[str]:
    lines: list[str] = []
    found = list(rules.TYPE_RULES.get(model, []))
    for json_name, _ in model_fields(model):
        found.extend({**rule, "fieldPath": f".{json_name}"} for rule in rules.FIELD_RULES.get((model, json_name), []))
    for rule in found:
        message = rule.get("message") or "(message computed from the old object)"
        where = f" (reported at `{rule['fieldPath']}`)" if "fieldPath" in rule else ""
        kind = " on update" if "oldSelf" in rule["rule"] else ""
        lines.append(f"- `{rule['rule']}`{kind}: {message}{where}")
    return lines


def _model_section(model: type[BaseModel]) -> list[str]:
    name = model.__name__
    lines = [f"### {name}", ""]
    description = type_description(name)
    if description:
        lines += [description, ""]
    lines += ["| Field | Type | Required | Default | Validation | Description |", "|---|---|---|---|---|---|"]
    for json_name, info in model_fields(model):
        if json_name in COMMON_FIELDS and json_name != "metadata":
            type_text, default, validation = "string", "", ""
            text = COMMON_FIELDS[json_name]
        elif json_name == "metadata" and "kind" in dict(model_fields(model)):
            type_text, default, validation, text = "ObjectMeta", "", "", COMMON_FIELDS["metadata"]
        else:
            schema = field_schema(model, json_name, info)
            type_text = _embedded_type(model, json_name) or _type_name(info.annotation)
            default = ""
            if info.default is not PydanticUndefined and info.default is not None:
                default = f"`{json_default(info.default)}`"
            validation = _validation(schema)
            text = field_description(name, json_name) or str(schema.get("description", ""))
        required = "yes" if info.is_required() else ""
        lines.append(
            f"| `{json_name}` | {_cell(type_text)} | {required} | {_cell(default)} | {_cell(validation)} | "
            f"{_cell(text)} |"
        )
    cel = _rules(model)
    if cel:
        lines += ["", "Rules checked by the API server (CEL):", "", *cel]
    return [*lines, ""]


def _enum_section(name: str) -> list[str]:
    lines = [f"### {name}", ""]
    description = type_description(name)
    if description:
        lines += [description, ""]
    lines += ["| Value | Description |", "|---|---|"]
    for value in get_args(_ENUM_TYPES[name]):
        lines.append(f"| `{value}` | {_cell(value_description(name, str(value)))} |")
    return [*lines, ""]


def render_api_docs() -> str:
    """Return the Markdown of docs/api.md."""
    lines = [
        "# API reference: `workload.serving.volcano.sh/v1alpha1` and `serving.kthena-py.io/v1alpha1`",
        "",
        "<!-- Generated by `kthena-py crds --api-docs docs/api.md` from kthena_py's API models; do not edit. -->",
        "",
        "The kinds below are served by the CRDs in `manifests/crd/` (generated from the same models). Defaults",
        "are applied by the API server; *Validation* lists the schema checks; rules marked CEL are checked by the",
        "API server too; everything else is checked by the validating webhook and by `kthena-py validate`",
        "(see [compatibility.md](compatibility.md) for where kthena_py deliberately differs from Kthena).",
        f"Embedded Kubernetes types use the schemas of Kubernetes {k8s.kubernetes_version()}; lists inside the pod",
        "parts are unique by key only where the Pod API itself refuses duplicates (see",
        "[compatibility.md](compatibility.md#pod-template-list-types)).",
        "",
        "## Kinds",
        "",
        "Kthena's kinds keep Kthena's group; kinds of kthena_py's own (ModelCache, ModelPool) are served in",
        "`serving.kthena-py.io`, so Kthena's API is never extended with fields it does not know.",
        "",
        "| Kind | Group | Resource | Short names | Subresources |",
        "|---|---|---|---|---|",
    ]
    for spec in KIND_SPECS:
        subresources = "status, scale" if spec.scale else "status"
        deprecated = " (deprecated)" if spec.deprecation_warning else ""
        lines.append(
            f"| [{spec.kind}](#{_anchor(spec.kind)}){deprecated} | `{spec.group}/{spec.version}` | `{spec.plural}` | "
            f"{', '.join(f'`{name}`' for name in spec.short_names)} | {subresources} |"
        )
    lines += ["", "## Types", ""]
    seen: list[type[BaseModel]] = []
    for spec in KIND_SPECS:
        for model in reachable_models(spec.model):
            if model not in seen:
                seen.append(model)
    enums: list[str] = []
    for model in seen:
        lines += _model_section(model)
        for _, info in model_fields(model):
            annotation = unwrap(info.annotation)
            while get_origin(annotation) in (list, dict):
                annotation = unwrap(get_args(annotation)[-1])
            if get_origin(annotation) is Literal:
                values = frozenset(str(value) for value in get_args(annotation))
                name = _ENUMS.get(values)
                if name and name not in enums:
                    enums.append(name)
    if enums:
        lines += ["## Enumerations", ""]
        for name in enums:
            lines += _enum_section(name)
    return "\n".join(lines).rstrip() + "\n"
