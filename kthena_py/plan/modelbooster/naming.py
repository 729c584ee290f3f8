"""Names, labels, annotations and owner references of the objects a ModelBooster expands into.

Guarantees:

* Names and the five ``workload.serving.volcano.sh/*`` labels are Kthena's (modelbooster.md section 3):
  ModelServing and ModelServer ``<booster>-<backend>``, ModelRoute ``<booster>``; routing depends on the
  ``model-uid`` label, which the ModelServer selects pods by.
* The owner reference is Kthena's: exactly one, to the ModelBooster, ``controller`` and ``blockOwnerDeletion``.
* :func:`revision` is a stable hash of any JSON value (canonical JSON, SHA-256), in the alphabet the
  ModelServing revisions use; Kthena's FNV-32 over a Go dump cannot be reproduced and nothing reads the value
  except the controller that wrote it.
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.common import API_VERSION, MODEL_BOOSTER_KIND
from kthena_py.api.modelbooster import ModelBooster
from kthena_py.plan.modelserving.core.revision import encode_hash
from kthena_py.vocab.labels import (
    BOOSTER_BACKEND_NAME,
    BOOSTER_MANAGED_BY,
    BOOSTER_MANAGED_BY_VALUE,
    BOOSTER_MIGRATED,
    BOOSTER_MODEL_NAME,
    BOOSTER_MODEL_UID,
    BOOSTER_REPLICAS,
    BOOSTER_REVISION,
)
from kthena_py.vocab.owners import controller_reference

__all__ = [
    "ANNOTATION_MIGRATED",
    "ANNOTATION_REPLICAS",
    "LABEL_BACKEND_NAME",
    "LABEL_MANAGED_BY",
    "LABEL_MODEL_NAME",
    "LABEL_MODEL_UID",
    "LABEL_REVISION",
    "MANAGED_BY",
    "MANAGED_BY_SELECTOR",
    "NETWORKING_API_VERSION",
    "NETWORKING_GROUP",
    "booster_labels",
    "modelroute_name",
    "modelserver_name",
    "modelserving_name",
    "owner_reference",
    "revision",
]

LABEL_MODEL_NAME = BOOSTER_MODEL_NAME
LABEL_BACKEND_NAME = BOOSTER_BACKEND_NAME
LABEL_MANAGED_BY = BOOSTER_MANAGED_BY
LABEL_REVISION = BOOSTER_REVISION
LABEL_MODEL_UID = BOOSTER_MODEL_UID
MANAGED_BY = BOOSTER_MANAGED_BY_VALUE
MANAGED_BY_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
"""The label selector Kthena's controller watches its children with (and so does ours)."""

ANNOTATION_REPLICAS = BOOSTER_REPLICAS
"""On the ModelServing: the replica counts the booster asked for when it last wrote them (JSON)."""

ANNOTATION_MIGRATED = BOOSTER_MIGRATED
"""On the ModelBooster: set by ``kthena-py modelbooster migrate``; the controller leaves such a booster alone."""

NETWORKING_GROUP = "networking.serving.volcano.sh"
NETWORKING_API_VERSION = f"{NETWORKING_GROUP}/v1alpha1"


def modelserving_name(booster: ModelBooster) -> str:
    """``<booster>-<backend>``."""
    return f"{booster.name}-{booster.spec.backend.name}"


def modelserver_name(booster: ModelBooster) -> str:
    """``<booster>-<backend>``, like the ModelServing."""
    return modelserving_name(booster)


def modelroute_name(booster: ModelBooster) -> str:
    """The booster's own name."""
    return booster.name


def booster_labels(booster: ModelBooster, backend_name: str, revision_value: str) -> dict[str, str]:
    """The five labels every child (and every pod template of the ModelServing) carries."""
    return {
        LABEL_MODEL_NAME: booster.name,
        LABEL_BACKEND_NAME: backend_name,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_REVISION: revision_value,
        LABEL_MODEL_UID: booster.uid,
    }


def owner_reference(booster: ModelBooster) -> dict[str, Any]:
    """The controller reference every child carries."""
    return controller_reference(API_VERSION, MODEL_BOOSTER_KIND, booster.name, booster.uid)


def revision(payload: Any) -> str:
    """A stable hash of a JSON-compatible value (10 characters, valid as a label value)."""
    return encode_hash(payload)
