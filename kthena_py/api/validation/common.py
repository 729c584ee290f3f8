"""Validation helpers shared by the per-kind validators: names, int-or-percent values, pod templates.

Guarantees: DNS label checks return apimachinery's messages verbatim (``IsDNS1035Label``); int-or-percent
checks return Kthena's webhook messages; all helpers are pure and never raise on malformed input.
"""

from __future__ import annotations

import re
from typing import Any

from kthena_py.api.intstr import IntOrString, is_valid_percent, regex_error
from kthena_py.api.modelserving import PodTemplateSpec
from kthena_py.api.quantity import QuantityError, parse_quantity
from kthena_py.api.validation.errors import FieldError, invalid, required

__all__ = [
    "image_error",
    "is_dns1035_label",
    "validate_int_or_percent",
    "validate_pod_template",
]

_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_RE = re.compile(_DNS1035_FMT)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_DNS_LABEL_MAX = 63


def is_dns1035_label(value: str) -> list[str]:
    """Check a DNS-1035 label like apimachinery's ``IsDNS1035Label``.

    Args:
        value: The candidate label.

    Returns:
        An empty list when valid, else apimachinery's messages.
    """
    errors: list[str] = []
    if len(value) > _DNS_LABEL_MAX:
        errors.append(f"must be no more than {_DNS_LABEL_MAX} characters")
    if _DNS1035_RE.fullmatch(value) is None:
        errors.append(regex_error(_DNS1035_MSG, _DNS1035_FMT, "my-name", "abc-123"))
    return errors


def validate_int_or_percent(value: IntOrString | None, path: str) -> list[FieldError]:
    """Validate a non-negative integer or a ``0%``-``100%`` percentage (Kthena's ``validateIntOrPercent``).

    Args:
        value: The value, or ``None`` (always valid).
        path: The field path.

    Returns:
        Errors: ``must be a non-negative integer`` for negative integers, the ``IsValidPercent`` message for
        malformed strings, ``must be a valid percent value (0-100)`` above 100%.
    """
    if value is None:
        return []
    if isinstance(value.value, int):
        if value.value < 0:
            return [invalid(path, value.value, "must be a non-negative integer")]
        return []
    messages = is_valid_percent(value.value)
    if messages:
        return [invalid(path, value.value, message) for message in messages]
    if int(value.value[:-1]) > 100:
        return [invalid(path, value.value, "must be a valid percent value (0-100)")]
    return []


def image_error(image: str) -> str | None:
    """Return Kthena's complaint about a container image reference, or ``None`` when it is acceptable.

    Args:
        image: The image; the empty string is acceptable (the pod schema decides).

    Returns:
        ``"invalid container image reference: ..."`` or ``None``.
    """
    if image == "":
        return None
    if image.strip() == "":
        return "invalid container image reference: image cannot be empty or whitespace only"
    if any(ch.isspace() for ch in image):
        return "invalid container image reference: image cannot contain whitespace"
    return None


def _validate_container(container: Any, path: str) -> list[FieldError]:
    if not isinstance(container, dict):
        return [invalid(path, container, f"{path} in body must be of type object")]
    errors: list[FieldError] = []
    name = container.get("name")
    if not isinstance(name, str) or not name:
        errors.append(required(f"{path}.name"))
    image = container.get("image")
    if image is not None and not isinstance(image, str):
        errors.append(invalid(f"{path}.image", image, f"{path}.image in body must be of type string"))
    elif isinstance(image, str) and (problem := image_error(image)) is not None:
        errors.append(invalid(f"{path}.image", image, problem))
    resources = container.get("resources")
    if isinstance(resources, dict):
        for kind in ("requests", "limits"):
            section = resources.get(kind)
            if not isinstance(section, dict):
                continue
            for resource, quantity in section.items():
                try:
                    if isinstance(quantity, bool) or not isinstance(quantity, str | int):
                        raise QuantityError("must be of type integer or string")
                    parse_quantity(quantity)
                except QuantityError as exc:
                    errors.append(invalid(f"{path}.resources.{kind}.{resource}", quantity, str(exc)))
    return errors


def validate_pod_template(template: PodTemplateSpec | None, path: str) -> list[FieldError]:
    """Check the parts of a pod template that kthena_py reads (the CRD schema checks the rest).

    Args:
        template: The template, or ``None`` (nothing to check).
        path: The template's field path.

    Returns:
        Errors for missing ``spec.containers``, containers that are not objects or have no name, images
        rejected by :func:`image_error`, and resource requests/limits that are not quantities.
    """
    if template is None:
        return []
    spec = template.spec or {}
    containers = spec.get("containers")
    if containers is None:
        return [required(f"{path}.spec.containers")]
    if not isinstance(containers, list):
        return [invalid(f"{path}.spec.containers", containers, f"{path}.spec.containers in body must be of type array")]
    errors: list[FieldError] = []
    for kind in ("containers", "initContainers"):
        items = spec.get(kind) or []
        if not isinstance(items, list):
            errors.append(invalid(f"{path}.spec.{kind}", items, f"{path}.spec.{kind} in body must be of type array"))
            continue
        for index, container in enumerate(items):
            errors.extend(_validate_container(container, f"{path}.spec.{kind}[{index}]"))
    return errors
