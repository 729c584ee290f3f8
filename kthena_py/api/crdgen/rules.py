"""CEL rules (``x-kubernetes-validations``) and list types of the generated CRDs.

These are the cross-field rules the API server can enforce by itself, so they hold even for a request that
reaches the server while no webhook answers (``failurePolicy: Fail`` still stops it, but a webhook can be
misconfigured or deleted). Each rule mirrors a rule of :mod:`kthena_py.api.validation` and uses the same
message, field path and error type where CEL can express them:

* ``reason`` renders like the validator's error type (``Forbidden: ...``, ``Required value: ...``);
  without ``reason`` the server renders ``Invalid value: "object": <message>`` at the rule's path.
* ``fieldPath`` moves the error to the field the validator reports.

Rules that need more than CEL offers (DNS-1035 role names, percentage parsing, dependency cycles, budgets
resolved against replicas, ModelBooster's engine configuration) and rules whose list has no length bound
(CEL cost limits) are left to the webhook. Transition rules (those using ``oldSelf``) only run on UPDATE.

ModelCache: exactly one storage kind, ``sha256`` and ``fileSHA256`` exclusive, and ``spec.storage`` immutable
(a changed storage is a new cache). That every ``fileSHA256`` key is one of ``files`` is the webhook's (both
are unbounded, so CEL's cost estimate would refuse the rule).

ModelPool: ``default`` names a member and ``swapBudget`` is positive. That the members are unique is the
webhook's (a pairwise rule over an unbounded list exceeds CEL's cost limit), as are the checks across objects
(a ModelServing in two pools, an AutoscalingPolicy targeting a member).

``minRoleReplicas`` is immutable once set, as in Kthena (a gang minimum changed under running PodGroups
would silently change what "all or nothing" means for existing groups).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kthena_py.api.autoscaling import (
    AutoscalingPolicySpec,
    AutoscalingPolicyStatus,
    DisaggregatedTarget,
    MetricSource,
    PrometheusMetricSource,
    RoleRatioConstraint,
)
from kthena_py.api.modelbooster import ModelStatus
from kthena_py.api.modelcache import ModelCacheSpec, ModelCacheStatus, ModelCacheStorage
from kthena_py.api.modelpool import (
    DEFAULT_NOT_A_MEMBER_MESSAGE,
    SWAP_BUDGET_MESSAGE,
    ModelPoolSpec,
    ModelPoolStatus,
)
from kthena_py.api.modelserving import (
    GangPolicy,
    ModelServingSpec,
    ModelServingStatus,
    Role,
    RoleCoordination,
    RolloutStrategy,
    ServingGroup,
)
from kthena_py.api.networktopology import NetworkTopologySpec

__all__ = [
    "FIELD_EXTENSIONS",
    "FIELD_RULES",
    "STORAGE_IMMUTABLE_MESSAGE",
    "TYPE_RULES",
]

STORAGE_IMMUTABLE_MESSAGE = "storage is immutable: a changed storage is a new cache (create another ModelCache)"
"""The message of the API server and of the webhook when an update changes a ModelCache's ``spec.storage``."""

Rule = dict[str, Any]

_PAIR_MESSAGE = (
    "incompatible recoveryPolicy and rolloutStrategy.type after applying defaults: "
    "recoveryPolicy=ServingGroupRecreate, rolloutStrategy.type=RoleRollingUpdate; valid pairs: "
    "(ServingGroupRecreate,ServingGroupRollingUpdate) or (RoleRecreate,RoleRollingUpdate)"
)

_ROLLING_CONFIG_MESSAGE = (
    "rollingUpdateConfiguration is only valid when rolloutStrategy.type is ServingGroupRollingUpdate"
)

# The names spelled out one by one (roles has at most 4 items): join() over a list has no cost bound.
_OLD_NAMES = " + ".join(
    ["oldSelf.roles[0].name"]
    + [f"(size(oldSelf.roles) > {i} ? ' ' + oldSelf.roles[{i}].name : '')" for i in range(1, 4)]
)
_ROLE_NAMES_MESSAGE = f"'role names are immutable; existing role names are [' + {_OLD_NAMES} + ']'"

#: Rules attached to the object schema of a model.
TYPE_RULES: dict[type[BaseModel], list[Rule]] = {
    ModelServingSpec: [
        {
            "rule": (
                "!(self.recoveryPolicy == 'ServingGroupRecreate' && has(self.rolloutStrategy) && "
                "self.rolloutStrategy.type == 'RoleRollingUpdate')"
            ),
            "message": _PAIR_MESSAGE,
            "fieldPath": ".rolloutStrategy.type",
        },
        {
            "rule": (
                "(has(self.rolloutStrategy) && has(self.rolloutStrategy.roleCoordination)) == "
                "(has(oldSelf.rolloutStrategy) && has(oldSelf.rolloutStrategy.roleCoordination))"
            ),
            "message": "roleCoordination cannot be added or removed after creation",
            "fieldPath": ".rolloutStrategy.roleCoordination",
            "reason": "FieldValueForbidden",
        },
    ],
    ServingGroup: [
        {"rule": "!has(oldSelf.gangPolicy) || has(self.gangPolicy)", "message": "gangPolicy is required once set"},
        {
            "rule": (
                "self.roles.all(r, oldSelf.roles.exists(o, o.name == r.name)) && "
                "oldSelf.roles.all(o, self.roles.exists(r, r.name == o.name))"
            ),
            "messageExpression": _ROLE_NAMES_MESSAGE,
            "fieldPath": ".roles",
        },
        {
            "rule": (
                "has(self.networkTopology) == has(oldSelf.networkTopology) && "
                "(!has(self.networkTopology) || self.networkTopology == oldSelf.networkTopology)"
            ),
            "message": "field is immutable",
            "fieldPath": ".networkTopology",
        },
    ],
    GangPolicy: [
        {
            "rule": "!has(oldSelf.minRoleReplicas) || has(self.minRoleReplicas)",
            "message": "minRoleReplicas is required once set",
        },
        {
            "rule": (
                "!has(oldSelf.minRoleReplicas) || !has(self.minRoleReplicas) || "
                "self.minRoleReplicas == oldSelf.minRoleReplicas"
            ),
            "message": "minRoleReplicas is immutable",
            "fieldPath": ".minRoleReplicas",
        },
    ],
    Role: [
        {
            "rule": "self.workerReplicas <= 0 || has(self.workerTemplate)",
            "message": "workerTemplate is required when workerReplicas is greater than 0",
            "fieldPath": ".workerTemplate",
            "reason": "FieldValueRequired",
        },
    ],
    NetworkTopologySpec: [
        {
            "rule": "!(has(self.highestTierAllowed) && has(self.highestTierName))",
            "message": "highestTierName and highestTierAllowed cannot be set simultaneously",
            "fieldPath": ".highestTierName",
            "reason": "FieldValueForbidden",
        },
    ],
    RolloutStrategy: [
        {
            "rule": "!has(self.rollingUpdateConfiguration) || self.type != 'RoleRollingUpdate'",
            "message": _ROLLING_CONFIG_MESSAGE,
            "fieldPath": ".rollingUpdateConfiguration",
            "reason": "FieldValueForbidden",
        },
        {
            "rule": "!has(self.roleCoordination) || self.type == 'RoleRollingUpdate'",
            "message": "coordination is only valid when rolloutStrategy.type is RoleRollingUpdate",
            "fieldPath": ".roleCoordination",
            "reason": "FieldValueForbidden",
        },
    ],
    RoleCoordination: [{"rule": "self == oldSelf", "message": "field is immutable"}],
    AutoscalingPolicySpec: [
        {
            "rule": (
                "[has(self.homogeneousTarget), has(self.heterogeneousTarget), has(self.disaggregatedTarget)]"
                ".filter(x, x).size() <= 1"
            ),
            "message": "at most one of homogeneousTarget, heterogeneousTarget, or disaggregatedTarget may be set",
        },
    ],
    DisaggregatedTarget: [
        {
            "rule": "!has(self.ratioConstraint) || size(self.roles) >= 2",
            "message": "roles must contain at least two entries when ratioConstraint is configured",
        },
    ],
    RoleRatioConstraint: [
        {
            "rule": "self.numeratorRole != self.denominatorRole",
            "message": "numeratorRole and denominatorRole must differ",
        },
    ],
    ModelCacheStorage: [
        {
            "rule": (
                "[has(self.persistentVolumeClaim), has(self.volumeClaimTemplate), has(self.nodeLocal)]"
                ".filter(x, x).size() == 1"
            ),
            "message": "exactly one of persistentVolumeClaim, volumeClaimTemplate, nodeLocal must be set",
        },
    ],
    ModelCacheSpec: [
        {
            "rule": "!(has(self.sha256) && has(self.fileSHA256))",
            "message": "sha256 and fileSHA256 are mutually exclusive: sha256 pins a one-file model",
            "fieldPath": ".fileSHA256",
            "reason": "FieldValueForbidden",
        },
    ],
    ModelPoolSpec: [
        {
            "rule": "!has(self.default) || self.members.exists(m, m.modelServingRef.name == self.default)",
            "message": DEFAULT_NOT_A_MEMBER_MESSAGE,
            "fieldPath": ".default",
        },
    ],
    MetricSource: [
        {"rule": "has(self.pod) || has(self.prometheus)", "message": "one metric source backend config is required"},
        {
            "rule": "!(has(self.pod) && has(self.prometheus))",
            "message": "pod and prometheus configs are mutually exclusive",
        },
    ],
}

#: Rules attached to one field's schema, by (model, JSON name).
FIELD_RULES: dict[tuple[type[BaseModel], str], list[Rule]] = {
    (ServingGroup, "roles"): [
        {"rule": "self.all(x, self.exists_one(y, y.name == x.name))", "message": "roles name must be unique"},
    ],
    (ModelCacheSpec, "storage"): [
        {"rule": "self == oldSelf", "message": STORAGE_IMMUTABLE_MESSAGE},
    ],
    (ModelPoolSpec, "swapBudget"): [
        {"rule": "duration(self) > duration('0s')", "message": SWAP_BUDGET_MESSAGE},
    ],
}

_CONDITIONS = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}

#: Extra schema keys of one field (list types, formats the models do not carry), by (model, JSON name).
FIELD_EXTENSIONS: dict[tuple[type[BaseModel], str], dict[str, Any]] = {
    (ModelServingStatus, "conditions"): _CONDITIONS,
    (AutoscalingPolicyStatus, "conditions"): _CONDITIONS,
    (ModelStatus, "conditions"): _CONDITIONS,
    (ModelCacheStatus, "conditions"): _CONDITIONS,
    (ModelPoolStatus, "conditions"): _CONDITIONS,
    (PrometheusMetricSource, "serverURL"): {"format": "uri"},
}
