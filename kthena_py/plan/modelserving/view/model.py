"""The typed tree ``kthena-py status`` shows: a ModelServing, its ServingGroups, role instances and pods.

Guarantees: every type is a frozen value object of plain data (strings, numbers, booleans, tuples), so two trees
built from the same objects at the same ``now`` compare equal and render identically. Times are kept as ages in
seconds relative to the ``now`` the tree was built at (``None`` when unknown), never as clock readings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BAD_KINDS",
    "WAIT_KINDS",
    "ConditionView",
    "GroupView",
    "InstanceView",
    "ModelCacheView",
    "NoteKind",
    "PodView",
    "RevisionState",
    "StatusView",
    "Why",
]

NoteKind = Literal[
    "gpu",
    "resources",
    "queue",
    "unschedulable",
    "scheduling",
    "image",
    "crash",
    "container",
    "failed",
    "starting",
    "not-ready",
    "updating",
    "terminating",
    "eviction",
    "rollout",
    "missing",
    "scale-down",
]
"""What kind of reason a :class:`Why` gives (the JSON output's ``kind``)."""

WAIT_KINDS: frozenset[NoteKind] = frozenset({"gpu", "resources", "queue", "unschedulable", "scheduling"})
"""Kinds that say a pod waits for the scheduler."""
BAD_KINDS: frozenset[NoteKind] = frozenset({"image", "crash", "container", "failed", "unschedulable"})
"""Kinds that do not resolve by waiting: somebody has to act."""

RevisionState = Literal["updated", "current", "old", ""]
"""A revision label compared with the ModelServing's: ``updated`` (= ``updateRevision``), ``current``
(= ``currentRevision``, while it differs from the update revision), ``old`` (any other), ``""`` (no label)."""


@dataclass(frozen=True)
class Why:
    """One reason something is not running (or is held), for a person and for a script."""

    kind: NoteKind
    text: str
    """One line: what it waits for or what is wrong (e.g. ``waiting for GPUs: nvidia.com/gpu 16 per pod``)."""
    detail: str = ""
    """The underlying message as the scheduler, the kubelet or a condition wrote it (may be long)."""
    queue_position: int | None = None


@dataclass(frozen=True)
class ConditionView:
    """One condition of the ModelServing."""

    type: str
    status: str
    reason: str
    message: str
    age: float | None
    """Seconds since ``lastTransitionTime``."""


@dataclass(frozen=True)
class PodView:
    """One pod of a role instance."""

    name: str
    index: int
    phase: str
    ready: bool
    revision: str
    revision_state: RevisionState
    node: str
    restarts: int
    age: float | None
    terminating: bool
    why: Why | None = None
    adapters: tuple[str, ...] = ()
    """The LoRA adapters loaded on the pod (its ``adapter.kthena-py.io/<name>`` labels, with the desired source)."""
    adapters_missing: tuple[str, ...] = ()
    """The adapters of the ModelServing's set this entry pod does not have loaded (yet)."""


@dataclass(frozen=True)
class InstanceView:
    """One role instance (``<role>-<ordinal>``) of a ServingGroup."""

    role: str
    ordinal: int
    name: str
    """The role id, ``<role>-<ordinal>``."""
    ready_pods: int
    expected_pods: int
    ready: bool
    pods: tuple[PodView, ...]
    notes: tuple[Why, ...] = ()
    missing: bool = False
    """Wanted but no pod of it exists yet."""


@dataclass(frozen=True)
class GroupView:
    """One ServingGroup."""

    ordinal: int
    name: str
    ready: bool
    revision: str
    revision_state: RevisionState
    roles: tuple[tuple[str, int, int], ...]
    """Per role of the group: ``(name, ready instances, desired instances)``."""
    instances: tuple[InstanceView, ...]
    podgroup_phase: str = ""
    """The phase of its Volcano PodGroup (``""``: none observed)."""
    notes: tuple[Why, ...] = ()
    missing: bool = False
    """Wanted but no pod of it exists yet."""


@dataclass(frozen=True)
class ModelCacheView:
    """The ModelCache a gated ModelServing waits for or serves from."""

    name: str
    phase: str
    """The cache's ``status.phase`` (``NotFound`` when it does not exist)."""
    ready: bool
    """Whether the serving gate is open."""
    reason: str
    """The ``ModelCached`` reason the gate gives."""
    message: str
    progress: str = ""
    model: str = ""
    """What the staged model is (``llama, 4096 ctx, Q4_K_M``), from the cache's ``status.gguf`` or
    ``status.modelConfig``; empty when the cache does not say."""


@dataclass(frozen=True)
class StatusView:
    """A ModelServing as ``kthena-py status`` shows it."""

    name: str
    namespace: str
    desired: int
    ready: int
    """``status.availableReplicas``: ServingGroups whose every role instance is complete and ready."""
    updated: int
    live: int
    current_revision: str
    update_revision: str
    age: float | None
    conditions: tuple[ConditionView, ...]
    groups: tuple[GroupView, ...]
    notes: tuple[Why, ...] = ()
    """What holds the ModelServing as a whole: scheduling, rollout, eviction budget, a stale status."""
    partition: int = 0
    queue: str = ""
    model_cache: ModelCacheView | None = None
    """The ModelCache it names (``None``: it names none; the JSON document then has no ``modelCache`` key)."""
    scale_from_zero: bool = False
    """Opted in to the activator's scale from zero (shown at zero replicas; the JSON key only when true). Never
    true for a ModelPool member: its pool, not the activator, brings it up."""
    model_pools: tuple[str, ...] = ()
    """The ModelPools listing it as a member (normally at most one; the JSON key only when any)."""
