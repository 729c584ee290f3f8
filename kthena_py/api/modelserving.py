"""``ModelServing`` and its nested types, as specified by the Kthena API reference.

Guarantees (on top of :mod:`kthena_py.api.common`): every field of the reference exists with its documented
default, enum and bounds. Embedded Kubernetes types (the pod spec of a template, plugin ``config``) are opaque
JSON; read them with :mod:`kthena_py.api.podspec`. Cross-field rules (unique role names, rollout settings,
gang policy vs roles, ...) are not schema rules and live in :mod:`kthena_py.api.validation`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kthena_py.api.common import Condition, KthenaModel, KthenaObject, Metadata
from kthena_py.api.intstr import IntOrString
from kthena_py.api.networktopology import NetworkTopology

__all__ = [
    "EvictionStrategySpec",
    "GangPolicy",
    "ModelServing",
    "ModelServingList",
    "ModelServingSpec",
    "ModelServingStatus",
    "PluginScope",
    "PluginSpec",
    "PluginTarget",
    "PluginType",
    "PodTemplateSpec",
    "ProtectionLevelType",
    "RecoveryPolicy",
    "Role",
    "RoleCoordination",
    "RoleRolloutDependency",
    "RollingUpdateConfiguration",
    "RolloutStrategy",
    "RolloutStrategyType",
    "ServingGroup",
    "UpdateMethod",
]

RecoveryPolicy = Literal["ServingGroupRecreate", "RoleRecreate", "None"]
RolloutStrategyType = Literal["ServingGroupRollingUpdate", "RoleRollingUpdate"]
UpdateMethod = Literal["Recreate", "InPlace"]
ProtectionLevelType = Literal["ServingGroup", "Role"]
PluginType = Literal["BuiltIn"]
PluginTarget = Literal["All", "Entry", "Worker"]

ROLE_NAME_PATTERN = r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"


class PodTemplateSpec(KthenaModel):
    """The template of an entry or worker pod: simplified metadata plus an opaque ``PodSpec``."""

    metadata: Metadata | None = None
    spec: dict[str, Any] | None = None


class Role(KthenaModel):
    """One role of a ServingGroup: ``replicas`` instances of one entry pod plus ``workerReplicas`` workers."""

    name: str = Field(max_length=12, pattern=ROLE_NAME_PATTERN)
    replicas: int = 1
    entry_template: PodTemplateSpec
    worker_replicas: int
    worker_template: PodTemplateSpec | None = None
    max_unavailable: IntOrString = IntOrString(1)
    max_surge: IntOrString | None = None
    partition: IntOrString | None = None


class GangPolicy(KthenaModel):
    """Gang-scheduling minimums per role (absent: every role replica is gang-required)."""

    min_role_replicas: dict[str, int] | None = None


class ServingGroup(KthenaModel):
    """The template of one ServingGroup, the smallest unit that completes an inference task."""

    restart_grace_period_seconds: int = 0
    gang_policy: GangPolicy | None = None
    network_topology: NetworkTopology | None = None
    roles: list[Role] = Field(min_length=1, max_length=4)


class PluginScope(KthenaModel):
    """Where a plugin applies: a role whitelist (empty means all) and a pod target (absent means All)."""

    roles: list[str] | None = None
    target: PluginTarget | None = None


class PluginSpec(KthenaModel):
    """A plugin instance attached to a ModelServing."""

    name: str
    type: PluginType = "BuiltIn"
    config: Any = None
    scope: PluginScope | None = None


class RollingUpdateConfiguration(KthenaModel):
    """Availability, surge and partition settings of a rollout."""

    max_unavailable: IntOrString = IntOrString(1)
    max_surge: IntOrString | None = None
    partition: IntOrString | None = None


class RoleRolloutDependency(KthenaModel):
    """A startup dependency: ``role`` starts its target version after the roles in ``dependsOn``."""

    role: str
    depends_on: list[str] | None = None


class RoleCoordination(KthenaModel):
    """Proportional rolling update across roles of each ServingGroup (immutable after creation)."""

    roles: list[str] | None = None
    max_skew: IntOrString | None = None
    dependencies: list[RoleRolloutDependency] | None = None


class EvictionStrategySpec(KthenaModel):
    """The protection budget applied to pod evictions."""

    protection_level: ProtectionLevelType = "ServingGroup"
    min_available: IntOrString | None = None
    role_min_available: dict[str, IntOrString] | None = None


class RolloutStrategy(KthenaModel):
    """How outdated ServingGroups or roles are moved to the desired revision."""

    type: RolloutStrategyType = "ServingGroupRollingUpdate"
    update_method: UpdateMethod = "Recreate"
    progress_deadline_seconds: int | None = Field(default=None, ge=60)
    rolling_update_configuration: RollingUpdateConfiguration | None = None
    role_coordination: RoleCoordination | None = None
    eviction_strategy: EvictionStrategySpec | None = None


class ModelServingSpec(KthenaModel):
    """The desired state of a ModelServing."""

    replicas: int = 1
    scheduler_name: str = "volcano"
    plugins: list[PluginSpec] | None = None
    template: ServingGroup
    rollout_strategy: RolloutStrategy | None = None
    recovery_policy: RecoveryPolicy = "RoleRecreate"
    revision_history_limit: int = Field(default=10, ge=0)


class ModelServingStatus(KthenaModel):
    """The observed state of a ModelServing (``conditions`` is Kthena's, absent from the reference)."""

    observed_generation: int | None = None
    replicas: int | None = None
    current_replicas: int | None = None
    updated_replicas: int | None = None
    available_replicas: int | None = None
    current_revision: str | None = None
    update_revision: str | None = None
    collision_count: int | None = None
    conditions: list[Condition] | None = None
    label_selector: str | None = None


class ModelServing(KthenaObject):
    """A ModelServing: ``replicas`` ServingGroups built from one template."""

    kind: Literal["ModelServing"] = "ModelServing"
    spec: ModelServingSpec
    status: ModelServingStatus | None = None


class ModelServingList(KthenaObject):
    """A list of ModelServings."""

    kind: Literal["ModelServingList"] = "ModelServingList"
    items: list[ModelServing]
