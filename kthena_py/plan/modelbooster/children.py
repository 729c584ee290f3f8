"""What to write so that a booster's children match its expansion: the pure update policy.

Guarantees, for each child kind in Kthena's order (ModelServing, ModelServer, ModelRoute):

* A missing child is created; a deleted one therefore comes back. Networking kinds that are not served
  are skipped and reported, the ModelServing is still planned.
* An existing child is written (server-side apply of the whole rendered object, guarded by the cached
  ``resourceVersion``) only when the rendered object is not already contained in it, so a converged booster
  plans nothing, and fields other writers added (labels, annotations, list entries) are kept.
* Replica counts others change are kept: the ModelServing's ``spec.replicas`` and its roles' ``replicas``
  take the live values unless the booster's own values changed since they were last written (recorded in the
  :data:`~kthena_py.plan.modelbooster.naming.ANNOTATION_REPLICAS` annotation). The immutable
  ``gangPolicy`` of an existing ModelServing is kept as it is.
* What cannot be changed in place is replaced: a ModelRoute whose ``modelName`` changes (immutable) and a
  ModelServing whose role names change (immutable) are deleted, and the deletion brings the new one.
  Children the booster controls under another name (a renamed backend) are deleted after the write.
* A child with the right name that the booster does not control is never touched; it is reported instead.

The opt-in ModelCache (:mod:`~.prefetch`) is planned first, so a cache exists before the ModelServing that waits
for it:

* it is created, updated like the others, and replaced (deleted, then created again) when its ``storage`` changes
  (immutable); caches the booster controls under another name are deleted;
* without a cache to render (the opt-in removed or no longer possible), every cache the booster controls is
  deleted, and **the ModelServing is not written while one of them exists**: a cache's cleanup removes the
  directory the per-pod downloader would write into, so the ModelServing goes back to the downloader only once
  the cache is gone (its pods keep running meanwhile; the ModelCache controller keeps the files of a cache a
  ModelServing still names and lets it go after its cleanup timeout);
* a cache of the right name the booster does not control is reported, and the ModelServing is not written
  (it would be gated on someone else's cache).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kthena_py.plan.modelserving.core.types import KubeObject
from kthena_py.vocab.owners import controlled_by

from . import naming
from .expand import Children
from .modelserving import replica_counts

__all__ = ["ChildPlan", "Kind", "Observed", "Remove", "Write", "contains", "plan_children"]

Kind = Literal["ModelServing", "ModelServer", "ModelRoute", "ModelCache"]
NETWORKING_KINDS: tuple[Kind, ...] = ("ModelServer", "ModelRoute")


@dataclass(frozen=True)
class Observed:
    """The cached children of one booster: objects with its names or its ``model-uid`` label."""

    modelservings: tuple[KubeObject, ...] = ()
    modelservers: tuple[KubeObject, ...] = ()
    modelroutes: tuple[KubeObject, ...] = ()
    served: frozenset[Kind] = frozenset({"ModelServing", "ModelServer", "ModelRoute"})
    """The kinds the API server serves (the networking CRDs are optional)."""
    modelcaches: tuple[KubeObject, ...] = ()
    """The booster's ModelCaches (by name and ``model-uid`` label)."""

    def of(self, kind: Kind) -> tuple[KubeObject, ...]:
        """The observed objects of ``kind``."""
        return {
            "ModelServing": self.modelservings,
            "ModelServer": self.modelservers,
            "ModelRoute": self.modelroutes,
            "ModelCache": self.modelcaches,
        }[kind]


@dataclass(frozen=True)
class Write:
    """Server-side apply ``body`` (``create``: the object does not exist yet)."""

    kind: Kind
    name: str
    body: KubeObject
    create: bool


@dataclass(frozen=True)
class Remove:
    """Delete one child, only if it still has ``uid``; ``why`` is said in the Event."""

    kind: Kind
    name: str
    uid: str
    why: str


@dataclass(frozen=True)
class ChildPlan:
    """The writes of one reconcile, in order, and what was left alone."""

    steps: tuple[Write | Remove, ...] = ()
    foreign: tuple[str, ...] = ()
    """Children with the booster's names that it does not control (never touched), as messages."""
    unserved: tuple[Kind, ...] = ()
    """Networking kinds skipped because their CRDs are not served."""
    modelserving: KubeObject | None = None
    """The live ModelServing the booster controls under its current name (for the status)."""
    waiting: tuple[str, ...] = ()
    """Children being deleted, waited for before they are created again."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def _keyed(items: Sequence[Any]) -> bool:
    return bool(items) and all(isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items)


def contains(have: Any, want: Any) -> bool:
    """Whether ``have`` already holds everything in ``want``.

    Mappings: every key of ``want``, recursively. Lists of named objects (containers, env, volumes, roles,
    owner references): every entry of ``want`` is contained in the ``have`` entry of the same name. Other lists:
    same length, contained position by position. Scalars: equal.
    """
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(k in have and contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        if not isinstance(have, list):
            return False
        if _keyed(want) and _keyed(have):
            by_name = {item["name"]: item for item in have}
            return all(item["name"] in by_name and contains(by_name[item["name"]], item) for item in want)
        return len(have) == len(want) and all(contains(h, w) for h, w in zip(have, want, strict=True))
    if isinstance(want, bool) or isinstance(have, bool):
        return want is have
    return bool(have == want)


def _record(counts: Mapping[str, Any]) -> str:
    return json.dumps(counts, sort_keys=True, separators=(",", ":"))


def _previous_counts(live: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = (_meta(live).get("annotations") or {}).get(naming.ANNOTATION_REPLICAS)
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _with_record(desired: KubeObject) -> KubeObject:
    body = copy.deepcopy(desired)
    body["metadata"].setdefault("annotations", {})[naming.ANNOTATION_REPLICAS] = _record(replica_counts(desired))
    return body


def _keep_live_counts(desired: KubeObject, live: Mapping[str, Any]) -> KubeObject:
    """The ModelServing to apply over ``live``: replica counts others set and the gang policy are kept."""
    body = _with_record(desired)
    wanted = replica_counts(desired)
    previous = _previous_counts(live)
    had = replica_counts(dict(live))
    spec = body["spec"]
    if previous is None or previous.get("replicas") == wanted["replicas"]:
        if had["replicas"] is None:
            spec.pop("replicas", None)
        else:
            spec["replicas"] = had["replicas"]
    previous_roles = (previous or {}).get("roles") or {}
    for role in spec["template"]["roles"]:
        name = role["name"]
        if name not in had["roles"]:
            continue
        if previous is None or previous_roles.get(name) == wanted["roles"].get(name):
            if had["roles"][name] is None:
                role.pop("replicas", None)
            else:
                role["replicas"] = had["roles"][name]
    live_template = (live.get("spec") or {}).get("template") or {}
    if "gangPolicy" in live_template:
        spec["template"]["gangPolicy"] = copy.deepcopy(live_template["gangPolicy"])
    return body


def _role_names(obj: Mapping[str, Any]) -> list[str]:
    return sorted(replica_counts(dict(obj))["roles"])


def _replacement(kind: Kind, desired: KubeObject, live: Mapping[str, Any]) -> str | None:
    """Why ``live`` must be deleted and created again rather than updated (``None``: it can be updated)."""
    if kind == "ModelRoute":
        old, new = (live.get("spec") or {}).get("modelName"), desired["spec"]["modelName"]
        if old != new:
            return f"modelName changed from {old!r} to {new!r} (modelName is immutable)"
    if kind == "ModelServing":
        old_roles, new_roles = _role_names(live), _role_names(desired)
        if old_roles != new_roles:
            return f"roles changed from {old_roles} to {new_roles} (role names are immutable)"
    if kind == "ModelCache":
        old, new = (live.get("spec") or {}).get("storage"), desired["spec"]["storage"]
        if old != new:
            return "storage changed (storage is immutable)"
    return None


def _comparable(body: Mapping[str, Any]) -> dict[str, Any]:
    md = _meta(body)
    return {
        "metadata": {k: md[k] for k in ("labels", "annotations", "ownerReferences") if k in md},
        "spec": body.get("spec"),
    }


@dataclass
class _Steps:
    steps: list[Write | Remove]
    foreign: list[str]
    waiting: list[str]


def _plan_kind(kind: Kind, desired: KubeObject | None, objects: Sequence[KubeObject], uid: str, out: _Steps) -> None:
    """Write ``desired`` (when given) over the live object of its name; delete other controlled objects."""
    name = _name(desired) if desired is not None else None
    live = next((o for o in objects if _name(o) == name), None) if name is not None else None
    if desired is not None and name is not None:
        if live is not None and not controlled_by(live, uid):
            out.foreign.append(f"{kind} {name} already exists and is not controlled by this ModelBooster")
            return
        if live is None:
            body = _with_record(desired) if kind == "ModelServing" else copy.deepcopy(desired)
            out.steps.append(Write(kind, name, body, create=True))
        elif _meta(live).get("deletionTimestamp"):
            out.waiting.append(f"{kind} {name}")
        elif (why := _replacement(kind, desired, live)) is not None:
            out.steps.append(Remove(kind, name, str(_meta(live).get("uid") or ""), why))
        else:
            body = _keep_live_counts(desired, live) if kind == "ModelServing" else copy.deepcopy(desired)
            if not contains(_comparable(live), _comparable(body)):
                body["metadata"]["resourceVersion"] = str(_meta(live).get("resourceVersion") or "")
                out.steps.append(Write(kind, name, body, create=False))
    why = f"replaced by {kind} {name}" if name is not None else "the booster no longer prefetches"
    for other in objects:
        if _name(other) != name and controlled_by(other, uid) and not _meta(other).get("deletionTimestamp"):
            out.steps.append(Remove(kind, _name(other), str(_meta(other).get("uid") or ""), why))


def _held_by_cache(children: Children, observed: Observed, uid: str, out: _Steps) -> str | None:
    """Why the ModelServing must not be written yet because of the booster's caches (``None``: it may be)."""
    desired = children.modelcache
    if desired is not None:
        name = _name(desired)
        if any(f"ModelCache {name} " in message for message in out.foreign):
            return f"ModelServing {_name(children.modelserving)} (held: ModelCache {name} is not this booster's)"
        return None
    going = sorted(_name(o) for o in observed.modelcaches if controlled_by(o, uid))
    if going:
        caches = ", ".join(going)
        return f"ModelServing {_name(children.modelserving)} (held until ModelCache {caches} and its files are gone)"
    return None


def plan_children(booster_uid: str, children: Children, observed: Observed) -> ChildPlan:
    """Plan the writes that bring the observed children to ``children``.

    Args:
        booster_uid: The booster's uid (children it controls carry it in a controller reference).
        children: The expansion of the booster.
        observed: The cached children.

    Returns:
        The steps in order (the ModelCache, then per kind: replace or write, then stale deletions) and what was
        skipped.
    """
    out = _Steps([], [], [])
    unserved: list[Kind] = []
    modelserving: KubeObject | None = None
    _plan_kind("ModelCache", children.modelcache, observed.modelcaches, booster_uid, out)
    held = _held_by_cache(children, observed, booster_uid, out)
    kinds: tuple[Kind, ...] = ("ModelServing", "ModelServer", "ModelRoute")
    for kind, desired in zip(kinds, children.all(), strict=True):
        if kind not in observed.served:
            unserved.append(kind)
            continue
        objects = observed.of(kind)
        live = next((o for o in objects if _name(o) == _name(desired)), None)
        if kind == "ModelServing" and live is not None and controlled_by(live, booster_uid):
            modelserving = live
        if kind == "ModelServing" and held is not None:
            out.waiting.append(held)
            continue
        _plan_kind(kind, desired, objects, booster_uid, out)
    return ChildPlan(tuple(out.steps), tuple(out.foreign), tuple(unserved), modelserving, tuple(out.waiting))
