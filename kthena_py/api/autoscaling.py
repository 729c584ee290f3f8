"""``AutoscalingPolicy`` and its nested types, as specified by the Kthena API reference.

Guarantees (on top of :mod:`kthena_py.api.common`): every field of the reference exists with its documented
default, enum and bounds. Kthena also has ``metav1``-typed fields that the reference's generator leaves out;
they are accepted with Kthena's defaults: ``period`` (default ``15s``) and ``stabilizationWindow`` of a stable
policy, ``period`` and ``panicModeHold`` (default ``60s``) of the panic policy, ``PodMetricSource.labelSelector``,
``status.conditions`` and ``TargetScalingStatus.lastScaleTime``. Object references are opaque JSON; read them
with :func:`target_ref_kind` and :func:`target_ref_name`. Cross-field rules (exactly one target, metric names,
ratio constraints, ...) live in :mod:`kthena_py.api.validation`. ``PrometheusMetricSource.serverURL`` must
satisfy the CRD's ``format: uri`` exactly as the API server checks it (:func:`kthena_py.api.uri.uri_error`); a
bad value fails validation with ``must be a URI (an absolute URI or an absolute path): <reason>``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from kthena_py.api.common import Condition, KthenaModel, KthenaObject
from kthena_py.api.duration import Duration
from kthena_py.api.quantity import Quantity
from kthena_py.api.uri import URI_FORMAT, uri_error

__all__ = [
    "AutoscalingPolicy",
    "AutoscalingPolicyBehavior",
    "AutoscalingPolicyList",
    "AutoscalingPolicyMetric",
    "AutoscalingPolicyPanicPolicy",
    "AutoscalingPolicyScaleUpPolicy",
    "AutoscalingPolicySpec",
    "AutoscalingPolicyStablePolicy",
    "AutoscalingPolicyStatus",
    "DisaggregatedScalingStatus",
    "DisaggregatedTarget",
    "HeterogeneousTarget",
    "HeterogeneousTargetParam",
    "HomogeneousTarget",
    "MetricSource",
    "PodMetricSource",
    "PrometheusAuth",
    "PrometheusMetricSource",
    "RoleRatioConstraint",
    "RoleRatioStatus",
    "RoleScalingParam",
    "SelectPolicyType",
    "Target",
    "TargetScalingStatus",
    "target_ref_kind",
    "target_ref_name",
]

SelectPolicyType = Literal["Or", "And"]

_MAX_REPLICAS = 1_000_000


class AutoscalingPolicyMetric(KthenaModel):
    """A metric and the target value that drives scaling."""

    name: str = Field(min_length=1)
    target_value: Quantity


class AutoscalingPolicyStablePolicy(KthenaModel):
    """Rate limits for stable (non-panic) scaling, in either direction."""

    instances: int = Field(default=1, ge=0)
    percent: int = Field(default=100, ge=0, le=1000)
    period: Duration = Duration("15s")
    select_policy: SelectPolicyType = "Or"
    stabilization_window: Duration | None = None


class AutoscalingPolicyPanicPolicy(KthenaModel):
    """Emergency scale-up for sudden traffic surges."""

    percent: int = Field(default=1000, ge=0, le=1000)
    period: Duration | None = None
    panic_threshold_percent: int = Field(default=200, ge=110, le=1000)
    panic_mode_hold: Duration = Duration("60s")


class AutoscalingPolicyScaleUpPolicy(KthenaModel):
    """Scale-up behaviour: a stable policy and a panic policy."""

    stable_policy: AutoscalingPolicyStablePolicy | None = None
    panic_policy: AutoscalingPolicyPanicPolicy | None = None


class AutoscalingPolicyBehavior(KthenaModel):
    """Scale-up and scale-down behaviour."""

    scale_up: AutoscalingPolicyScaleUpPolicy | None = None
    scale_down: AutoscalingPolicyStablePolicy | None = None


class PodMetricSource(KthenaModel):
    """Scrape a metric family from each target pod's HTTP endpoint."""

    name: str | None = None
    uri: str = Field(default="/metrics", pattern=r"^/")
    port: int = Field(default=8100, ge=1, le=65535)
    label_selector: dict[str, Any] | None = None


class PrometheusAuth(KthenaModel):
    """Reserved authentication settings for a Prometheus server (no fields yet)."""


class PrometheusMetricSource(KthenaModel):
    """Read a metric with an instant query against a Prometheus server."""

    server_url: str = Field(alias="serverURL", min_length=1)
    query: str = Field(min_length=1)
    auth: PrometheusAuth | None = None

    @field_validator("server_url")
    @classmethod
    def check_server_url(cls, value: str) -> str:
        """Enforce the CRD's ``format: uri`` as the API server does (Go's ``url.ParseRequestURI``)."""
        reason = uri_error(value)
        if reason is not None:
            raise PydanticCustomError("k8s_invalid", "{detail}", {"detail": f"{URI_FORMAT}: {reason}"})
        return value


class MetricSource(KthenaModel):
    """Where a metric comes from: exactly one of ``pod`` and ``prometheus``."""

    pod: PodMetricSource | None = None
    prometheus: PrometheusMetricSource | None = None


class Target(KthenaModel):
    """A ModelServing to monitor and scale, and how to fetch its metrics."""

    target_ref: dict[str, Any]
    metric_sources: dict[str, MetricSource] | None = None


class HomogeneousTarget(KthenaModel):
    """Metric-based scaling of one ModelServing's ``spec.replicas``."""

    target: Target | None = None
    min_replicas: int = Field(ge=0, le=_MAX_REPLICAS)
    max_replicas: int = Field(ge=1, le=_MAX_REPLICAS)


class HeterogeneousTargetParam(KthenaModel):
    """One ModelServing group of a heterogeneous target, with its relative cost."""

    target: Target | None = None
    cost: int | None = Field(default=None, ge=0)
    min_replicas: int = Field(ge=0, le=_MAX_REPLICAS)
    max_replicas: int = Field(ge=1, le=_MAX_REPLICAS)


class HeterogeneousTarget(KthenaModel):
    """Cost-optimised scaling across several ModelServings."""

    params: list[HeterogeneousTargetParam] | None = Field(default=None, min_length=1)
    cost_expansion_rate_percent: int = Field(default=200, ge=0)


class RoleScalingParam(KthenaModel):
    """Scaling bounds, metrics and metric sources of one role of a disaggregated target."""

    min_replicas: int = Field(ge=0, le=_MAX_REPLICAS)
    max_replicas: int = Field(ge=1, le=_MAX_REPLICAS)
    metrics: list[AutoscalingPolicyMetric] | None = Field(default=None, min_length=1)
    metric_sources: dict[str, MetricSource] | None = None


class RoleRatioConstraint(KthenaModel):
    """Keep ``replicas[numeratorRole] / replicas[denominatorRole]`` within ``[minRatio, maxRatio]``."""

    numerator_role: str
    denominator_role: str
    min_ratio: Quantity
    max_ratio: Quantity


class DisaggregatedTarget(KthenaModel):
    """Coordinated scaling of the roles of one ModelServing."""

    target_ref: dict[str, Any]
    roles: dict[str, RoleScalingParam] = Field(min_length=1, max_length=2)
    ratio_constraint: RoleRatioConstraint | None = None


class AutoscalingPolicySpec(KthenaModel):
    """The desired state of an AutoscalingPolicy."""

    tolerance_percent: int = Field(default=10, ge=0, le=100)
    metrics: list[AutoscalingPolicyMetric] | None = None
    behavior: AutoscalingPolicyBehavior | None = None
    homogeneous_target: HomogeneousTarget | None = None
    heterogeneous_target: HeterogeneousTarget | None = None
    disaggregated_target: DisaggregatedTarget | None = None


class TargetScalingStatus(KthenaModel):
    """The observed scaling state of one scalable unit."""

    name: str | None = None
    current_replicas: int
    desired_replicas: int
    mode: str | None = None
    last_scale_time: str | None = None


class RoleRatioStatus(KthenaModel):
    """The observed value of the ratio constraint."""

    numerator_role: str
    denominator_role: str
    current_ratio: str | None = None


class DisaggregatedScalingStatus(KthenaModel):
    """The observed state of a disaggregated target."""

    roles: list[TargetScalingStatus]
    ratio_status: RoleRatioStatus | None = None
    ratio_adjusted: bool | None = None


class AutoscalingPolicyStatus(KthenaModel):
    """The observed state of an AutoscalingPolicy."""

    observed_generation: int | None = None
    conditions: list[Condition] | None = None
    homogeneous_status: TargetScalingStatus | None = None
    disaggregated_status: DisaggregatedScalingStatus | None = None
    heterogeneous_status: list[TargetScalingStatus] | None = None


class AutoscalingPolicy(KthenaObject):
    """An AutoscalingPolicy: scaling rules, metrics and behaviour for one kind of target."""

    kind: Literal["AutoscalingPolicy"] = "AutoscalingPolicy"
    spec: AutoscalingPolicySpec
    status: AutoscalingPolicyStatus | None = None


class AutoscalingPolicyList(KthenaObject):
    """A list of AutoscalingPolicies."""

    kind: Literal["AutoscalingPolicyList"] = "AutoscalingPolicyList"
    items: list[AutoscalingPolicy]


def target_ref_kind(target_ref: dict[str, Any] | None) -> str:
    """Return the ``kind`` of an ObjectReference dict (``""`` when unset, which means ModelServing)."""
    kind = (target_ref or {}).get("kind")
    return kind if isinstance(kind, str) else ""


def target_ref_name(target_ref: dict[str, Any] | None) -> str:
    """Return the ``name`` of an ObjectReference dict (``""`` when unset)."""
    name = (target_ref or {}).get("name")
    return name if isinstance(name, str) else ""
