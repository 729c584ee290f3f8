"""The planning state shared by the ServingGroup, PodGroup, rollout and status planners.

Guarantees:

* :func:`build_state` is a pure function of ``(ms, ref, observed, support)``; every ModelServing planner calls it,
  so they always agree on the update revision, on the resolvable revisions and on the targets of every group and
  role instance (:mod:`kthena_py.plan.modelserving.core.targets`: wanted ordinals with surge and partition, the revision
  each unit is rendered from, readiness, updated-ness).
* The units an eviction recorded as disrupted are part of the observed state (``Observed.disrupted``), not a
  separate argument: a unit recorded there is not ready in the targets of every planner that is given it (the
  ModelServing reconcilers all fill it the same way; the eviction budget leaves it empty and applies the tracker
  itself).
* Revision resolution: a revision string resolves to the current spec when it is the update revision, else to
  the data of the observed ControllerRevision ``<ms>-<revision>`` owned by this ModelServing. Nothing that cannot
  be resolved is silently replaced by the current spec (see the targets module).
* The update revision includes the mount of the ModelCache the ModelServing names (``Observed.model_cache``), so
  re-pointing it at another cache (or a cache at another model) is a rollout like any template change.
* The update revision is salted with ``status.collisionCount`` when it is set (StatefulSet-style): a
  ControllerRevision of the same name recording other data is a collision, reported in ``collision`` so that the
  status planner raises the count and the next reconcile uses a new name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kthena_py.api.modelserving import ModelServing, Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.disruption import disruption_check
from kthena_py.plan.modelserving.core.groups import GroupState, ObservedGroups, parse_observed
from kthena_py.plan.modelserving.core.revision import (
    RevisionData,
    parse_controller_revision,
    revision_data,
    spec_revision_hash,
    stored_revision_hash,
)
from kthena_py.plan.modelserving.core.targets import GroupTarget, Targets, build_targets, effective_roles
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef, Observed, PodGroupSupport
from kthena_py.vocab.owners import controlled_by

__all__ = ["PlanningState", "build_state"]


@dataclass(frozen=True)
class PlanningState:
    """Everything a ModelServing planner derives from its inputs before deciding anything."""

    ms: ModelServing
    ref: MSRef
    revision: str
    """The update revision (hash of the current spec, salted by ``status.collisionCount``)."""
    data: RevisionData
    """The pod-shaping part of the current spec."""
    revisions: dict[str, RevisionData]
    """Resolvable revisions (the current one included), by revision string."""
    revision_objects: dict[str, KubeObject]
    """Observed ControllerRevisions by name."""
    groups: ObservedGroups
    targets: Targets
    gang: bool
    collision: bool = False
    """A ControllerRevision named like the update revision records other data (raise ``collisionCount``)."""
    raw_pods: Mapping[str, KubeObject] = field(default_factory=dict)
    """The observed pods as cached, by name (in-place updates patch and verify them)."""

    def effective_roles(self, data: RevisionData) -> tuple[Role, ...]:
        """The roles of ``data`` with the current spec's role ``replicas`` where the role still exists."""
        return effective_roles(self.ms, data)

    def target(self, ordinal: int) -> GroupTarget | None:
        """The target of a wanted group, else of an observed one (``None`` when neither)."""
        return self.targets.groups.get(ordinal) or self.targets.observed.get(ordinal)

    def group_ready(self, group: GroupState) -> bool:
        """Whether every role of the group has ``replicas`` instances that are complete and ready."""
        target = self.target(group.ordinal)
        return target is not None and target.ready


def _owned(obj: KubeObject, uid: str) -> bool:
    if not uid:
        return True
    return controlled_by(obj, uid)


def build_state(ms: ModelServing, ref: MSRef, observed: Observed, support: PodGroupSupport) -> PlanningState:
    """Derive the planning state.

    Args:
        ms: The ModelServing (parsed, defaulted).
        ref: Its identity.
        observed: The objects it owns and the units recorded as disrupted (they count as not ready).
        support: PodGroup support of the cluster.

    Returns:
        The state every planner works from.
    """
    mount = observed.model_cache.mount if observed.model_cache is not None else None
    data = revision_data(ms.spec, mount)
    salt = (ms.status.collision_count if ms.status is not None else None) or 0
    revision = spec_revision_hash(ms.spec, salt, mount)
    objects: dict[str, KubeObject] = {}
    revisions: dict[str, RevisionData] = {}
    prefix = f"{ref.name}-"
    collision = False
    for obj in observed.revisions:
        name = obj.get("metadata", {}).get("name")
        if not isinstance(name, str):
            continue
        objects[name] = obj
        if not name.startswith(prefix) or not _owned(obj, ref.uid):
            continue
        parsed = parse_controller_revision(obj, ms.spec.scheduler_name)
        if parsed is None:
            continue
        key = name[len(prefix) :]
        if key == revision and stored_revision_hash(parsed, salt) != revision:
            collision = True
            continue
        revisions[key] = parsed
    revisions[revision] = data
    groups = parse_observed(ref.name, observed)
    return PlanningState(
        ms=ms,
        ref=ref,
        revision=revision,
        data=data,
        revisions=revisions,
        revision_objects=objects,
        groups=groups,
        targets=build_targets(
            ms, revision, data, revisions, groups, disruption_check(ms.namespace, ms.name, observed.disrupted)
        ),
        gang=naming.gang_applies(ms.spec.scheduler_name, support),
        collision=collision,
        raw_pods={str(p.get("metadata", {}).get("name")): p for p in observed.pods},
    )
