"""Server-side apply by field manager, as the API server does it for the in-memory store.

Guarantees:

* :func:`apply_fields` / :func:`apply` implement server-side apply by field manager: each manager owns the leaf
  fields it last applied; applying again removes the fields it owned and no longer applies unless another manager
  owns them too; list-maps (keyed by ``type`` or ``name``, :func:`~.patches.list_key`) are merged per item, so
  two managers' ``status.conditions`` entries are both kept. A field another manager owns with a different value
  is a conflict unless ``force``.
* Nothing here mutates its arguments; every function returns new values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kthena_py.kube.errors import Conflict

from .patches import list_key

__all__ = ["Path", "apply", "apply_fields"]

Path = tuple[str, ...]
"""A field path; a list-map item is the segment ``"[key=value]"``."""


def apply_fields(body: Any, prefix: Path = ()) -> dict[Path, Any]:
    """The leaf fields ``body`` sets, by path, with their values (list-map items by key, other lists whole)."""
    fields: dict[Path, Any] = {}
    if isinstance(body, Mapping) and body:
        for key, value in body.items():
            fields.update(apply_fields(value, (*prefix, str(key))))
    elif isinstance(body, list) and list_key(body) is not None:
        key = list_key(body)
        for item in body:
            item_path = (*prefix, f"[{key}={item[key]}]")
            fields[(*item_path, str(key))] = item[key]
            fields.update(apply_fields({k: v for k, v in item.items() if k != key}, item_path))
    else:
        fields[prefix] = copy.deepcopy(body)
    return fields


def _read(obj: Any, path: Path) -> tuple[bool, Any]:
    node = obj
    for part in path:
        if part.startswith("[") and isinstance(node, list):
            key, _, value = part[1:-1].partition("=")
            node = next((i for i in node if isinstance(i, Mapping) and str(i.get(key)) == value), None)
            if node is None:
                return False, None
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return False, None
    return True, node


def _write(obj: dict[str, Any], path: Path, value: Any) -> None:
    node: Any = obj
    for n, part in enumerate(path):
        last = n == len(path) - 1
        if part.startswith("["):
            key, _, wanted = part[1:-1].partition("=")
            item = next((i for i in node if str(i.get(key)) == wanted), None)
            if item is None:
                item = {}
                node.append(item)
            node = item
            continue
        if last:
            node[part] = copy.deepcopy(value)
            return
        nxt = path[n + 1]
        if part not in node or not isinstance(node[part], (dict, list)):
            node[part] = [] if nxt.startswith("[") else {}
        node = node[part]


def _erase(obj: dict[str, Any], path: Path) -> None:
    found, _ = _read(obj, path)
    if not found or not path:
        return
    found, parent = _read(obj, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent.pop(last, None)
    if len(path) >= 2 and path[-2].startswith("[") and isinstance(parent, Mapping):
        # An item left with only its key field was removed from the list-map.
        key = path[-2][1:-1].partition("=")[0]
        if set(parent) <= {key}:
            found, holder = _read(obj, path[:-2])
            if found and isinstance(holder, list):
                holder.remove(parent)


def _is_item_key(path: Path) -> bool:
    return len(path) >= 2 and path[-2].startswith("[") and path[-2][1:].partition("=")[0] == path[-1]


def apply(
    current: dict[str, Any],
    body: Mapping[str, Any],
    manager: str,
    owners: dict[str, set[Path]],
    *,
    force: bool,
) -> tuple[dict[str, Any], dict[str, set[Path]]]:
    """Server-side apply ``body`` as ``manager`` to ``current``, given who owns which fields.

    Returns:
        The new object and the new field ownership.

    Raises:
        Conflict: Another manager owns a field ``body`` sets to a different value, and not ``force``.
    """
    applied = apply_fields(body)
    for path, value in list(applied.items()):
        if value == [] and list_key(_read(current, path)[1]) is not None:
            del applied[path]  # an empty list-map applies no item: the manager owns none, others keep theirs
    conflicts = []
    for path, value in applied.items():
        found, have = _read(current, path)
        if found and have != value:
            others = [m for m, paths in owners.items() if m != manager and path in paths]
            if others and not force:
                conflicts.append(f"{'.'.join(path)} (owned by {', '.join(sorted(others))})")
    if conflicts:
        message = f"Apply failed with {len(conflicts)} conflict(s): " + "; ".join(conflicts)
        raise Conflict(409, "Conflict", message, {"reason": "Conflict", "message": message, "code": 409})
    result = copy.deepcopy(current)
    new_owners = {m: set(paths) for m, paths in owners.items()}
    if force:
        for m, paths in new_owners.items():
            if m != manager:
                paths -= set(applied)
    before = new_owners.get(manager, set())
    held_by_others = set().union(*(p for m, p in new_owners.items() if m != manager)) if new_owners else set()
    released = before - set(applied) - held_by_others
    keys = {path for path in released if _is_item_key(path)}
    for path in sorted(released - keys, key=len, reverse=True):
        _erase(result, path)
    for path in keys:  # last: an item is found by its key; it goes when nothing but its key is left
        found, item = _read(result, path[:-1])
        if found and isinstance(item, Mapping) and set(item) <= {path[-1]}:
            found, holder = _read(result, path[:-2])
            if found and isinstance(holder, list):
                holder.remove(item)
    for path, value in applied.items():
        _write(result, path, value)
    new_owners[manager] = set(applied)
    return result, {m: p for m, p in new_owners.items() if p}
