"""The vendored Kubernetes schemas (``data/core_v1.json``) that the CRDs embed.

Guarantees: :func:`core_schema` returns a fresh deep copy on every call, so callers may modify it; the
schemas are already inlined and structural (see :mod:`kthena_py.api.crdgen.openapi`). The data was taken from
the ``/openapi/v3/api/v1`` document of the Kubernetes version recorded in :func:`kubernetes_version`.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

__all__ = [
    "AFFINITY",
    "ENV_FROM_SOURCE",
    "ENV_VAR",
    "LABEL_SELECTOR",
    "OBJECT_REFERENCE",
    "POD_SPEC",
    "RESOURCE_REQUIREMENTS",
    "TOLERATION",
    "core_schema",
    "kubernetes_version",
]

POD_SPEC = "io.k8s.api.core.v1.PodSpec"
RESOURCE_REQUIREMENTS = "io.k8s.api.core.v1.ResourceRequirements"
AFFINITY = "io.k8s.api.core.v1.Affinity"
TOLERATION = "io.k8s.api.core.v1.Toleration"
ENV_VAR = "io.k8s.api.core.v1.EnvVar"
ENV_FROM_SOURCE = "io.k8s.api.core.v1.EnvFromSource"
OBJECT_REFERENCE = "io.k8s.api.core.v1.ObjectReference"
LABEL_SELECTOR = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"


@functools.cache
def _data() -> dict[str, Any]:
    text = resources.files("kthena_py.api.crdgen").joinpath("data", "core_v1.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def core_schema(name: str, description: str | None = None) -> dict[str, Any]:
    """Return a copy of one vendored schema.

    Args:
        name: The OpenAPI name, e.g. :data:`POD_SPEC`.
        description: Replaces the type's own description when given (the embedding field's text).

    Raises:
        KeyError: ``name`` was not vendored (add it to ``ROOTS`` in ``hack/vendor-openapi.py``).
    """
    schema = copy.deepcopy(_data()["schemas"][name])
    if description:
        schema["description"] = description
    return dict(schema)


def kubernetes_version() -> str:
    """The Kubernetes version the vendored schemas come from, e.g. ``v1.35.4``."""
    return str(_data()["kubernetesVersion"])
