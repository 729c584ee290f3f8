"""Pure validators for the ``workload.serving.volcano.sh/v1alpha1`` kinds (no I/O, no clock).

Entry points:

* :func:`validate_document` takes a decoded manifest, dispatches on ``apiVersion``/``kind``, runs the schema
  (pydantic) and then the semantic rules, and returns Kubernetes-style :class:`FieldError` objects.
* :func:`validate_modelserving`, :func:`validate_autoscalingpolicy`, :func:`validate_modelbooster`,
  :func:`validate_modelcache` and :func:`validate_modelpool` take
  parsed models (plus the stored object on UPDATE) and run the webhook/CEL rules only.
* :func:`modelpool_conflicts` and :func:`autoscalingpolicy_conflicts` are the rules across objects that keep a
  ModelPool the only writer of its members' replicas (the webhook passes them the namespace's other objects).
* :func:`parse_model` runs only the schema and converts pydantic errors into field errors.

``str(error)`` renders like Go's ``field.Error``; :func:`aggregate_message` renders a webhook denial.
"""

from kthena_py.api.validation.autoscaling import validate_autoscalingpolicy
from kthena_py.api.validation.common import (
    image_error,
    is_dns1035_label,
    validate_int_or_percent,
    validate_pod_template,
)
from kthena_py.api.validation.document import KINDS, validate_document
from kthena_py.api.validation.errors import (
    OMITTED,
    ErrorType,
    FieldError,
    aggregate_message,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    required,
    too_long,
    too_many,
)
from kthena_py.api.validation.modelbooster import validate_modelbooster
from kthena_py.api.validation.modelcache import validate_modelcache
from kthena_py.api.validation.modelpool import validate_modelpool
from kthena_py.api.validation.modelserving import validate_modelserving
from kthena_py.api.validation.modelserving_update import COORDINATION_BLOCKED_CONDITION
from kthena_py.api.validation.poolmembers import autoscalingpolicy_conflicts, modelpool_conflicts
from kthena_py.api.validation.schema import loc_to_path, parse_model

__all__ = [
    "COORDINATION_BLOCKED_CONDITION",
    "KINDS",
    "OMITTED",
    "ErrorType",
    "FieldError",
    "aggregate_message",
    "autoscalingpolicy_conflicts",
    "duplicate",
    "forbidden",
    "image_error",
    "invalid",
    "is_dns1035_label",
    "loc_to_path",
    "modelpool_conflicts",
    "not_found",
    "not_supported",
    "parse_model",
    "required",
    "too_long",
    "too_many",
    "validate_autoscalingpolicy",
    "validate_document",
    "validate_int_or_percent",
    "validate_modelbooster",
    "validate_modelcache",
    "validate_modelpool",
    "validate_modelserving",
    "validate_pod_template",
]
