r"""Kthena's admission handlers: validation of the four kinds (ModelCache is ours), defaulting of AutoscalingPolicy.

Guarantees:

* Validation runs :func:`kthena_py.api.validation.validate_document` (the validators ``kthena-py validate``
  uses) on CREATE and UPDATE; an UPDATE also gets the immutability rules against the stored object. A stored
  object that our schema no longer accepts (written before this webhook, or by Kthena) is not held against the
  update: the new object is then validated as on CREATE.
* A denial is ``422 Invalid`` whose message is Kthena's (``validation failed:\n  - <path>: <error>``), with one
  ``details.causes`` entry per error (``field`` = the path, ``message`` = the error in Kubernetes field-error
  form, ``reason`` = ``FieldValueInvalid``, ``FieldValueRequired``, ...), so clients see the same structure as
  for a schema error.
* Updates that cannot break a rule are admitted without evaluation: the object is being deleted
  (``deletionTimestamp`` set, e.g. finalizer removal), or ``spec`` is unchanged (metadata-only updates of
  objects admitted under older rules keep working).
* A ModelServing's LoRA annotations (``serving.kthena-py.io/lora-*``) are checked on CREATE and on any UPDATE
  that changes them, even a metadata-only one (:func:`kthena_py.plan.adapters.validation.lora_annotation_errors`,
  errors at ``metadata.annotations[...]`` paths).
* ModelBooster creates and spec updates carry Kthena's deprecation warning.
* With a :data:`~kthena_py.controllers.admission.poolguard.Lister`, ModelPool and AutoscalingPolicy writes that
  pass the rules above also get the checks across objects of
  :mod:`~kthena_py.controllers.admission.poolguard` (one pool per ModelServing, no AutoscalingPolicy on a pool
  member), denied the same way; when the neighbours cannot be listed the write is refused (``503``), never
  admitted unchecked.
* Mutation: AutoscalingPolicy CREATE/UPDATE get the patch of
  :func:`kthena_py.controllers.admission.defaults.autoscaling_policy_patch`; nothing is ever denied there.
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.common import GROUP, MODEL_BOOSTER_KIND, MODEL_SERVING_KIND
from kthena_py.api.modelbooster import MODEL_BOOSTER_DEPRECATION_WARNING
from kthena_py.api.modelcache import MODEL_CACHE_GROUP, MODEL_CACHE_KIND
from kthena_py.api.modelpool import MODEL_POOL_GROUP, MODEL_POOL_KIND
from kthena_py.api.validation import ErrorType, FieldError, aggregate_message, validate_document
from kthena_py.plan.adapters.validation import lora_annotation_errors, lora_annotations_of
from kthena_py.runtime.webhook import AdmissionRequest, AdmissionResponse, Handler, StatusCause

from .defaults import autoscaling_policy_patch
from .poolguard import GUARDED_KINDS, Lister, NeighboursUnavailable, pool_guard_errors

__all__ = ["CAUSE_TYPES", "denial", "mutate_autoscaling_policy", "validator"]

#: ``metav1.CauseType`` of each field error type.
CAUSE_TYPES: dict[ErrorType, str] = {
    ErrorType.INVALID: "FieldValueInvalid",
    ErrorType.REQUIRED: "FieldValueRequired",
    ErrorType.DUPLICATE: "FieldValueDuplicate",
    ErrorType.FORBIDDEN: "FieldValueForbidden",
    ErrorType.NOT_SUPPORTED: "FieldValueNotSupported",
    ErrorType.NOT_FOUND: "FieldValueNotFound",
    ErrorType.TOO_LONG: "FieldValueTooLong",
    ErrorType.TOO_MANY: "FieldValueTooMany",
}
_WRITES = ("CREATE", "UPDATE")
#: The group of each kind that is not Kthena's.
_OWN_GROUPS = {MODEL_CACHE_KIND: MODEL_CACHE_GROUP, MODEL_POOL_KIND: MODEL_POOL_GROUP}


def denial(kind: str, name: str, errors: list[FieldError], warnings: tuple[str, ...] = ()) -> AdmissionResponse:
    """Build the ``422 Invalid`` denial for ``errors``.

    Args:
        kind: The object's kind.
        name: The object's name.
        errors: The field errors (at least one).
        warnings: Warnings to pass on.
    """
    causes = [StatusCause(CAUSE_TYPES[error.type], error.body(), error.path) for error in errors]
    return AdmissionResponse.deny(
        aggregate_message(errors),
        code=422,
        reason="Invalid",
        causes=causes,
        details={"name": name, "group": _OWN_GROUPS.get(kind, GROUP), "kind": kind},
        warnings=warnings,
    )


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _deleting(obj: Any) -> bool:
    return bool(_field(_field(obj, "metadata"), "deletionTimestamp"))


def validator(kind: str, lister: Lister | None = None) -> Handler:
    """Return the validating handler of ``kind`` (one of :data:`~kthena_py.api.validation.KINDS`).

    Args:
        kind: The kind the handler reviews.
        lister: Where the checks across objects read the namespace's other objects; ``None`` skips them.
    """

    async def validate(request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in _WRITES or request.sub_resource:
            return AdmissionResponse.allow()
        new, old = request.object, request.old_object if request.operation == "UPDATE" else None
        spec_changed = old is None or _field(new, "spec") != _field(old, "spec")
        warnings: tuple[str, ...] = ()
        if kind == MODEL_BOOSTER_KIND and spec_changed:
            warnings = (MODEL_BOOSTER_DEPRECATION_WARNING,)
        lora = _lora_errors(kind, new, old)
        if old is not None and (_deleting(new) or not spec_changed) and not lora:
            return AdmissionResponse.allow(warnings=warnings)
        errors = validate_document(new, old=old) if spec_changed or old is None else []
        if old is not None and any(error.path.startswith("oldObject") for error in errors):
            errors = validate_document(new)
        errors = [*errors, *lora]
        if not errors and lister is not None and kind in GUARDED_KINDS and isinstance(new, dict):
            stored = old if isinstance(old, dict) else None
            try:
                errors = await pool_guard_errors(kind, new, stored, request.namespace, lister)
            except NeighboursUnavailable as exc:
                return AdmissionResponse.deny(str(exc), code=503, reason="ServiceUnavailable", warnings=warnings)
        if not errors:
            return AdmissionResponse.allow(warnings=warnings)
        name = str(_field(_field(new, "metadata"), "name") or request.name)
        return denial(kind, name, errors, warnings)

    return validate


def _lora_errors(kind: str, new: Any, old: Any) -> list[FieldError]:
    """The errors of a ModelServing's LoRA annotations, on a CREATE or an UPDATE that changes them."""
    if kind != MODEL_SERVING_KIND or not isinstance(new, dict) or _deleting(new):
        return []
    if isinstance(old, dict) and lora_annotations_of(old) == lora_annotations_of(new):
        return []
    return lora_annotation_errors(new)


async def mutate_autoscaling_policy(request: AdmissionRequest) -> AdmissionResponse:
    """Add the CRD-default ``spec.behavior`` sections an AutoscalingPolicy lacks."""
    if request.operation not in _WRITES or request.sub_resource:
        return AdmissionResponse.allow()
    return AdmissionResponse.allow(patch=autoscaling_policy_patch(request.object))
