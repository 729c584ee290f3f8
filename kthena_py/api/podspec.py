"""Read the parts of opaque pod templates that kthena_py needs (containers, images, resources).

Pod specs stay plain JSON dicts in the models (the CRD schema validates them); these helpers read them
defensively. Guarantees: no helper raises on a malformed spec; wrongly typed entries are skipped (use
:func:`kthena_py.api.validation.validate_pod_template` to report them), and quantities are summed exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any

from kthena_py.api.modelserving import PodTemplateSpec
from kthena_py.api.quantity import QuantityError, parse_quantity

# Sums never round (the default decimal context keeps only 28 digits).
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)

__all__ = [
    "container_images",
    "container_resources",
    "pod_spec",
    "sum_resources",
    "template_containers",
    "template_init_containers",
]


def pod_spec(template: PodTemplateSpec | None) -> dict[str, Any]:
    """Return a template's pod spec, or ``{}`` when there is none."""
    if template is None or template.spec is None:
        return {}
    return template.spec


def _dict_items(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def template_containers(template: PodTemplateSpec | None) -> list[dict[str, Any]]:
    """Return the regular containers of a template (entries that are not objects are skipped)."""
    return _dict_items(pod_spec(template).get("containers"))


def template_init_containers(template: PodTemplateSpec | None) -> list[dict[str, Any]]:
    """Return the init containers of a template (entries that are not objects are skipped)."""
    return _dict_items(pod_spec(template).get("initContainers"))


def container_images(template: PodTemplateSpec | None) -> list[str]:
    """Return the images of a template's regular containers, in order (missing images are skipped)."""
    images = (container.get("image") for container in template_containers(template))
    return [image for image in images if isinstance(image, str)]


def container_resources(container: Mapping[str, Any], kind: str = "requests") -> dict[str, Decimal]:
    """Return one container's ``resources.requests`` (or ``limits``) as exact values.

    Args:
        container: A container dict.
        kind: ``"requests"`` or ``"limits"``.

    Returns:
        Resource name to value; entries that are not valid quantities are skipped.
    """
    resources = container.get("resources")
    section = resources.get(kind) if isinstance(resources, dict) else None
    if not isinstance(section, dict):
        return {}
    result: dict[str, Decimal] = {}
    for name, raw in section.items():
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            continue
        try:
            result[name] = parse_quantity(raw)
        except QuantityError:
            continue
    return result


def sum_resources(containers: Iterable[Mapping[str, Any]], kind: str = "requests") -> dict[str, Decimal]:
    """Sum ``requests`` (or ``limits``) over containers, e.g. for a PodGroup's ``minResources``.

    Args:
        containers: Container dicts, e.g. :func:`template_containers` of a template.
        kind: ``"requests"`` or ``"limits"``.

    Returns:
        Resource name to the exact total.
    """
    totals: dict[str, Decimal] = {}
    for container in containers:
        for name, value in container_resources(container, kind).items():
            totals[name] = _EXACT.add(totals.get(name, Decimal(0)), value)
    return totals
