"""The rollout history of a ModelServing, from its ControllerRevisions: entries, what changed, and undo.

Guarantees (pure: ``kthena-py rollout history`` and ``rollout undo`` feed it what they read from the cluster):

* :func:`history` lists the ControllerRevisions named ``<ms>-<hash>`` that the ModelServing controls (controller
  owner reference with its UID; any of them when the ModelServing has no UID), ordered by their ``revision`` number
  then name, each with whether it is ``status.currentRevision`` / ``status.updateRevision``, the images of each
  role, the live pods labelled with it, and what changed since the entry before it. A revision whose data cannot be
  read (:func:`~kthena_py.plan.modelserving.core.revision.parse_controller_revision` gives ``None``) is listed with
  ``data=None``; it cannot be the target of an undo.
* :func:`describe_changes` names, per role, image changes (per container, entry and worker alike), the
  ``workerReplicas`` change, other template changes, roles added or removed, and ``schedulerName`` / plugin
  changes. Role ``replicas`` and rollout settings are not part of a revision and never show.
* :func:`undo_patch` is the JSON merge patch that puts a revision's roles, ``schedulerName`` and ``plugins`` back
  into the spec. Each role that also exists in the current spec keeps the current ``replicas``, ``maxUnavailable``,
  ``maxSurge`` and ``partition`` (how many and how fast are not part of a revision); a role only in the revision
  comes back as recorded. Everything else in the spec is untouched. The patch carries the object's
  ``resourceVersion``, so it fails rather than overwrite a concurrent edit.
* :func:`undo_target` picks the revision to go back to: ``--to-revision N``, else the highest-numbered readable
  revision other than the one the current spec hashes to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.modelserving import ModelServing, PodTemplateSpec, Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import (
    RevisionData,
    parse_controller_revision,
    revision_data,
    revision_hash,
)
from kthena_py.plan.modelserving.core.types import KubeObject
from kthena_py.vocab.owners import controlled_by

__all__ = [
    "HistoryEntry",
    "HistoryError",
    "describe_changes",
    "history",
    "role_images",
    "spec_revision",
    "undo_patch",
    "undo_target",
]

_ROLLOUT_FIELDS = ("maxUnavailable", "maxSurge", "partition")


class HistoryError(Exception):
    """No revision to go back to, or the one asked for does not exist or cannot be read."""


@dataclass(frozen=True)
class HistoryEntry:
    """One ControllerRevision of a ModelServing."""

    number: int
    """Its ``revision`` number (0 when absent)."""
    hash: str
    """The revision string (pods carry it as ``modelserving.volcano.sh/revision``)."""
    name: str
    """The ControllerRevision's name (``<ms>-<hash>``)."""
    data: RevisionData | None
    """What it records (``None``: unreadable)."""
    current: bool
    update: bool
    pods: int
    """Live pods labelled with this revision."""
    images: str
    """``role=image[+image...]`` per role (see :func:`role_images`)."""
    changes: tuple[str, ...]
    """What changed since the entry before it (empty for the first)."""


def _containers(template: PodTemplateSpec | None) -> list[dict[str, Any]]:
    spec = template.spec if template is not None else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in containers or [] if isinstance(c, dict)]


def _role_image_list(role: Role) -> list[str]:
    seen: list[str] = []
    templates = [role.entry_template] + ([role.worker_template] if role.worker_replicas > 0 else [])
    for template in templates:
        for container in _containers(template):
            image = str(container.get("image", ""))
            if image and image not in seen:
                seen.append(image)
    return seen


def role_images(data: RevisionData) -> str:
    """``prefill=img:1 decode=img:1+sidecar:2``: the distinct container images of each role (workers included)."""
    return " ".join(f"{role.name}={'+'.join(_role_image_list(role)) or '-'}" for role in data.roles)


def _without_images(template: PodTemplateSpec | None) -> Any:
    if template is None:
        return None
    doc = to_dict(template)
    for container in (doc.get("spec") or {}).get("containers") or []:
        if isinstance(container, dict):
            container.pop("image", None)
    return doc


def _image_changes(old: Role, new: Role) -> list[tuple[str, str, str]]:
    """``(container, old image, new image)`` for containers of the same name in both (entry, then workers)."""
    found: list[tuple[str, str, str]] = []
    for before, after in ((old.entry_template, new.entry_template), (old.worker_template, new.worker_template)):
        previous = {str(c.get("name")): str(c.get("image", "")) for c in _containers(before)}
        for container in _containers(after):
            name = str(container.get("name"))
            image = str(container.get("image", ""))
            if name in previous and previous[name] != image and (name, previous[name], image) not in found:
                found.append((name, previous[name], image))
    return found


def _role_changes(old: Role, new: Role) -> list[str]:
    out: list[str] = []
    images = _image_changes(old, new)
    pairs = {(before, after) for _, before, after in images}
    if len(pairs) == 1:
        before, after = next(iter(pairs))
        out.append(f"{new.name}: image {before} -> {after}")
    else:
        out.extend(f"{new.name}: container {name} image {before} -> {after}" for name, before, after in images)
    if old.worker_replicas != new.worker_replicas:
        out.append(f"{new.name}: workerReplicas {old.worker_replicas} -> {new.worker_replicas}")
    if _without_images(old.entry_template) != _without_images(new.entry_template):
        out.append(f"{new.name}: entryTemplate changed")
    if _without_images(old.worker_template) != _without_images(new.worker_template):
        out.append(f"{new.name}: workerTemplate changed")
    return out


def describe_changes(old: RevisionData | None, new: RevisionData) -> tuple[str, ...]:
    """What changed from ``old`` to ``new`` (see the module docstring); empty when ``old`` is ``None``."""
    if old is None:
        return ()
    out: list[str] = []
    before = {role.name: role for role in old.roles}
    after = {role.name: role for role in new.roles}
    for role in new.roles:
        if role.name not in before:
            out.append(f"role {role.name} added")
        else:
            out.extend(_role_changes(before[role.name], role))
    out.extend(f"role {role.name} removed" for role in old.roles if role.name not in after)
    if [r.name for r in old.roles if r.name in after] != [r.name for r in new.roles if r.name in before]:
        out.append("roles reordered")
    if old.scheduler_name != new.scheduler_name:
        out.append(f"schedulerName {old.scheduler_name} -> {new.scheduler_name}")
    if [to_dict(p) for p in old.plugins] != [to_dict(p) for p in new.plugins]:
        names = ", ".join(p.name for p in new.plugins) or "none"
        out.append(f"plugins changed (now: {names})")
    return tuple(out)


def _controlled_by(obj: KubeObject, uid: str) -> bool:
    if not uid:
        return True
    return controlled_by(obj, uid)


def _number(obj: KubeObject) -> int:
    value = obj.get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def history(ms: ModelServing, revisions: Iterable[KubeObject], pods: Iterable[KubeObject] = ()) -> list[HistoryEntry]:
    """The ModelServing's revisions, oldest first (see the module docstring).

    Args:
        ms: The ModelServing.
        revisions: ControllerRevisions labelled ``modelserving.volcano.sh/name=<ms>``.
        pods: Its pods (for the live pods per revision).

    Returns:
        One entry per revision it controls.
    """
    prefix = f"{ms.name}-"
    owned = [
        obj
        for obj in revisions
        if str(obj.get("metadata", {}).get("name", "")).startswith(prefix) and _controlled_by(obj, ms.uid)
    ]
    owned.sort(key=lambda obj: (_number(obj), str(obj["metadata"]["name"])))
    status = ms.status
    current = status.current_revision if status is not None else None
    update = status.update_revision if status is not None else None
    live = Counter(
        str((pod.get("metadata", {}).get("labels") or {}).get(naming.LABEL_REVISION, ""))
        for pod in pods
        if not pod.get("metadata", {}).get("deletionTimestamp")
    )
    entries: list[HistoryEntry] = []
    previous: RevisionData | None = None
    for obj in owned:
        name = str(obj["metadata"]["name"])
        key = name[len(prefix) :]
        data = parse_controller_revision(obj, ms.spec.scheduler_name)
        entries.append(
            HistoryEntry(
                number=_number(obj),
                hash=key,
                name=name,
                data=data,
                current=key == current,
                update=key == update,
                pods=live.get(key, 0),
                images=role_images(data) if data is not None else "(unreadable)",
                changes=describe_changes(previous, data) if data is not None else (),
            )
        )
        previous = data if data is not None else previous
    return entries


def spec_revision(ms: ModelServing) -> str:
    """The revision string the current spec hashes to (salted by ``status.collisionCount``)."""
    salt = (ms.status.collision_count if ms.status is not None else None) or 0
    return revision_hash(revision_data(ms.spec), salt)


def undo_target(ms: ModelServing, entries: Sequence[HistoryEntry], to_revision: int | None) -> HistoryEntry:
    """The revision to go back to (see the module docstring).

    Raises:
        HistoryError: ``to_revision`` does not exist or is unreadable, or there is no earlier revision.
    """
    if to_revision is not None:
        found = [entry for entry in entries if entry.number == to_revision]
        if not found:
            numbers = ", ".join(str(e.number) for e in entries) or "none"
            raise HistoryError(f"revision {to_revision} not found (revisions: {numbers})")
        if found[0].data is None:
            raise HistoryError(f"revision {to_revision} ({found[0].name}) cannot be read")
        return found[0]
    here = spec_revision(ms)
    earlier = [entry for entry in entries if entry.hash != here and entry.data is not None]
    if not earlier:
        raise HistoryError(f"no earlier revision of {ms.name} to go back to")
    return max(earlier, key=lambda entry: (entry.number, entry.name))


def _role_doc(role: Role, current: Role | None) -> dict[str, Any]:
    doc = to_dict(role)
    if current is None:
        return doc
    now = to_dict(current)
    doc["replicas"] = current.replicas
    for key in _ROLLOUT_FIELDS:
        if key in now:
            doc[key] = now[key]
        else:
            doc.pop(key, None)
    return doc


def undo_patch(ms: ModelServing, data: RevisionData) -> KubeObject:
    """The merge patch putting ``data`` back into the spec (see the module docstring)."""
    current = {role.name: role for role in ms.spec.template.roles}
    patch: KubeObject = {
        "spec": {
            "template": {"roles": [_role_doc(role, current.get(role.name)) for role in data.roles]},
            "schedulerName": data.scheduler_name,
            "plugins": [to_dict(plugin) for plugin in data.plugins] or None,
        }
    }
    version = (ms.metadata or {}).get("resourceVersion")
    if isinstance(version, str) and version:
        patch["metadata"] = {"resourceVersion": version}
    return patch
