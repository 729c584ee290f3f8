"""Shared pieces of the ``workload.serving.volcano.sh/v1alpha1`` models.

Guarantees every model built on :class:`KthenaModel` gives:

* JSON names are the Kubernetes camelCase names (aliases); Python attributes are snake_case and both are
  accepted on input (``validate_by_name``), while dumps use the JSON names.
* Unknown fields are errors (``extra="forbid"``): the API server silently prunes them, an offline validator
  should say so.
* Validation is strict: ``"1"`` is not an integer and ``1`` is not a string, as in the CRD schema.
* Instances are frozen; use ``model_copy(update=...)`` to derive a changed object.
* Lossless round trip: for a valid document ``d``, ``to_dict(Model.model_validate(d), with_defaults=False)``
  equals ``d`` and ``to_dict(..., with_defaults=True)`` equals ``d`` plus the documented CRD defaults.
  Optional fields default to ``None`` and ``None`` is never serialized.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "API_VERSION",
    "AUTOSCALING_POLICY_KIND",
    "AUTOSCALING_POLICY_LIST_KIND",
    "AUTOSCALING_POLICY_PLURAL",
    "GROUP",
    "MODEL_BOOSTER_KIND",
    "MODEL_BOOSTER_LIST_KIND",
    "MODEL_BOOSTER_PLURAL",
    "MODEL_SERVING_KIND",
    "MODEL_SERVING_LIST_KIND",
    "MODEL_SERVING_PLURAL",
    "VERSION",
    "ApiObject",
    "Condition",
    "KthenaModel",
    "KthenaObject",
    "Metadata",
    "to_dict",
]

GROUP = "workload.serving.volcano.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

MODEL_SERVING_KIND = "ModelServing"
MODEL_SERVING_LIST_KIND = "ModelServingList"
MODEL_SERVING_PLURAL = "modelservings"
AUTOSCALING_POLICY_KIND = "AutoscalingPolicy"
AUTOSCALING_POLICY_LIST_KIND = "AutoscalingPolicyList"
AUTOSCALING_POLICY_PLURAL = "autoscalingpolicies"
MODEL_BOOSTER_KIND = "ModelBooster"
MODEL_BOOSTER_LIST_KIND = "ModelBoosterList"
MODEL_BOOSTER_PLURAL = "modelboosters"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class KthenaModel(BaseModel):
    """Base class of every kthena_py API type (see the module docstring for its guarantees)."""

    model_config = ConfigDict(
        alias_generator=_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
        frozen=True,
    )


class Metadata(KthenaModel):
    """The simplified ObjectMeta of a role pod template: only labels and annotations."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Condition(KthenaModel):
    """A ``metav1.Condition`` as written to ``status.conditions``."""

    type: str = Field(
        max_length=316,
        pattern=(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
    )
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: str
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(max_length=32768)


class ApiObject(KthenaModel):
    """Fields shared by every top-level kind, Kthena's and ours: opaque ``metadata`` and readers of it.

    ``metadata`` is a Kubernetes ObjectMeta kept as a plain dict; the properties below read the parts the
    controllers and validators need. Subclasses pin ``apiVersion`` to their group (a ``Literal``).
    """

    api_version: str
    metadata: dict[str, Any] | None = None

    def _meta(self, key: str) -> Any:
        return (self.metadata or {}).get(key)

    @property
    def name(self) -> str:
        """``metadata.name``, or ``""`` when unset."""
        value = self._meta("name")
        return value if isinstance(value, str) else ""

    @property
    def namespace(self) -> str:
        """``metadata.namespace``, or ``""`` when unset."""
        value = self._meta("namespace")
        return value if isinstance(value, str) else ""

    @property
    def uid(self) -> str:
        """``metadata.uid``, or ``""`` when unset."""
        value = self._meta("uid")
        return value if isinstance(value, str) else ""

    @property
    def generation(self) -> int:
        """``metadata.generation``, or 0 when unset."""
        value = self._meta("generation")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def labels(self) -> dict[str, str]:
        """A copy of ``metadata.labels`` (empty when unset)."""
        value = self._meta("labels")
        return dict(value) if isinstance(value, dict) else {}

    @property
    def annotations(self) -> dict[str, str]:
        """A copy of ``metadata.annotations`` (empty when unset)."""
        value = self._meta("annotations")
        return dict(value) if isinstance(value, dict) else {}


class KthenaObject(ApiObject):
    """A top-level kind of Kthena's group ``workload.serving.volcano.sh/v1alpha1``."""

    api_version: Literal["workload.serving.volcano.sh/v1alpha1"] = "workload.serving.volcano.sh/v1alpha1"


def to_dict(obj: BaseModel, *, with_defaults: bool = True) -> dict[str, Any]:
    """Serialize a model to the JSON-compatible dict the API server would store.

    Args:
        obj: Any kthena_py API model.
        with_defaults: Include defaulted fields (``True``, what the API server stores after CRD defaulting) or
            only fields that were explicitly set (``False``, the exact input document).

    Returns:
        A dict using the JSON (camelCase) field names, without ``None`` values.
    """
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=not with_defaults)
