"""The contract between the ModelServing planners and the controllers that apply their plans.

Guarantees: every type here is a frozen value object holding plain JSON-compatible data, so plans
can be compared in tests, printed by ``kthena-py render`` and applied by a thin layer that makes
no decisions of its own.

The controller builds an :class:`Observed` snapshot from its informer cache (pods, Services,
PodGroups and ControllerRevisions owned by one ModelServing, and the units its eviction tracker records as
disrupted), calls a planner with the parsed
ModelServing, the snapshot and ``now`` (epoch seconds, passed in: planners never read a clock),
and applies the returned plan: creations in order, deletions with UID preconditions, the status,
events, and a requeue if asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from kthena_py.plan.modelserving.core.modelcache import CacheGate

KubeObject = dict[str, Any]
"""An object as the API server serialises it (JSON decoded)."""


@dataclass(frozen=True)
class MSRef:
    """Identity of the ModelServing being planned (needed for names, owner references, selectors)."""

    name: str
    namespace: str
    uid: str
    generation: int = 0


@dataclass(frozen=True)
class PodGroupSupport:
    """What the cluster offers for gang scheduling (feature-detected by the controller)."""

    crd_served: bool = False
    sub_group_policy: bool = False
    """The installed PodGroup CRD has ``spec.subGroupPolicy`` (else ``minTaskMember`` is used)."""


@dataclass(frozen=True)
class Observed:
    """The objects owned by one ModelServing (controller ownerReference with its UID), as cached.

    Objects are the raw cached dicts; planners must not mutate them.
    """

    pods: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    podgroups: tuple[KubeObject, ...] = ()
    revisions: tuple[KubeObject, ...] = ()
    """ControllerRevisions labelled ``modelserving.volcano.sh/name=<ms>``."""
    refused_pods: frozenset[str] = frozenset()
    """Names of pods whose last creation the API server refused (reported in the failure condition)."""
    foreign_pods: frozenset[str] = frozenset()
    """Names the controller would give pods that are held by pods of another owner (a same-named
    predecessor's pods that have not gone yet); nothing is created under them until they go."""
    disrupted: frozenset[str] = frozenset()
    """Unit keys this ModelServing's eviction tracker records as disrupted now (its unexpired entries, Kthena's
    keys: :mod:`kthena_py.plan.modelserving.core.disruption`): those units count as not ready in every planner."""
    model_cache: CacheGate | None = None
    """The serving gate (:mod:`kthena_py.plan.modelserving.core.modelcache`) when the ModelServing names a ModelCache:
    its mount enters the revision, and while it is closed no pod, Service or PodGroup is created and no rollout step
    is taken. ``None``: it names none (nothing changes)."""


@dataclass(frozen=True)
class Delete:
    """Delete one object, only if it still has ``uid`` (never a replacement)."""

    kind: Literal["Pod", "Service", "PodGroup", "ControllerRevision"]
    name: str
    uid: str
    reason: str = ""


@dataclass(frozen=True)
class Update:
    """Replace the mutable parts of an existing object (merge patch body), guarded by ``uid``."""

    kind: Literal["Pod", "Service", "PodGroup", "ControllerRevision"]
    name: str
    uid: str
    patch: KubeObject
    reason: str = ""


@dataclass(frozen=True)
class PlannedEvent:
    """A Kubernetes Event to record on the ModelServing."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    """What one reconcile should do.

    ``creates`` are full objects (with ownerReferences) in the order they must be created;
    a creation answered with AlreadyExists is fine (level-based: the next reconcile sees it).
    """

    creates: tuple[KubeObject, ...] = ()
    updates: tuple[Update, ...] = ()
    deletes: tuple[Delete, ...] = ()
    status: KubeObject | None = None
    """The full desired ``status`` of the ModelServing, or None to leave it alone."""
    events: tuple[PlannedEvent, ...] = ()
    requeue_after: float | None = None
    reasons: tuple[str, ...] = field(default_factory=tuple)
    """Human-readable explanations of each decision, for logs."""
    awaiting_podgroups: tuple[str, ...] = ()
    """PodGroups whose groups' pods this plan holds back until the PodGroup is observed (gang scheduling)."""
