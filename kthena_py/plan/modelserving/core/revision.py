"""Revisions of a ModelServing: what shapes its pods, a stable hash of it and its ControllerRevisions.

Guarantees:

* :class:`RevisionData` holds everything that shapes the pods: the roles (their name, ``entryTemplate``,
  ``workerReplicas``, ``workerTemplate``), ``schedulerName`` and ``plugins``. Role ``replicas``,
  ``maxUnavailable``, ``maxSurge`` and ``partition`` do not shape a pod and are excluded from the hashes, so
  scaling never changes the revision. A ModelServing that names a ModelCache adds the cache's mount
  (:class:`~kthena_py.plan.modelserving.core.modelcache.CacheMount`: name, mount path, ``subPath``, claim or host
  path); without one the data, the hashes and the ControllerRevisions are exactly what they were before caches
  existed (the key is left out, not written as null).
* :func:`revision_hash` and :func:`role_template_hash` are deterministic functions of that data (canonical JSON,
  sorted keys, then SHA-256; env vars the controller injects itself, ``GROUP_SIZE`` / ``ENTRY_ADDRESS`` /
  ``WORKER_INDEX``, are left out because they never reach a pod as written; ``status.collisionCount`` salts the
  revision after a name collision), rendered as 10 characters of the alphabet ``bcdfghjklmnpqrstvwxz2456789`` (valid
  in label values and object names). A role's hash covers the role plus ``schedulerName`` and the plugins that
  apply to it, so it changes exactly when that role's pods would render differently.
* A ControllerRevision built by :func:`build_controller_revision` stores the full roles (replicas included),
  ``schedulerName`` and ``plugins``; :func:`parse_controller_revision` reads it back (also the bare roles array
  Kthena accepts), so pods of an old revision can be re-rendered. It parses an object once while its ``data`` is
  unchanged (a bounded memo of derived data keyed by uid, checked by equality of ``data``) and returns the same
  frozen object after, so :func:`stored_revision_hash` is computed once per stored revision too.
* :func:`revisions_to_prune` never selects a live revision (current, update, or referenced by any pod).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kthena_py.api.common import to_dict
from kthena_py.api.modelserving import ModelServingSpec, PluginSpec, Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.modelcache import CacheMount
from kthena_py.plan.modelserving.core.plugins import plugin_applies
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef

__all__ = [
    "HASH_ALPHABET",
    "RevisionData",
    "build_controller_revision",
    "controller_revision_number",
    "encode_hash",
    "parse_controller_revision",
    "revision_data",
    "revision_hash",
    "revisions_to_prune",
    "role_template_hash",
    "spec_revision_hash",
]

HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_HASH_LENGTH = 10


@dataclass(frozen=True)
class RevisionData:
    """The part of a ModelServing spec that shapes its pods."""

    roles: tuple[Role, ...]
    scheduler_name: str
    plugins: tuple[PluginSpec, ...] = ()
    model_cache: CacheMount | None = None
    """The ModelCache the pods mount (``None``: the ModelServing names none)."""

    def role(self, name: str) -> Role | None:
        """Return the role called ``name``, or ``None``."""
        return next((role for role in self.roles if role.name == name), None)


def revision_data(spec: ModelServingSpec, model_cache: CacheMount | None = None) -> RevisionData:
    """Extract the pod-shaping part of a spec (with the mount of the ModelCache it names, if any)."""
    return RevisionData(tuple(spec.template.roles), spec.scheduler_name, tuple(spec.plugins or ()), model_cache)


def encode_hash(payload: Any) -> str:
    """Hash a JSON-compatible value: canonical JSON, SHA-256, 10 characters of :data:`HASH_ALPHABET`."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    number = int.from_bytes(hashlib.sha256(text.encode()).digest(), "big")
    chars: list[str] = []
    for _ in range(_HASH_LENGTH):
        number, digit = divmod(number, len(HASH_ALPHABET))
        chars.append(HASH_ALPHABET[digit])
    return "".join(chars)


def _without_injected_env(template: dict[str, Any]) -> dict[str, Any]:
    """Drop the env vars the controller sets itself (they never reach a pod as written)."""
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return template
    changed = False
    new_spec = dict(spec)
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        out = []
        for container in containers:
            env = container.get("env") if isinstance(container, dict) else None
            if isinstance(env, list) and any(isinstance(e, dict) and e.get("name") in naming.INJECTED_ENV for e in env):
                kept = [e for e in env if not (isinstance(e, dict) and e.get("name") in naming.INJECTED_ENV)]
                container = {k: v for k, v in container.items() if k != "env"} | ({"env": kept} if kept else {})
                changed = True
            out.append(container)
        new_spec[key] = out
    return {**template, "spec": new_spec} if changed else template


def _role_shape(role: Role) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "name": role.name,
        "entryTemplate": _without_injected_env(to_dict(role.entry_template)),
        "workerReplicas": role.worker_replicas,
    }
    if role.worker_template is not None:
        shape["workerTemplate"] = _without_injected_env(to_dict(role.worker_template))
    return shape


def _plugin_shape(plugin: PluginSpec) -> dict[str, Any]:
    scope = plugin.scope
    return {
        "name": plugin.name,
        "type": plugin.type,
        "config": plugin.config,
        "scope": {
            "roles": list(scope.roles or []) if scope else [],
            "target": (scope.target if scope else None) or "All",
        },
    }


def revision_hash(data: RevisionData, collision_count: int = 0) -> str:
    """Return the revision string of a ModelServing (see the module docstring).

    Args:
        data: The pod-shaping spec.
        collision_count: ``status.collisionCount``; when above 0 it salts the hash (a new name after a collision).
    """
    payload: dict[str, Any] = {
        "roles": [_role_shape(role) for role in data.roles],
        "schedulerName": data.scheduler_name,
        "plugins": [_plugin_shape(plugin) for plugin in data.plugins],
    }
    if data.model_cache is not None:
        payload["modelCache"] = data.model_cache.shape()
    if collision_count > 0:
        payload["collisionCount"] = collision_count
    return encode_hash(payload)


class _IdentityMemo:
    """Hashes computed once per combination of frozen objects, keyed by the objects' identities.

    The API objects are frozen and the ModelServing parser returns the same objects for the same (uid,
    resourceVersion), so every reconcile of an unchanged ModelServing reuses its hashes. An entry holds the objects
    it was keyed by, so an ``id`` is never reused while the entry lives; the memo is bounded (least recently used
    first out).
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[Hashable, ...], tuple[tuple[object, ...], str]] = OrderedDict()

    def get(self, objects: tuple[object, ...], extra: Hashable, compute: Callable[[], str]) -> str:
        """The value for ``objects`` (by identity) and ``extra`` (by value), computed on the first request."""
        key = (*map(id, objects), extra)
        hit = self._entries.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], objects, strict=True)):
            self._entries.move_to_end(key)
            return hit[1]
        value = compute()
        self._entries[key] = (objects, value)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return value


_SPEC_HASHES = _IdentityMemo()
_ROLE_HASHES = _IdentityMemo()
_STORED_HASHES = _IdentityMemo()


def spec_revision_hash(spec: ModelServingSpec, collision_count: int = 0, model_cache: CacheMount | None = None) -> str:
    """``revision_hash(revision_data(spec, model_cache), collision_count)``, once per spec object and mount."""
    return _SPEC_HASHES.get(
        (spec,),
        (collision_count, model_cache),
        lambda: revision_hash(revision_data(spec, model_cache), collision_count),
    )


def stored_revision_hash(data: RevisionData, collision_count: int = 0) -> str:
    """``revision_hash(data, collision_count)``, once per data object (e.g. a parsed ControllerRevision)."""
    return _STORED_HASHES.get((data,), collision_count, lambda: revision_hash(data, collision_count))


def role_template_hash(data: RevisionData, role: Role) -> str:
    """Return the template hash of one role: the role, ``schedulerName`` and the plugins applying to it.

    Computed once per role and plugin objects (:class:`_IdentityMemo`): every planner asks for it on every reconcile.
    """
    return _ROLE_HASHES.get(
        (role, *data.plugins), (data.scheduler_name, data.model_cache), lambda: _role_template_hash(data, role)
    )


def _role_template_hash(data: RevisionData, role: Role) -> str:
    plugins = [
        _plugin_shape(plugin)
        for plugin in data.plugins
        if plugin_applies(plugin, role.name, True) or plugin_applies(plugin, role.name, False)
    ]
    payload: dict[str, Any] = {"role": _role_shape(role), "schedulerName": data.scheduler_name, "plugins": plugins}
    if data.model_cache is not None:
        payload["modelCache"] = data.model_cache.shape()
    return encode_hash(payload)


def controller_revision_number(revisions: Iterable[KubeObject]) -> int:
    """Return the ``revision`` number for a new ControllerRevision: one more than the highest observed."""
    numbers = [obj.get("revision") for obj in revisions]
    ints = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool)]
    return max(ints, default=0) + 1


def build_controller_revision(
    ref: MSRef, data: RevisionData, revision: str, existing: Iterable[KubeObject]
) -> KubeObject:
    """Build the ``apps/v1`` ControllerRevision recording ``data`` under ``revision``.

    Args:
        ref: The owning ModelServing.
        data: The pod-shaping spec of that revision.
        revision: Its hash (:func:`revision_hash`).
        existing: The observed ControllerRevisions of this ModelServing (for the ``revision`` number).

    Returns:
        The object to create.
    """
    recorded: dict[str, Any] = {
        "data": [to_dict(role) for role in data.roles],
        "schedulerName": data.scheduler_name,
        "plugins": [to_dict(plugin) for plugin in data.plugins],
    }
    if data.model_cache is not None:
        recorded["modelCache"] = data.model_cache.shape()
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": naming.revision_name(ref.name, revision),
            "namespace": ref.namespace,
            "labels": {naming.LABEL_NAME: ref.name, naming.LABEL_REVISION: revision},
            "ownerReferences": [naming.owner_reference(ref)],
        },
        "data": recorded,
        "revision": controller_revision_number(existing),
    }


_PARSED_REVISIONS: OrderedDict[tuple[str, str], tuple[Any, RevisionData | None]] = OrderedDict()
"""The last parse per (uid, default scheduler), with the ``data`` it was parsed from."""
_PARSED_REVISIONS_MAX = 4096


def parse_controller_revision(obj: KubeObject, default_scheduler: str) -> RevisionData | None:
    """Read the revision data back from a ControllerRevision.

    Args:
        obj: A ControllerRevision (ours, or Kthena's: ``data`` may be ``{"data": [roles]}`` or a bare array).
        default_scheduler: ``schedulerName`` to assume when the object does not record one (Kthena's do not).

    Returns:
        The data, or ``None`` when it cannot be parsed; the same object again for an object with the same uid and
        equal ``data``.
    """
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    if not uid:
        return _parse_controller_revision(obj, default_scheduler)
    key = (uid, default_scheduler)
    raw = obj.get("data")
    hit = _PARSED_REVISIONS.get(key)
    if hit is not None and hit[0] == raw:
        _PARSED_REVISIONS.move_to_end(key)
        return hit[1]
    parsed = _parse_controller_revision(obj, default_scheduler)
    _PARSED_REVISIONS[key] = (raw, parsed)
    _PARSED_REVISIONS.move_to_end(key)
    while len(_PARSED_REVISIONS) > _PARSED_REVISIONS_MAX:
        _PARSED_REVISIONS.popitem(last=False)
    return parsed


def _parse_controller_revision(obj: KubeObject, default_scheduler: str) -> RevisionData | None:
    raw = obj.get("data")
    scheduler: Any = default_scheduler
    plugins_raw: Any = []
    model_cache: CacheMount | None = None
    if isinstance(raw, dict):
        scheduler = raw.get("schedulerName", default_scheduler)
        plugins_raw = raw.get("plugins") or []
        if "modelCache" in raw:
            model_cache = CacheMount.from_shape(raw["modelCache"])
            if model_cache is None:
                return None
        raw = raw.get("data")
    if not isinstance(raw, list) or not raw or not isinstance(scheduler, str) or not isinstance(plugins_raw, list):
        return None
    try:
        roles = tuple(Role.model_validate(item) for item in raw)
        plugins = tuple(PluginSpec.model_validate(item) for item in plugins_raw)
    except ValidationError:
        return None
    return RevisionData(roles, scheduler, plugins, model_cache)


def revisions_to_prune(
    revisions: Sequence[KubeObject], live: Collection[str], ms_name: str, history_limit: int
) -> list[KubeObject]:
    """Choose the ControllerRevisions beyond ``revisionHistoryLimit``.

    Args:
        revisions: The observed ControllerRevisions of the ModelServing.
        live: Revision strings still in use (current, update, and every revision label on a pod).
        ms_name: The ModelServing name (a revision is named ``<ms>-<revision>``).
        history_limit: How many non-live revisions to keep (the newest by ``revision`` number).

    Returns:
        The objects to delete, oldest first.
    """
    live_names = {naming.revision_name(ms_name, rev) for rev in live}
    dead = [obj for obj in revisions if obj.get("metadata", {}).get("name") not in live_names]

    def number(obj: KubeObject) -> tuple[int, str]:
        value = obj.get("revision")
        count = value if isinstance(value, int) and not isinstance(value, bool) else 0
        return count, str(obj.get("metadata", {}).get("name", ""))

    dead.sort(key=number)
    return dead[: max(0, len(dead) - max(0, history_limit))]
