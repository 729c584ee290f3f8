"""The patch semantics of the in-memory API server: merge patch, strategic merge patch and JSON patch.

Guarantees:

* :func:`merge_patch` is RFC 7386 (``null`` removes a key, lists are replaced whole).
* :func:`strategic_patch` is a merge patch whose lists of keyed objects (keyed by ``type`` like
  ``status.conditions``, or by ``name`` like containers) merge item by item, as the built-in types' strategic
  merge does for their list-maps; other lists are replaced.
* :func:`json_patch` is RFC 6902 (add, remove, replace, move, copy, test); a failing ``test`` or a path that does
  not exist raises :class:`~kthena_py.kube.errors.Invalid` (HTTP 422), as the API server answers, and leaves the
  object untouched.
* Nothing here mutates its arguments; every function returns new values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .statuses import invalid

__all__ = ["json_patch", "list_key", "merge_patch", "strategic_patch"]


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
        raise invalid(f"invalid JSON pointer {path!r}")
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
    raise invalid(f"jsonpatch: path {path!r} does not exist")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise invalid("jsonpatch: cannot remove the whole document")
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise invalid(f"jsonpatch: path {path!r} does not exist")


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise invalid(f"jsonpatch: path {path!r} does not exist")
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
            raise invalid(f"jsonpatch: index {last!r} of {path!r} out of range")
    else:
        raise invalid(f"jsonpatch: path {path!r} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of operations) to a copy of ``target``.

    Raises:
        Invalid: An operation is malformed, a ``test`` fails, or a path does not exist.
    """
    if not isinstance(operations, list):
        raise invalid("jsonpatch: the patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, Mapping) or "path" not in op:
            raise invalid(f"jsonpatch: malformed operation {op!r}")
        kind, path = op.get("op"), str(op["path"])
        if kind == "test":
            if _get(doc, path) != op.get("value"):
                raise invalid(f"jsonpatch: test operation for path {path!r} failed")
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
            raise invalid(f"jsonpatch: unknown operation {kind!r}")
    return doc
