"""Offline rendering: what the controller would create for a ModelServing on an empty cluster.

Guarantees: :func:`render` is deterministic and pure. It assumes a cluster with the Volcano PodGroup CRD
(including ``subGroupPolicy``) and runs the same planners as the controller: the PodGroups first, then, with
those PodGroups fed back as observed, the ServingGroup planner. The result lists the PodGroups, then the
ControllerRevision, then per group, role and instance the headless Service, workers and entry pod, i.e. the
creation order.
"""

from __future__ import annotations

import copy
from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef, Observed, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups

__all__ = ["PLACEHOLDER_UID", "render"]

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
"""The ModelServing uid assumed when the document has none (it appears in ownerReferences)."""

_DEFAULT_NAMESPACE = "default"


def render(ms_dict: dict[str, Any], *, support: PodGroupSupport | None = None) -> list[KubeObject]:
    """Render the objects the controller would create for a ModelServing on an empty cluster.

    Args:
        ms_dict: A ModelServing document; ``metadata.namespace`` defaults to ``default`` and
            ``metadata.uid`` to :data:`PLACEHOLDER_UID`. It is not modified.
        support: The PodGroup support to assume (default: CRD served, with ``subGroupPolicy``).

    Returns:
        The PodGroups, ControllerRevision, Services and Pods, in creation order.

    Raises:
        pydantic.ValidationError: If the document is not a valid ModelServing.
        PluginError: If a plugin is unknown or misconfigured.
    """
    document = copy.deepcopy(ms_dict)
    metadata = document.setdefault("metadata", {})
    metadata.setdefault("namespace", _DEFAULT_NAMESPACE)
    metadata.setdefault("uid", PLACEHOLDER_UID)
    ms = ModelServing.model_validate(document)
    ref = MSRef(ms.name, ms.namespace, ms.uid, ms.generation)
    assumed = support if support is not None else PodGroupSupport(crd_served=True, sub_group_policy=True)
    podgroups = plan_podgroups(ms, ref, Observed(), assumed)
    groups = plan_servinggroups(ms, ref, Observed(podgroups=podgroups.creates), assumed, now=0.0)
    return [*podgroups.creates, *groups.creates]
