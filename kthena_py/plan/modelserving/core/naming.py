"""Names, labels, annotations and environment variables of the objects a ModelServing owns.

Guarantees:

* Every constant is byte-identical to Kthena's (modelserving.md §1-§2, router-contract.md §3), so existing
  ModelServer selectors, PD group keys and Volcano integrations keep working.
* Name builders are total and deterministic: ServingGroup ``<ms>-<g>``, role id ``<role>-<r>``, pod
  ``<ms>-<g>-<role>-<r>-<i>`` (``i`` = 0 for the entry pod, ``1..workerReplicas`` for workers), headless Service
  = entry pod name, PodGroup = ServingGroup name, ControllerRevision ``<ms>-<revision>``.
* :func:`parse_ordinal` is the inverse of the builders: it splits on the *last* ``-<digits>`` suffix, like
  Kthena's ``(.*)-([0-9]+)$``.
"""

from __future__ import annotations

import re

from kthena_py.api.common import API_VERSION, MODEL_SERVING_KIND
from kthena_py.api.modelserving import Role
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef, PodGroupSupport
from kthena_py.vocab.labels import (
    ENTRY_VALUE,
    POD_DELETION_COST,
    SERVING_ENTRY,
    SERVING_GROUP_NAME,
    SERVING_NAME,
    SERVING_REVISION,
    SERVING_ROLE,
    SERVING_ROLE_ID,
    SERVING_ROLE_TEMPLATE_HASH,
    VOLCANO_PODGROUP,
    VOLCANO_QUEUE,
    VOLCANO_TASK_SPEC,
)
from kthena_py.vocab.owners import controller_reference

__all__ = [
    "ANNOTATION_DELETION_COST",
    "ANNOTATION_PODGROUP",
    "ANNOTATION_QUEUE",
    "ANNOTATION_TASK_SPEC",
    "CONTROLLER_LABELS",
    "ENTRY_INDEX",
    "ENTRY_LABEL_VALUE",
    "ENV_ENTRY_ADDRESS",
    "ENV_GROUP_SIZE",
    "ENV_WORKER_INDEX",
    "INJECTED_ENV",
    "LABEL_ENTRY",
    "LABEL_GROUP_NAME",
    "LABEL_NAME",
    "LABEL_REVISION",
    "LABEL_ROLE",
    "LABEL_ROLE_ID",
    "LABEL_ROLE_TEMPLATE_HASH",
    "PODGROUP_API_VERSION",
    "PODGROUP_KIND",
    "VOLCANO_SCHEDULER",
    "entry_address",
    "gang_applies",
    "group_name",
    "owner_reference",
    "parse_group_name",
    "parse_ordinal",
    "parse_role_id",
    "pod_name",
    "podgroup_name",
    "revision_name",
    "role_id",
    "service_name",
]

LABEL_NAME = SERVING_NAME
LABEL_GROUP_NAME = SERVING_GROUP_NAME
LABEL_ROLE = SERVING_ROLE
LABEL_ROLE_ID = SERVING_ROLE_ID
LABEL_REVISION = SERVING_REVISION
LABEL_ROLE_TEMPLATE_HASH = SERVING_ROLE_TEMPLATE_HASH
LABEL_ENTRY = SERVING_ENTRY
ENTRY_LABEL_VALUE = ENTRY_VALUE

CONTROLLER_LABELS = frozenset(
    {LABEL_NAME, LABEL_GROUP_NAME, LABEL_ROLE, LABEL_ROLE_ID, LABEL_REVISION, LABEL_ROLE_TEMPLATE_HASH, LABEL_ENTRY}
)
"""Label keys owned by the controller: templates and plugins can never set or overwrite them."""

ANNOTATION_PODGROUP = VOLCANO_PODGROUP
ANNOTATION_TASK_SPEC = VOLCANO_TASK_SPEC
ANNOTATION_QUEUE = VOLCANO_QUEUE
ANNOTATION_DELETION_COST = POD_DELETION_COST

ENV_GROUP_SIZE = "GROUP_SIZE"
ENV_ENTRY_ADDRESS = "ENTRY_ADDRESS"
ENV_WORKER_INDEX = "WORKER_INDEX"
INJECTED_ENV = (ENV_GROUP_SIZE, ENV_ENTRY_ADDRESS, ENV_WORKER_INDEX)
"""Environment variables the controller injects into every container and init container."""

VOLCANO_SCHEDULER = "volcano"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
PODGROUP_KIND = "PodGroup"
ENTRY_INDEX = 0

_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def group_name(ms: str, group: int) -> str:
    """Return the ServingGroup name ``<ms>-<group>``."""
    return f"{ms}-{group}"


def role_id(role: str, ordinal: int) -> str:
    """Return the role instance id ``<role>-<ordinal>`` (also the Volcano task name)."""
    return f"{role}-{ordinal}"


def pod_name(ms: str, group: int, role: str, ordinal: int, index: int) -> str:
    """Return the pod name ``<ms>-<group>-<role>-<ordinal>-<index>`` (``index`` 0 is the entry pod)."""
    return f"{group_name(ms, group)}-{role_id(role, ordinal)}-{index}"


def service_name(ms: str, group: int, role: str, ordinal: int) -> str:
    """Return the headless Service name of a role instance: its entry pod's name."""
    return pod_name(ms, group, role, ordinal, ENTRY_INDEX)


def podgroup_name(ms: str, group: int) -> str:
    """Return the Volcano PodGroup name of a ServingGroup (the ServingGroup name)."""
    return group_name(ms, group)


def revision_name(ms: str, revision: str) -> str:
    """Return the ControllerRevision name ``<ms>-<revision>``."""
    return f"{ms}-{revision}"


def entry_address(ms: str, namespace: str, group: int, role: str, ordinal: int) -> str:
    """Return ``ENTRY_ADDRESS``: ``<entry-pod-name>.<namespace>`` (resolved through the headless Service)."""
    return f"{pod_name(ms, group, role, ordinal, ENTRY_INDEX)}.{namespace}"


def parse_ordinal(name: str) -> tuple[str, int] | None:
    """Split ``name`` on its last ``-<digits>`` suffix.

    Args:
        name: A generated name, e.g. ``"llama-0-prefill-1"``.

    Returns:
        ``(prefix, ordinal)``, e.g. ``("llama-0-prefill", 1)``, or ``None`` without such a suffix.
    """
    match = _ORDINAL.match(name)
    if match is None:
        return None
    return match.group(1), int(match.group(2))


def parse_group_name(ms: str, name: str) -> int | None:
    """Return the ordinal of ServingGroup ``name`` of ModelServing ``ms``, or ``None`` if it is not one."""
    parsed = parse_ordinal(name)
    if parsed is None or parsed[0] != ms or group_name(ms, parsed[1]) != name:
        return None
    return parsed[1]


def parse_role_id(role: str, value: str) -> int | None:
    """Return the ordinal of role id ``value`` of role ``role``, or ``None`` if it is not one."""
    parsed = parse_ordinal(value)
    if parsed is None or parsed[0] != role or role_id(role, parsed[1]) != value:
        return None
    return parsed[1]


def owner_reference(ref: MSRef, *, block_owner_deletion: bool = True) -> KubeObject:
    """Return the controller ownerReference pointing at the ModelServing.

    Args:
        ref: The ModelServing.
        block_owner_deletion: Set ``blockOwnerDeletion`` (pods, Services, ControllerRevisions) or omit it
            (PodGroups, as Kthena does).

    Returns:
        A ``metav1.OwnerReference`` dict.
    """
    return controller_reference(
        API_VERSION, MODEL_SERVING_KIND, ref.name, ref.uid, block_owner_deletion=block_owner_deletion
    )


def gang_applies(scheduler_name: str, support: PodGroupSupport) -> bool:
    """Return whether ServingGroups get PodGroups and Volcano pod annotations.

    Kthena manages a PodGroup iff the PodGroup CRD is served and ``spec.schedulerName`` is ``volcano``,
    whether or not a gang policy is set.
    """
    return support.crd_served and scheduler_name == VOLCANO_SCHEDULER


def needs_service(role: Role) -> bool:
    """Whether a role instance gets a headless Service (Kthena: iff the role has a ``workerTemplate``)."""
    return role.worker_template is not None
