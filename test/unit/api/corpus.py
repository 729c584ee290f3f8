"""Load the manifest corpus under ``corpus/``: valid base manifests and the invalid-manifest table.

The corpus is data so it can be replayed elsewhere (e.g. against a real API server with Kthena's webhooks):

* ``corpus/bases/<name>.yaml``: valid manifests;
* ``corpus/invalid/*.yaml``: a list of entries ``{name, base, operation (CREATE|UPDATE), patch, oldPatch,
  expect: {path, message}}``. ``patch`` and ``oldPatch`` are RFC 6902 JSON Patches applied to the base to get
  the new and (for UPDATE) the stored object; ``expect.message`` is a fragment of the rendered field error.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).parent / "corpus"


def load_base(name: str) -> dict[str, Any]:
    with (CORPUS / "bases" / f"{name}.yaml").open() as handle:
        document = yaml.safe_load(handle)
    assert isinstance(document, dict)
    return document


def base_names() -> list[str]:
    return sorted(path.stem for path in (CORPUS / "bases").glob("*.yaml"))


def _pointer(path: str) -> list[str]:
    assert path.startswith("/"), path
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(document: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def apply_patch(document: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply an RFC 6902 patch (add, replace, remove) to a copy of ``document``."""
    result = copy.deepcopy(document)
    for operation in patch:
        parts = _pointer(operation["path"])
        parent = _parent(result, parts)
        key = parts[-1]
        op = operation["op"]
        if isinstance(parent, list):
            if op == "remove":
                del parent[int(key)]
            elif op == "add":
                value = copy.deepcopy(operation["value"])
                parent.append(value) if key == "-" else parent.insert(int(key), value)
            else:
                parent[int(key)] = copy.deepcopy(operation["value"])
        elif op == "remove":
            del parent[key]
        else:
            parent[key] = copy.deepcopy(operation["value"])
    return result


@dataclass(frozen=True)
class Case:
    name: str
    base: str
    operation: str
    patch: list[dict[str, Any]]
    expect_path: str
    expect_message: str
    old_patch: list[dict[str, Any]] = field(default_factory=list)

    def documents(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Return (new object, stored object or None for CREATE)."""
        base = load_base(self.base)
        new = apply_patch(base, self.patch)
        old = apply_patch(base, self.old_patch) if self.operation == "UPDATE" else None
        return new, old


def load_invalid_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted((CORPUS / "invalid").glob("*.yaml")):
        with path.open() as handle:
            entries = yaml.safe_load(handle)
        for entry in entries:
            cases.append(
                Case(
                    name=entry["name"],
                    base=entry["base"],
                    operation=entry.get("operation", "CREATE"),
                    patch=entry.get("patch", []),
                    old_patch=entry.get("oldPatch", []),
                    expect_path=entry["expect"]["path"],
                    expect_message=entry["expect"]["message"],
                )
            )
    return cases
