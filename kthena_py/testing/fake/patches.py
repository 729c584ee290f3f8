"""The patch semantics of the in-memory API server: merge patch, JSON patch and server-side apply.

Guarantees:

* :func:`merge_patch` is RFC 7386 (``null`` removes a key, lists are replaced whole).
* :func:`strategic_patch` is a merge patch whose lists of keyed objects (keyed by ``type`` like
  ``status.conditions``, or by ``name`` like containers) merge item by item, as the built-in types' strategic
  merge does for their list-maps; other lists are replaced.
* :func:`json_patch` is RFC 6902 (add, remove, replace, move, copy, test); a failing ``test`` or a path that does
  not exist raises :class:`~kthena_py.kube.errors.Invalid` (HTTP 422), as the API server answers, and leaves the
  object untouched.
* :func:`apply_fields` / :func:`apply` implement server-side apply by field manager: each manager owns the leaf
  fields it last applied; applying again removes the fields it owned and no longer applies unless another manager
  owns them too; list-maps (keyed as above) are merged per item, so two managers' ``status.conditions`` entries
  are both kept. A field another manager owns with a different value is a conflict unless ``force``.
* Nothing here mutates its arguments; every function returns new values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kthena_py.kube.errors import Conflict, Invalid

__all__ = ["apply", "apply_fields", "json_patch", "list_key", "merge_patch", "strategic_patch"]

Path = tuple[str, ...]
"""A field path; a list-map item is the segment ``"[key=value]"``."""


def _invalid(message: str) -> Invalid:
    return Invalid(422, "Invalid", message, {"reason": "Invalid", "message": message, "code": 422})


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch to ``target``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(copy.deepcopy(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def list_key(items: Any) -> str | None:
    """The key field of a list-map (``type`` or ``name``), or ``None`` for an atomic list."""
    if not isinstance(items, list) or not items or not all(isinstance(i, Mapping) for i in items):
        return None
    for key in ("type", "name"):
        if all(key in i for i in items):
            return key
    return None


def strategic_patch(target: Any, patch: Any) -> Any:
    """A merge patch that merges list-maps item by item (see the module docstring)."""
    if isinstance(patch, list) and isinstance(target, list):
        key = list_key(patch)
        if key is not None and (not target or list_key(target) == key):
            merged = [copy.deepcopy(i) for i in target]
            for item in patch:
                at = next((n for n, old in enumerate(merged) if old.get(key) == item[key]), None)
                if at is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[at] = strategic_patch(merged[at], item)
            return merged
        return copy.deepcopy(patch)
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(copy.deepcopy(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part, path)
    return node


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    raise _invalid(f"jsonpatch: path {path!r} does not exist")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise _invalid("jsonpatch: cannot remove the whole document")
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _invalid(f"jsonpatch: path {path!r} does not exist")


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _invalid(f"jsonpatch: path {path!r} does not exist")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise _invalid(f"jsonpatch: index {last!r} of {path!r} out of range")
    else:
        raise _invalid(f"jsonpatch: path {path!r} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of operations) to a copy of ``target``.

    Raises:
        Invalid: An operation is malformed, a ``test`` fails, or a path does not exist.
    """
    if not isinstance(operations, list):
        raise _invalid("jsonpatch: the patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, Mapping) or "path" not in op:
            raise _invalid(f"jsonpatch: malformed operation {op!r}")
        kind, path = op.get("op"), str(op["path"])
        if kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _invalid(f"jsonpatch: test operation for path {path!r} failed")
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "replace":
            doc = _add(doc, path, op.get("value"), replace=True)
        elif kind in ("move", "copy"):
            source = str(op.get("from", ""))
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        else:
            raise _invalid(f"jsonpatch: unknown operation {kind!r}")
    return doc


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
