"""Label and field selectors as the API server evaluates them for lists and watches.

Guarantees: :func:`label_match` understands the whole label selector grammar of list calls (``k=v``, ``k==v``,
``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``, comma-joined requirements, all of which must hold);
:func:`field_match` understands ``metadata.name``, ``metadata.namespace`` and any other dotted field path with
``=``, ``==`` and ``!=``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["field_match", "label_match"]

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _requirements(selector: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def label_match(selector: str | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy the label ``selector`` (``None`` or empty: everything does)."""
    for req in _requirements(selector or ""):
        found = _SET.match(req)
        if found:
            key, op, values = found.groups()
            wanted = {v.strip() for v in values.split(",")}
            if (op == "in") != (key in labels and labels[key] in wanted):
                return False
        elif "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif req.startswith("!"):
            if req[1:].strip() in labels:
                return False
        elif req not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def field_match(selector: str | None, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` satisfies the field ``selector`` (``None`` or empty: everything does)."""
    for req in _requirements(selector or ""):
        if "!=" in req:
            path, value = (s.strip() for s in req.split("!=", 1))
            if _field(obj, path) == value:
                return False
        else:
            path, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if _field(obj, path) != value:
                return False
    return True
