"""Build the OpenAPI v3 (structural) schema of a kind from its pydantic model.

Guarantees:

* Every field of every model reachable from a kind appears, under its JSON name, with the model's type,
  default, enum and bounds: ``ge``/``le`` become ``minimum``/``maximum``, lengths become ``minLength``/
  ``maxLength``, ``minItems``/``maxItems`` or ``minProperties``/``maxProperties`` by the field's type, a pattern
  becomes ``pattern``, a ``Literal`` becomes an ``enum``, and required fields are ``required``.
* ``IntOrString`` is ``x-kubernetes-int-or-string``; ``Quantity`` is int-or-string with the quantity pattern;
  ``Duration`` is a string. Opaque JSON fields are either a vendored Kubernetes schema (pod specs, object
  references, label selectors, resources, affinity, tolerations, env) listed in :data:`EMBEDDED`, or
  ``x-kubernetes-preserve-unknown-fields`` (plugin and engine ``config``, ``modelMatch``). A field that is opaque
  in the model and in neither list raises ``TypeError``, so no field silently loses its schema.
* The embedded pod parts (pod templates, a worker's resources, affinity and tolerations, a backend's env)
  carry list-maps and sets only where the Pod API enforces that uniqueness itself
  (:func:`kthena_py.api.crdgen.podlists.relax`), so the CRDs accept every pod part a Pod accepts.
* Descriptions come from :mod:`kthena_py.api.crdgen.descriptions`; CEL rules and list types from
  :mod:`kthena_py.api.crdgen.rules`.
* The result is plain JSON data (dicts, lists, strings, numbers, booleans); building it twice gives equal
  results.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from kthena_py.api.autoscaling import DisaggregatedTarget, PodMetricSource, Target, TargetScalingStatus
from kthena_py.api.common import ApiObject, Condition
from kthena_py.api.crdgen import k8s, podlists, rules
from kthena_py.api.crdgen.descriptions import COMMON_FIELDS, field_description, type_description
from kthena_py.api.crdgen.openapi import int_or_string, quantity
from kthena_py.api.duration import Duration
from kthena_py.api.intstr import IntOrString
from kthena_py.api.modelbooster import ModelBackend, ModelBoosterSpec, ModelWorker
from kthena_py.api.modelcache import DownloadPlacement
from kthena_py.api.modelserving import PluginSpec, PodTemplateSpec
from kthena_py.api.quantity import Quantity

__all__ = [
    "EMBEDDED",
    "Embedded",
    "field_schema",
    "json_default",
    "kind_schema",
    "model_fields",
    "reachable_models",
    "unwrap",
]

Schema = dict[str, Any]


@dataclass(frozen=True)
class Embedded:
    """The schema of a field the models keep opaque.

    Attributes:
        core: The vendored Kubernetes schema (e.g. :data:`~kthena_py.api.crdgen.k8s.POD_SPEC`), or ``None``.
        array: The field is a list of ``core``.
        extra: Further schema keys (list types, or the whole schema when ``core`` is ``None``).
        label: How docs/api.md names a field without ``core``.
        pod_path: The place in a PodSpec the field stands for (``""`` for a whole PodSpec,
            ``containers[].env`` for an env list), or ``None`` when it is no part of a pod; when set, list
            types are relaxed by :func:`~kthena_py.api.crdgen.podlists.relax`.
    """

    core: str | None = None
    array: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    pod_path: str | None = None

    def build(self, description: str) -> Schema:
        """Return the field's schema with ``description`` (the embedding field's text)."""
        schema: Schema
        if self.core is None:
            schema = dict(self.extra)
        elif self.array:
            schema = {"type": "array", "items": k8s.core_schema(self.core), **self.extra}
        else:
            schema = {**k8s.core_schema(self.core), **self.extra}
        if self.pod_path is not None:
            schema = podlists.relax(schema, self.pod_path)
        if description:
            schema["description"] = description
        return schema


_ANY = Embedded(extra={"x-kubernetes-preserve-unknown-fields": True}, label="JSON (any value)")
_ANY_OBJECT = Embedded(
    extra={"type": "object", "x-kubernetes-preserve-unknown-fields": True}, label="object (any fields)"
)
_DATE_TIME = Embedded(extra={"type": "string", "format": "date-time"}, label="string (date-time)")

#: Schemas of fields the models keep as opaque JSON (or as plain strings with a known format), by
#: (model, JSON name).
EMBEDDED: dict[tuple[type[BaseModel], str], Embedded] = {
    (PodTemplateSpec, "spec"): Embedded(k8s.POD_SPEC, pod_path=""),
    (Target, "targetRef"): Embedded(k8s.OBJECT_REFERENCE),
    (DisaggregatedTarget, "targetRef"): Embedded(k8s.OBJECT_REFERENCE),
    (PodMetricSource, "labelSelector"): Embedded(k8s.LABEL_SELECTOR),
    (ModelWorker, "resources"): Embedded(k8s.RESOURCE_REQUIREMENTS, pod_path="containers[].resources"),
    (ModelWorker, "affinity"): Embedded(k8s.AFFINITY, pod_path="affinity"),
    (ModelWorker, "tolerations"): Embedded(k8s.TOLERATION, array=True, pod_path="tolerations"),
    (ModelWorker, "config"): _ANY,
    (ModelBackend, "env"): Embedded(k8s.ENV_VAR, array=True, pod_path="containers[].env"),
    (ModelBackend, "envFrom"): Embedded(k8s.ENV_FROM_SOURCE, array=True, pod_path="containers[].envFrom"),
    (ModelBoosterSpec, "modelMatch"): _ANY_OBJECT,
    (DownloadPlacement, "affinity"): Embedded(k8s.AFFINITY, pod_path="affinity"),
    (DownloadPlacement, "tolerations"): Embedded(k8s.TOLERATION, array=True, pod_path="tolerations"),
    (PluginSpec, "config"): _ANY,
    (Condition, "lastTransitionTime"): _DATE_TIME,
    (TargetScalingStatus, "lastScaleTime"): _DATE_TIME,
}


def unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``Optional`` from a field annotation.

    Raises:
        TypeError: For a union of two or more non-``None`` types (no structural schema can express it).
    """
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                raise TypeError(f"cannot express the union {annotation!r} in a structural schema")
            annotation = members[0]
        else:
            return annotation


def model_fields(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo]]:
    """Yield ``(json name, field info)`` for each field of ``model``, in declaration order."""
    for name, info in model.model_fields.items():
        yield info.alias or name, info


def json_default(value: Any) -> Any:
    """Return the JSON form of a model default (``IntOrString``, ``Duration`` and ``Quantity`` unwrapped)."""
    if isinstance(value, IntOrString):
        return value.value
    if isinstance(value, Quantity | Duration):
        return value.raw
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _constraints(schema: Schema, info: FieldInfo, kind: str) -> None:
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif isinstance(item, annotated_types.Gt):
            schema["minimum"], schema["exclusiveMinimum"] = item.gt, True
        elif isinstance(item, annotated_types.Lt):
            schema["maximum"], schema["exclusiveMaximum"] = item.lt, True
        elif isinstance(item, annotated_types.MinLen):
            key = {"array": "minItems", "object": "minProperties"}.get(kind, "minLength")
            schema[key] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            key = {"array": "maxItems", "object": "maxProperties"}.get(kind, "maxLength")
            schema[key] = item.max_length
        elif getattr(item, "pattern", None) is not None:
            schema["pattern"] = item.pattern


def _type_schema(annotation: Any, description: str) -> Schema:
    annotation = unwrap(annotation)
    origin = get_origin(annotation)
    schema: Schema
    if annotation is IntOrString:
        return int_or_string(description or None)
    if annotation is Quantity:
        return quantity(description or None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_schema(annotation, description)
    if annotation is Duration or annotation is str:
        schema = {"type": "string"}
    elif annotation is bool:
        schema = {"type": "boolean"}
    elif annotation is int:
        schema = {"type": "integer"}
    elif annotation is float:
        schema = {"type": "number"}
    elif origin is Literal:
        schema = {"type": "string", "enum": list(get_args(annotation))}
    elif origin is list:
        (item,) = get_args(annotation)
        schema = {"type": "array", "items": _type_schema(item, "")}
    elif origin is dict and get_args(annotation)[1] is not Any:
        schema = {"type": "object", "additionalProperties": _type_schema(get_args(annotation)[1], "")}
    else:
        raise TypeError(f"no schema for {annotation!r}")
    if description:
        schema["description"] = description
    return schema


def field_schema(model: type[BaseModel], json_name: str, info: FieldInfo) -> Schema:
    """Return the schema of one field of ``model`` (see the module docstring).

    Raises:
        TypeError: The field has no structural schema.
    """
    if issubclass(model, ApiObject) and json_name in COMMON_FIELDS:
        if json_name == "metadata":
            return {"type": "object"}  # the API server forbids more: metadata has its own schema
        return {"type": "string", "description": COMMON_FIELDS[json_name]}
    description = field_description(model.__name__, json_name)
    embedded = EMBEDDED.get((model, json_name))
    if embedded is not None:
        schema = embedded.build(description)
    else:
        try:
            schema = _type_schema(info.annotation, description)
        except TypeError as exc:
            raise TypeError(f"{model.__name__}.{json_name}: {exc}") from None
    kind = str(schema.get("type", ""))
    _constraints(schema, info, kind)
    if info.default is not PydanticUndefined and info.default is not None:
        schema["default"] = json_default(info.default)
    schema.update(rules.FIELD_EXTENSIONS.get((model, json_name), {}))
    validations = rules.FIELD_RULES.get((model, json_name))
    if validations:
        # After the rules of the field's own type (an object field keeps both).
        schema["x-kubernetes-validations"] = [
            *schema.get("x-kubernetes-validations", []),
            *(dict(rule) for rule in validations),
        ]
    return schema


def _model_schema(model: type[BaseModel], description: str = "") -> Schema:
    schema: Schema = {"type": "object"}
    text = description or type_description(model.__name__)
    if text:
        schema["description"] = text
    properties: Schema = {}
    required: list[str] = []
    for json_name, info in model_fields(model):
        properties[json_name] = field_schema(model, json_name, info)
        if info.is_required():
            required.append(json_name)
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = required
    validations = rules.TYPE_RULES.get(model)
    if validations:
        schema["x-kubernetes-validations"] = [dict(rule) for rule in validations]
    return schema


def kind_schema(model: type[ApiObject]) -> Schema:
    """Return the ``openAPIV3Schema`` of a top-level kind (ModelServing, AutoscalingPolicy, ModelBooster, ModelCache).

    Raises:
        TypeError: A field has no structural schema (see the module docstring).
    """
    return _model_schema(model)


def reachable_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """Return ``model`` and every model type reachable through its fields, depth first, without repeats."""
    seen: list[type[BaseModel]] = []

    def visit(current: Any) -> None:
        current = unwrap(current)
        origin = get_origin(current)
        if origin in (list, dict):
            for arg in get_args(current):
                visit(arg)
        elif isinstance(current, type) and issubclass(current, BaseModel) and current not in seen:
            seen.append(current)
            for _, info in model_fields(current):
                visit(info.annotation)

    visit(model)
    return seen
