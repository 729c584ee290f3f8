"""The serving gate: whether a ModelServing that names a ModelCache may create pods, and what its pods mount.

A ModelServing names a cache with the annotation :data:`~kthena_py.vocab.labels.MODEL_CACHE` (same namespace).
:func:`decide_gate` is the one decision, a pure function of that name, the ModelServing's templates and the cache
object (or its absence); every ModelServing planner receives it in ``Observed.model_cache``.

Guarantees:

* **No annotation, no gate**: :func:`decide_gate` returns ``None`` and nothing of this module reaches a plan, a
  pod or a revision hash (a ModelServing without the annotation behaves byte for byte as before).
* **Open only on a Ready cache**: the gate is open when the cache's ``status.phase`` is ``Ready``, its status is
  not older than its spec (``observedGeneration`` absent or >= ``metadata.generation``), it is not ``Degraded``,
  and, for a node-local cache, ``status.nodes`` names at least one node. A node-local cache that is Ready on some
  nodes and ``Degraded`` because the download failed on others (``DownloadFailed``, ``IntegrityCheckFailed``)
  is open: its pods go only to the nodes it is Ready on (any other Degraded reason closes it). Otherwise it is
  closed and says why:
  ``WaitingForModelCache`` (absent, Pending, Downloading, stale, ready on no node) or ``ModelCacheFailed``
  (phase Failed or ``Degraded=True``: the cache's Degraded reason and message are carried), or
  ``ModelCacheMountConflict`` (a template already has a volume named :data:`MODEL_CACHE_VOLUME` or a mount at
  :data:`MODEL_CACHE_MOUNT_PATH`: the gate never overrides a user's volume silently, it stays closed).
* **The mount is a function of the cache's spec, and of one verified status field only**: :class:`CacheMount`
  (the cache's name, ``subPath``, and the claim or host path) is what enters the revision. ``subPath`` is
  :func:`~kthena_py.api.modelcache.model_dir` of ``source``/``revision``, unless ``status.servedDirectory``
  names a re-staged copy (``refreshPolicy: OnChange``) *for the current spec's fingerprint*: the cache's
  controller writes that field only once the copy's download succeeded (every file verified, the completion
  marker written), so a pod never mounts a half-written copy, and the change of ``subPath`` is what rolls the
  gated ModelServings onto it under their rolloutStrategy. A field left over from another spec is ignored.
  Otherwise the mount is known whenever the cache exists, whatever its phase, so a cache that goes from
  Downloading to Ready changes no revision. An absent cache gives an unresolved mount (name only).
* The nodes of a node-local cache (``status.nodes``) are *not* part of the mount: they steer where new pods go
  (node affinity), never which revision a pod is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from kthena_py.api.modelcache import MODEL_CACHE_MOUNT_PATH, MODEL_CACHE_VOLUME, ModelCache, ModelCachePhase, model_dir
from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelcache.naming import fingerprint
from kthena_py.vocab.conditions import (
    DEGRADED,
    REASON_DOWNLOAD_FAILED,
    REASON_INTEGRITY_CHECK_FAILED,
    REASON_MODEL_CACHE_CONFLICT,
    REASON_MODEL_CACHE_FAILED,
    REASON_MODEL_CACHE_READY,
    REASON_WAITING_FOR_MODEL_CACHE,
)
from kthena_py.vocab.labels import MODEL_CACHE

__all__ = [
    "CacheGate",
    "CacheMount",
    "GateState",
    "cache_name",
    "decide_gate",
    "format_bytes",
    "mount_of",
    "progress_text",
    "template_conflict",
    "templates_of",
]

GateState = Literal["open", "waiting", "failed", "conflict"]
"""Where a gate stands: only ``open`` lets pods be created."""

_PENDING, _DOWNLOADING, _READY, _FAILED = get_args(ModelCachePhase)
"""The cache's phases, as its API spells them."""


@dataclass(frozen=True)
class CacheMount:
    """What a gated pod mounts: the part of a ModelCache that shapes pods (and so enters the revision)."""

    cache: str
    """The ModelCache's name."""
    sub_path: str | None = None
    """The model's directory inside the storage (``None``: the cache was not found, nothing can be mounted)."""
    claim_name: str | None = None
    """The claim to mount read-only (``persistentVolumeClaim`` or ``volumeClaimTemplate`` storage)."""
    host_path: str | None = None
    """The node-local directory to mount (``nodeLocal`` storage)."""

    @property
    def resolved(self) -> bool:
        """Whether pods can be rendered with it (the cache was found)."""
        return self.sub_path is not None and (self.claim_name is not None or self.host_path is not None)

    @property
    def node_local(self) -> bool:
        """Whether the storage is a node-local path (pods then need affinity to the nodes that hold it)."""
        return self.host_path is not None

    def shape(self) -> dict[str, Any]:
        """The JSON form hashed into the revision and recorded in ControllerRevisions."""
        shape: dict[str, Any] = {"name": self.cache, "mountPath": MODEL_CACHE_MOUNT_PATH, "subPath": self.sub_path}
        if self.claim_name is not None:
            shape["claimName"] = self.claim_name
        if self.host_path is not None:
            shape["hostPath"] = self.host_path
        return shape

    @staticmethod
    def from_shape(raw: Any) -> CacheMount | None:
        """Read :meth:`shape` back (``None`` when ``raw`` is not one)."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            return None

        def text(key: str) -> str | None:
            value = raw.get(key)
            return value if isinstance(value, str) else None

        return CacheMount(str(raw["name"]), text("subPath"), text("claimName"), text("hostPath"))


@dataclass(frozen=True)
class CacheGate:
    """The gate of one ModelServing that names a ModelCache (see the module docstring)."""

    mount: CacheMount
    state: GateState
    reason: str
    """The ``ModelCached`` condition's reason."""
    message: str
    phase: str | None = None
    """The cache's ``status.phase`` (``None``: absent or not reported yet)."""
    progress: str | None = None
    """How far its download is, e.g. ``42%, 1.2 GiB of 2.9 GiB`` (``None`` when not downloading)."""
    cache_reason: str | None = None
    """The cache's Degraded reason when it failed."""
    nodes: tuple[str, ...] | None = None
    """For a node-local cache, the nodes it is Ready on (``None`` for claim storage)."""

    @property
    def open(self) -> bool:
        """Whether new pods may be created."""
        return self.state == "open"

    @property
    def name(self) -> str:
        """The ModelCache's name."""
        return self.mount.cache

    def nodes_for(self, mount: CacheMount | None) -> tuple[str, ...] | None:
        """The nodes pods rendered with ``mount`` must go to (``None``: no affinity to add).

        Only a node-local mount of this very cache gets them: another cache's nodes are unknown here.
        """
        if mount is None or not mount.node_local or mount.cache != self.mount.cache:
            return None
        return self.nodes or ()


def cache_name(annotations: Mapping[str, Any] | None) -> str | None:
    """The ModelCache a ModelServing names (``None`` without the annotation; surrounding spaces dropped)."""
    value = (annotations or {}).get(MODEL_CACHE)
    return value.strip() if isinstance(value, str) else None


def mount_of(name: str, cache: ModelCache) -> CacheMount:
    """The mount of a cache that exists (from its spec, and its verified re-staged copy: see the module docstring)."""
    spec = cache.spec
    storage = spec.storage
    sub_path = model_dir(spec.source, spec.revision)
    served = cache.status.served_directory if cache.status is not None else None
    if served is not None and served.fingerprint == fingerprint(spec):
        sub_path = served.directory  # a verified re-staged copy of this very spec (see the module docstring)
    if storage.node_local is not None:
        return CacheMount(name, sub_path, host_path=storage.node_local.path)
    if storage.persistent_volume_claim is not None:
        return CacheMount(name, sub_path, claim_name=storage.persistent_volume_claim.claim_name)
    return CacheMount(name, sub_path, claim_name=f"{name}-cache")


def format_bytes(size: int) -> str:
    """A byte count as people read it (``1.2 GiB``, ``512 MiB``, ``800 B``)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def progress_text(cache: ModelCache) -> str | None:
    """How far a cache's download is (``None`` when its status reports no progress)."""
    progress = cache.status.progress if cache.status is not None else None
    if progress is None:
        return None
    parts: list[str] = []
    percent = progress.percent
    if percent is None and progress.bytes_total:
        percent = f"{100 * progress.bytes_done // progress.bytes_total}%"
    if percent:
        parts.append(percent if percent.endswith("%") else f"{percent}%")
    if progress.bytes_total is not None:
        parts.append(f"{format_bytes(progress.bytes_done)} of {format_bytes(progress.bytes_total)}")
    else:
        parts.append(f"{format_bytes(progress.bytes_done)} so far")
    return ", ".join(parts)


def _containers(spec: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for key in ("initContainers", "containers"):
        for item in spec.get(key) or []:
            if isinstance(item, Mapping):
                yield item


def template_conflict(templates: Iterable[tuple[str, Mapping[str, Any] | None]]) -> str | None:
    """The first place a template already uses the cache's volume name or mount path (``None``: none does).

    Args:
        templates: ``(where, pod spec)`` pairs, e.g. ``("role prefill entryTemplate", {...})``.
    """
    for where, spec in templates:
        if not spec:
            continue
        for volume in spec.get("volumes") or []:
            if isinstance(volume, Mapping) and volume.get("name") == MODEL_CACHE_VOLUME:
                return f"{where} already has a volume named {MODEL_CACHE_VOLUME}"
        for container in _containers(spec):
            for mount in container.get("volumeMounts") or []:
                if not isinstance(mount, Mapping):
                    continue
                if mount.get("name") == MODEL_CACHE_VOLUME or mount.get("mountPath") == MODEL_CACHE_MOUNT_PATH:
                    return (
                        f"{where} container {container.get('name')} already mounts "
                        f"{mount.get('name')} at {mount.get('mountPath')}"
                    )
    return None


def templates_of(ms: ModelServing) -> list[tuple[str, dict[str, Any] | None]]:
    """The pod specs of a ModelServing's templates as ``(where, pod spec)`` pairs, for :func:`decide_gate`."""
    found: list[tuple[str, dict[str, Any] | None]] = []
    for role in ms.spec.template.roles:
        found.append((f"role {role.name} entryTemplate", role.entry_template.spec))
        if role.worker_template is not None:
            found.append((f"role {role.name} workerTemplate", role.worker_template.spec))
    return found


def _condition(cache: ModelCache, kind: str) -> Any:
    for condition in (cache.status.conditions if cache.status is not None else None) or []:
        if condition.type == kind:
            return condition
    return None


_NODE_DOWNLOAD_FAILURES = (REASON_DOWNLOAD_FAILED, REASON_INTEGRITY_CHECK_FAILED)
"""Degraded reasons a node-local cache gives when the download failed on some of its nodes."""


def _failed_elsewhere(mount: CacheMount, phase: str | None, reason: str | None, nodes: Iterable[str] | None) -> bool:
    """Whether a Degraded node-local cache is Ready on some nodes and failed only on others."""
    return mount.node_local and phase == _READY and reason in _NODE_DOWNLOAD_FAILURES and bool(list(nodes or ()))


def decide_gate(
    annotations: Mapping[str, Any] | None,
    templates: Iterable[tuple[str, Mapping[str, Any] | None]],
    cache: ModelCache | None,
    *,
    unreadable: str | None = None,
) -> CacheGate | None:
    """Decide the gate of a ModelServing (see the module docstring).

    Args:
        annotations: The ModelServing's annotations.
        templates: Its pod templates as ``(where, pod spec)`` pairs (for :func:`template_conflict`).
        cache: The named ModelCache in the ModelServing's namespace, or ``None`` when there is none.
        unreadable: Why the named cache exists but cannot be read (it then counts as not found, with this reason).

    Returns:
        ``None`` when the ModelServing names no cache, else the gate.
    """
    name = cache_name(annotations)
    if name is None:
        return None
    if not name:
        return CacheGate(
            CacheMount(name),
            "waiting",
            REASON_WAITING_FOR_MODEL_CACHE,
            f"the annotation {MODEL_CACHE} names no ModelCache",
        )
    if cache is None:
        why = f"ModelCache {name} cannot be read: {unreadable}" if unreadable else f"ModelCache {name} not found"
        return CacheGate(CacheMount(name), "waiting", REASON_WAITING_FOR_MODEL_CACHE, why)
    mount = mount_of(name, cache)
    conflict = template_conflict(templates)
    status = cache.status
    phase = status.phase if status is not None else None
    if conflict is not None:
        return CacheGate(
            mount,
            "conflict",
            REASON_MODEL_CACHE_CONFLICT,
            f"cannot mount ModelCache {name}: {conflict} (rename it, or drop the annotation {MODEL_CACHE})",
            phase=phase,
        )
    degraded = _condition(cache, DEGRADED)
    failing = degraded is not None and degraded.status == "True"
    if failing and _failed_elsewhere(mount, phase, degraded.reason, status.nodes if status is not None else None):
        failing = False  # node-local: the download failed on other nodes; the nodes it is Ready on serve
    if phase == _FAILED or failing:
        reason = degraded.reason if degraded is not None and degraded.status == "True" else None
        detail = degraded.message if degraded is not None and degraded.status == "True" else None
        text = f"ModelCache {name} failed" + (f" ({reason})" if reason else "") + (f": {detail}" if detail else "")
        return CacheGate(mount, "failed", REASON_MODEL_CACHE_FAILED, text, phase=phase, cache_reason=reason)
    generation = (cache.metadata or {}).get("generation")
    observed = status.observed_generation if status is not None else None
    stale = isinstance(generation, int) and observed is not None and observed < generation
    nodes = tuple(sorted(set(status.nodes or ()))) if status is not None and mount.node_local else None
    if phase == _READY and not stale:
        if nodes is not None and not nodes:
            return CacheGate(
                mount,
                "waiting",
                REASON_WAITING_FOR_MODEL_CACHE,
                f"ModelCache {name} is Ready on no node yet",
                phase=phase,
                nodes=nodes,
            )
        where = f" on {len(nodes)} node(s)" if nodes is not None else ""
        size = f" ({status.size})" if status is not None and status.size else ""
        return CacheGate(
            mount,
            "open",
            REASON_MODEL_CACHE_READY,
            f"ModelCache {name} is Ready{size}{where}",
            phase=phase,
            nodes=nodes,
        )
    progress = progress_text(cache) if phase == _DOWNLOADING else None
    if stale:
        text = f"ModelCache {name} has not yet staged its latest spec (generation {generation})"
    else:
        text = f"ModelCache {name} is {phase or _PENDING}" + (f" ({progress})" if progress else "")
    return CacheGate(
        mount, "waiting", REASON_WAITING_FOR_MODEL_CACHE, text, phase=phase, progress=progress, nodes=nodes
    )
