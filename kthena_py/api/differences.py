"""Deliberate differences between kthena_py's API/validation and Kthena's (for docs/compatibility.md).

Rule of precedence: where the API reference (the seed) and Kthena's code disagree, the reference wins; where
the reference is silent, Kthena's behaviour is kept unless an entry below says otherwise. "MAIN" is Kthena's
released controller, "NEWER" its newer webhook code (maxSurge, role coordination, eviction budget).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DIFFERENCES", "Difference"]


@dataclass(frozen=True)
class Difference:
    """One deliberate difference.

    Attributes:
        key: A stable identifier.
        area: The kind or field concerned.
        kthena: What Kthena does.
        kthena_py: What kthena_py does.
        reason: Why.
    """

    key: str
    area: str
    kthena: str
    kthena_py: str
    reason: str


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "metav1-fields",
        "AutoscalingPolicy, ModelServing/ModelBooster status",
        "Has period, stabilizationWindow, panicModeHold, PodMetricSource.labelSelector, status.conditions and "
        "lastScaleTime.",
        "Accepts them with Kthena's defaults (period 15s, panicModeHold 60s) although the reference omits them.",
        "The reference generator skips metav1-typed fields; the autoscaler and status writers need them.",
    ),
    Difference(
        "panic-period-optional",
        "AutoscalingPolicy spec.behavior.scaleUp.panicPolicy.period",
        "Required by the CRD.",
        "Optional, no default.",
        "The reference documents panicPolicy without it, so a reference-valid object must be accepted.",
    ),
    Difference(
        "both-zero-budget",
        "ModelServing rollingUpdateConfiguration and role maxUnavailable",
        "MAIN: 'maxUnavailable cannot be 0' whenever it resolves to 0.",
        "'maxUnavailable and maxSurge cannot both resolve to 0', only when some replica is outside the partition "
        "(NEWER's rule); the role 'greater than replicas' check is skipped likewise (e.g. a role scaled to 0).",
        "The reference allows maxUnavailable to resolve to 0 when maxSurge resolves above 0; MAIN rejected "
        "autoscaler patches scaling a RoleRollingUpdate role to 0.",
    ),
    Difference(
        "plugin-names-unique",
        "ModelServing spec.plugins[].name",
        "Not checked.",
        "Duplicate value error.",
        "The reference: 'Name uniquely identifies the plugin instance within the ModelServing'.",
    ),
    Difference(
        "plugin-target-enum",
        "ModelServing spec.plugins[].scope.target",
        "No enum (the kubebuilder markers lack '+').",
        "Enum All|Entry|Worker, no default (absent means All).",
        "The reference documents the enum.",
    ),
    Difference(
        "metric-source-keys",
        "AutoscalingPolicy homogeneous/heterogeneous target.metricSources",
        "Keys are not checked.",
        "Each key must name a spec.metrics entry ('metricSources key must match an effective metric name').",
        "The reference: 'Keys must match AutoscalingPolicy.spec.metrics[].name'.",
    ),
    Difference(
        "replica-bounds",
        "AutoscalingPolicy homogeneousTarget and heterogeneousTarget.params[]",
        "minReplicas <= maxReplicas is not checked.",
        "'minReplicas must be <= maxReplicas', as for disaggregated roles.",
        "An inverted range can never be satisfied.",
    ),
    Difference(
        "tier-exclusive",
        "ModelServing networkTopology.{groupPolicy,rolePolicy}",
        "highestTierAllowed and highestTierName may both be set.",
        "Forbidden.",
        "Volcano documents that they cannot be set simultaneously; rejecting early beats a PodGroup failure.",
    ),
    Difference(
        "role-names-immutable",
        "ModelServing spec.template.roles[].name on UPDATE",
        "NEWER: 'role names are immutable' (exact comparison not known).",
        "The set of names may not change (rename, add, remove); reordering is allowed.",
        "Role names key PodGroups, autoscaling targets and pod names.",
    ),
    Difference(
        "coordination-immutable",
        "ModelServing rolloutStrategy.roleCoordination on UPDATE",
        "Presence and policy immutable.",
        "Presence and the whole object (roles, maxSkew, dependencies) immutable.",
        "The reference: 'Its presence and policy are immutable after creation'.",
    ),
    Difference(
        "topology-immutable-message",
        "ModelServing spec.template.networkTopology on UPDATE",
        "NEWER rejects changes.",
        "Rejects with the standard 'field is immutable'.",
        "Kthena's exact message is not known.",
    ),
    Difference(
        "unknown-fields",
        "all kinds",
        "The API server prunes unknown fields, or refuses them under strict field validation (kubectl apply's "
        "default).",
        "kthena-py validate refuses them as strict validation does, anywhere (pod templates included, from the CRD "
        "schema), as Forbidden 'unknown field \"<path>\"', and reports nothing else then, as the server stops there.",
        "An offline validator should flag typos, and agree with kubectl apply.",
    ),
    Difference(
        "float-quantities",
        "Quantity and IntOrString fields",
        "The CRD (int-or-string) rejects JSON floats.",
        "Same in the models; parse_quantity() itself also accepts floats.",
        "Faithful to the API server; the helper is convenient for computed values.",
    ),
    Difference(
        "pod-template-checks",
        "ModelServing role templates",
        "Image whitespace checks on regular containers only; the rest is the CRD's pod schema.",
        "Also checks init container images, that spec.containers exists, container names and resource quantities.",
        "kthena_py reads these fields, and templates are opaque JSON in the models.",
    ),
    Difference(
        "role-name-first",
        "ModelServing role names and the metadata.name length rule",
        "Checks the generated-name length first, so an upper-case role name is first reported as metadata.name "
        "'invalid name'.",
        "Checks role names first; the length rule measures an invalid role name as if it were valid, so it reports "
        "only real length problems.",
        "The first error should name the real cause.",
    ),
    Difference(
        "generated-name-offline",
        "ModelServing metadata.name length rule",
        "Always checked (the object has a name at admission).",
        "Skipped when metadata.name is absent (generateName).",
        "The final name is unknown offline.",
    ),
    Difference(
        "eviction-messages",
        "ModelServing evictionStrategy.minAvailable / roleMinAvailable",
        "Malformed values: 'invalid minAvailable: <err>'.",
        "The standard int-or-percent messages used by every other rollout field.",
        "One set of messages for one kind of value.",
    ),
    Difference(
        "kv-transfer-config-key",
        "ModelBooster workers[].config",
        "Reads 'kv-transfer-config'.",
        "Also reads 'kv_transfer_config' (the engine flag converter maps '_' to '-').",
        "Both spellings reach vLLM as --kv-transfer-config.",
    ),
    Difference(
        "value-rendering",
        "field error text",
        "Composite bad values print as Go %#v dumps.",
        'Composite values print as compact JSON; CEL-style rules print the value as "object".',
        "Go's struct dumps cannot be reproduced and are not useful.",
    ),
    Difference(
        "spec-required",
        "all kinds",
        "spec is optional in the CRDs; an empty spec fails the webhooks with several messages.",
        "'spec: Required value'.",
        "Every webhook rule needs a spec.",
    ),
    Difference(
        "pod-list-types",
        "ModelServing pod templates, ModelBooster spec.backend.env and workers[].resources",
        "The CRDs keep Kubernetes' list-map and set markers, which a CRD enforces: repeated env names, identical "
        "container ports, repeated image pull secrets or resource claim names are refused although a Pod accepts "
        "them.",
        'List-maps and sets only where the Pod API itself refuses duplicates of exactly that key (see "Pod template '
        'list types" below); every other list is atomic.',
        "A ModelServing (or ModelBooster) should be accepted whenever the pods it describes would be.",
    ),
    Difference(
        "autoscaling-pool-members",
        "AutoscalingPolicy targets",
        "Admits a policy on any ModelServing.",
        "Refuses a policy whose homogeneous, heterogeneous or disaggregated target is a member of a ModelPool (a kind "
        "of kthena_py's own group), naming the pool.",
        "A pool's controller is the only writer of its members' replicas; an autoscaler scaling a member up would put "
        "two models on one GPU slot.",
    ),
)
