"""List types of the embedded pod schemas: uniqueness only where the Pod API itself enforces it.

The vendored PodSpec schema (``data/core_v1.json``) marks many lists ``x-kubernetes-list-type: map`` (or
``set``). For a native Pod those markers only steer server-side apply; whether two items may share a key is
decided by the Pod API's own validation. In a CRD, the API server *enforces* them: a ModelServing whose entry
template has two ``hostAliases`` with the same ``ip`` would be refused (``Duplicate value``) although a Pod with
those aliases is valid. :func:`relax` removes that extra strictness when the schemas are assembled, so
re-vendoring ``core_v1.json`` keeps working.

Guarantees of :func:`relax`:

* A list keeps its ``map`` (with its keys) or ``set`` type only if :data:`POD_LISTS` has an entry for its
  place in a PodSpec that says the Pod API refuses two items sharing exactly those keys (``enforced``) and
  whose recorded vendored type and keys are the ones found. Every other non-atomic list becomes
  ``x-kubernetes-list-type: atomic`` without map keys, including a list the table does not know (a newly
  vendored field): unknown means lenient, never stricter than a Pod.
* Nothing else changes: properties, ``required``, defaults, descriptions and atomic lists stay as vendored,
  so the schema stays structural and pruning and defaulting are unchanged. The input is not modified.

The ``enforced`` facts are established against a real API server (``test/envtest/test_pod_list_uniqueness.py``
creates, with a server-side dry run, a Pod with two items sharing the key for every entry). Ephemeral
containers cannot be set when a Pod is created; their entries copy the regular containers' (the same
Container validation applies to them). ``test/unit/api/test_pod_lists.py`` compares the result with the
vendored schema, with Kthena's CRDs and with docs/compatibility.md.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTAINER_LISTS", "POD_LISTS", "PodList", "list_types", "lookup", "relax"]

Schema = dict[str, Any]

_LIST_TYPE = "x-kubernetes-list-type"
_MAP_KEYS = "x-kubernetes-list-map-keys"


@dataclass(frozen=True)
class PodList:
    """One non-atomic list of the vendored PodSpec schema and what the Pod API does with duplicates.

    Attributes:
        path: Its place in a PodSpec, list items as ``[]``: ``containers[].volumeMounts``.
        list_type: The vendored ``x-kubernetes-list-type`` (``map`` or ``set``).
        keys: The vendored ``x-kubernetes-list-map-keys`` (empty for a set).
        enforced: The Pod API refuses two items sharing ``keys`` (the CRD keeps the list-map or set).
        pod_api: What the Pod API does with two such items (docs and the audit test quote it).
    """

    path: str
    list_type: str
    keys: tuple[str, ...]
    enforced: bool
    pod_api: str


#: Lists inside one container, by their path relative to a Container, for ``containers``,
#: ``initContainers`` and ``ephemeralContainers`` alike.
CONTAINER_LISTS: tuple[PodList, ...] = (
    PodList("env", "map", ("name",), False, "accepted, with a warning (the later item hides the earlier)"),
    PodList(
        "ports",
        "map",
        ("containerPort", "protocol"),
        False,
        "accepted, with a warning (duplicate port definition); only port names must be unique",
    ),
    PodList(
        "resources.claims",
        "map",
        ("name",),
        False,
        "accepted when the requests differ: the Pod API keeps (name, request) pairs unique",
    ),
    PodList(
        "restartPolicyRules[].exitCodes.values",
        "set",
        (),
        False,
        "accepted (an exit code may repeat)",
    ),
    PodList("volumeDevices", "map", ("devicePath",), True, "refused: devicePath must be unique"),
    PodList("volumeMounts", "map", ("mountPath",), True, "refused: mountPath must be unique"),
)

_CONTAINER_KINDS = ("containers", "initContainers", "ephemeralContainers")

#: Every non-atomic list of the vendored PodSpec schema.
POD_LISTS: tuple[PodList, ...] = (
    *(PodList(kind, "map", ("name",), True, "refused: container names are unique") for kind in _CONTAINER_KINDS),
    *(
        PodList(f"{kind}[].{item.path}", item.list_type, item.keys, item.enforced, item.pod_api)
        for kind in _CONTAINER_KINDS
        for item in CONTAINER_LISTS
    ),
    PodList("hostAliases", "map", ("ip",), False, "accepted, with a warning (duplicate ip)"),
    PodList("imagePullSecrets", "map", ("name",), False, "accepted, with a warning (duplicate name)"),
    PodList("resourceClaims", "map", ("name",), True, "refused: claim names are unique"),
    PodList("resources.claims", "map", ("name",), False, "refused as a whole: pod-level resources take no claims"),
    PodList("schedulingGates", "map", ("name",), True, "refused: gate names are unique"),
    PodList(
        "topologySpreadConstraints",
        "map",
        ("topologyKey", "whenUnsatisfiable"),
        True,
        "refused: one constraint per (topologyKey, whenUnsatisfiable)",
    ),
    PodList("volumes", "map", ("name",), True, "refused: volume names are unique"),
    PodList(
        "volumes[].ephemeral.volumeClaimTemplate.metadata.finalizers",
        "set",
        (),
        False,
        "refused as a whole: an ephemeral volume's claim template may not set it",
    ),
    PodList(
        "volumes[].ephemeral.volumeClaimTemplate.metadata.ownerReferences",
        "map",
        ("uid",),
        False,
        "refused as a whole: an ephemeral volume's claim template may not set it",
    ),
)

_BY_PATH = {item.path: item for item in POD_LISTS}


def lookup(path: str) -> PodList | None:
    """Return the :data:`POD_LISTS` entry for a PodSpec path (``containers[].env``), or ``None``."""
    return _BY_PATH.get(path)


def _join(base: str, name: str) -> str:
    return f"{base}.{name}" if base else name


def _walk(schema: Any, path: str, visit: Any) -> None:
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "array" or "items" in schema:
        visit(schema, path)
        _walk(schema.get("items"), f"{path}[]", visit)
    for name, value in (schema.get("properties") or {}).items():
        _walk(value, _join(path, name), visit)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        _walk(additional, f"{path}.*", visit)


def list_types(schema: Schema, at: str = "") -> dict[str, tuple[str, tuple[str, ...]]]:
    """Return ``{PodSpec path: (list type, map keys)}`` for every non-atomic list in ``schema``.

    Args:
        schema: A schema standing for a part of a PodSpec.
        at: Its place in a PodSpec (``""`` for a whole PodSpec, ``containers[].resources`` for a container's
            resources, ``containers[].env`` for an env list).
    """
    found: dict[str, tuple[str, tuple[str, ...]]] = {}

    def visit(node: Schema, path: str) -> None:
        list_type = node.get(_LIST_TYPE, "atomic")
        if list_type != "atomic":
            found[path] = (str(list_type), tuple(node.get(_MAP_KEYS) or ()))

    _walk(schema, at, visit)
    return found


def relax(schema: Schema, at: str = "") -> Schema:
    """Return a copy of ``schema`` whose lists are unique only where the Pod API enforces it.

    Args:
        schema: A vendored schema standing for a part of a PodSpec (the module docstring has the guarantees).
        at: Its place in a PodSpec, as for :func:`list_types`.
    """
    result = copy.deepcopy(schema)

    def visit(node: Schema, path: str) -> None:
        list_type = node.get(_LIST_TYPE, "atomic")
        if list_type == "atomic":
            return
        known = lookup(path)
        keys = tuple(node.get(_MAP_KEYS) or ())
        if known is not None and known.enforced and (known.list_type, known.keys) == (list_type, keys):
            return
        node[_LIST_TYPE] = "atomic"
        node.pop(_MAP_KEYS, None)

    _walk(result, at, visit)
    return result
