"""Descriptions of the API types and fields, for the CRD schemas (``kubectl explain``) and docs/api.md.

Guarantees: every type and field of the API reference has the reference's own text, extracted once into
``data/descriptions.json`` by ``hack/extract-api-descriptions.py``. Where the reference has no text, or no
entry at all (the ``metav1``-typed fields kthena_py accepts, Volcano's network-topology spec,
``metav1.Condition``), :data:`EXTRA_TYPES` and :data:`EXTRA_FIELDS` provide it; :data:`OVERRIDES` replaces
reference texts that contradict what kthena_py implements. Lookups never raise: an undocumented field has the
empty description (a unit test insists there are none). Code-generator marker text that leaked into the
reference's comments (``MaxItems: 4``, ``kubebuilder:default=All``, ``+optional``) is removed
(:func:`clean`), so ``kubectl explain`` shows prose only; the constraints themselves are in the schema.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

__all__ = [
    "COMMON_FIELDS",
    "EXTRA_FIELDS",
    "EXTRA_TYPES",
    "MARKER",
    "OVERRIDES",
    "field_description",
    "type_description",
    "value_description",
]

#: Types absent from the API reference.
EXTRA_TYPES: dict[str, str] = {
    "NetworkTopologySpec": (
        "NetworkTopologySpec is Volcano's network-topology constraint for a PodGroup or one of its sub-groups "
        "(scheduling.volcano.sh/v1beta1)."
    ),
    "Condition": "Condition contains details for one aspect of the current state of this API resource.",
    "RoleRolloutDependency": (
        "RoleRolloutDependency declares that a Role starts its target version only after the Roles it depends on."
    ),
}

#: Fields absent from the API reference, by type and JSON name.
EXTRA_FIELDS: dict[str, dict[str, str]] = {
    "AutoscalingPolicyStablePolicy": {
        "period": "Period is the length of the window the Instances and Percent limits apply to. Defaults to 15s.",
        "stabilizationWindow": (
            "StabilizationWindow is how far back recommendations are considered before acting; the most "
            "conservative recommendation in the window wins. Unset means no stabilization."
        ),
    },
    "AutoscalingPolicyPanicPolicy": {
        "period": "Period is the length of the window the Percent limit applies to in panic mode.",
        "panicModeHold": (
            "PanicModeHold is how long panic mode lasts after it was last triggered. 0s disables panic mode. "
            "Defaults to 60s."
        ),
    },
    "PodMetricSource": {
        "labelSelector": (
            "LabelSelector narrows the target's pods that are scraped (for example the decode role only); "
            "unset means every pod of the target."
        ),
    },
    "AutoscalingPolicyStatus": {"conditions": "Conditions describe the current state of the policy."},
    "ServingGroup": {
        "roles": (
            "Roles are the roles of every ServingGroup (1 to 4), for example prefill and decode. Each role "
            "instance is an entry pod plus workerReplicas worker pods."
        ),
    },
    "ModelServingStatus": {"conditions": "Conditions describe the current state of the ModelServing."},
    "ModelStatus": {"conditions": "Conditions describe the current state of the ModelBooster."},
    "TargetScalingStatus": {"lastScaleTime": "LastScaleTime is when the unit was last scaled."},
    "RoleRatioStatus": {
        "numeratorRole": "NumeratorRole is the role on the numerator side of the ratio.",
        "denominatorRole": "DenominatorRole is the role on the denominator side of the ratio.",
        "currentRatio": "CurrentRatio is the observed replicas[numeratorRole] / replicas[denominatorRole].",
    },
    "NetworkTopologySpec": {
        "mode": (
            "Mode is hard (the tier constraint must be met for the pods to be scheduled) or soft (best effort). "
            "Defaults to hard."
        ),
        "highestTierAllowed": (
            "HighestTierAllowed is the highest network tier the pods may span. Cannot be set together with "
            "highestTierName."
        ),
        "highestTierName": (
            "HighestTierName names the highest network tier the pods may span. Cannot be set together with "
            "highestTierAllowed."
        ),
    },
    "Condition": {
        "type": "Type of the condition, in CamelCase or in foo.example.com/CamelCase.",
        "status": "Status of the condition: True, False or Unknown.",
        "observedGeneration": "The .metadata.generation the condition was set based upon.",
        "lastTransitionTime": "The last time the condition transitioned from one status to another.",
        "reason": "A programmatic identifier (CamelCase) of the reason for the last transition.",
        "message": "A human-readable message with details about the transition.",
    },
}

#: Reference texts replaced because they contradict the API kthena_py implements (see ``DIFFERENCES``).
OVERRIDES: dict[str, dict[str, str]] = {
    "PluginScope": {
        "target": "Target limits the plugin to specific pod targets (All, Entry or Worker). Unset means All.",
    },
}

#: The standard texts of ``apiVersion``, ``kind`` and ``metadata`` of a top-level object.
COMMON_FIELDS = {
    "apiVersion": (
        "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
        "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
    ),
    "kind": (
        "Kind is a string value representing the REST resource this object represents. Servers may infer this "
        "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
    ),
    "metadata": (
        "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    ),
}


#: Code-generator markers (kubebuilder validation markers, ``+optional``, ``+listType=...``) in comment text.
MARKER = re.compile(
    r"\+?kubebuilder:\S+"
    r"|\+(?:optional|required|k8s:\S+|listType=\S+|listMapKey=\S+|mapType=\S+|structType=\S+)"
    r"|\b(?:MaxItems|MinItems|MaxLength|MinLength|Maximum|Minimum|ExclusiveMaximum|ExclusiveMinimum|MaxProperties"
    r"|MinProperties|MultipleOf):\s*-?\d+(?:\.\d+)?"
)


def clean(text: str) -> str:
    """Remove marker text (see :data:`MARKER`) from a description and tidy the spaces left behind."""
    text = MARKER.sub("", text)
    return re.sub(r"\s{2,}", " ", text).strip()


@functools.cache
def _reference() -> dict[str, Any]:
    text = resources.files("kthena_py.api.crdgen").joinpath("data", "descriptions.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def type_description(type_name: str) -> str:
    """Return the description of a type (``""`` when undocumented).

    Args:
        type_name: The type's name in the API reference, e.g. ``ServingGroup``.
    """
    types: dict[str, str] = _reference()["types"]
    return clean(types.get(type_name, "")) or EXTRA_TYPES.get(type_name, "")


def field_description(type_name: str, json_name: str) -> str:
    """Return the description of a field (``""`` when undocumented).

    Args:
        type_name: The type that has the field, e.g. ``Role``.
        json_name: The field's JSON name, e.g. ``workerReplicas``.
    """
    override = OVERRIDES.get(type_name, {}).get(json_name)
    if override:
        return override
    fields: dict[str, dict[str, str]] = _reference()["fields"]
    text = clean(fields.get(type_name, {}).get(json_name, ""))
    return text or EXTRA_FIELDS.get(type_name, {}).get(json_name, "")


def value_description(type_name: str, value: str) -> str:
    """Return the description of one value of an enum type (``""`` when undocumented)."""
    values: dict[str, dict[str, str]] = _reference()["values"]
    return clean(values.get(type_name, {}).get(value, ""))
