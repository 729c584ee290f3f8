#!/usr/bin/env python3
"""Record the non-atomic list types of Kthena's generated CRDs, for the pod-list audit test.

Reads the workload CRDs of a Kthena checkout (``KTHENA_SRC=DIR``, the files under
``charts/kthena/charts/workload/crds/``) and writes ``test/unit/api/data/kthena_list_types.json``:
``{"source": ..., "lists": {CRD file: {path: {"type": "map" | "set", "keys": [...]}}}}``, where a path names
list items ``[]`` (``spec.template.roles[].entryTemplate.spec.hostAliases``). Lists that are atomic (or
untyped, which a CRD treats as atomic) are left out. Only these facts are kept, not Kthena's CRDs.

    KTHENA_SRC=~/src/kthena .venv/bin/python hack/extract-kthena-list-types.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "test" / "unit" / "api" / "data" / "kthena_list_types.json"
CRDS = Path("charts") / "kthena" / "charts" / "workload" / "crds"


def list_types(schema: Any, path: str, found: dict[str, dict[str, Any]]) -> None:
    """Add ``{path: {"type", "keys"}}`` for every non-atomic list under ``schema`` to ``found``."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "array" or "items" in schema:
        list_type = schema.get("x-kubernetes-list-type", "atomic")
        if list_type != "atomic":
            found[path] = {"type": list_type, "keys": list(schema.get("x-kubernetes-list-map-keys") or [])}
        list_types(schema.get("items"), f"{path}[]", found)
    for name, value in (schema.get("properties") or {}).items():
        list_types(value, f"{path}.{name}" if path else name, found)
    if isinstance(schema.get("additionalProperties"), dict):
        list_types(schema["additionalProperties"], f"{path}.*", found)


def render(lists: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Render the table as JSON with one list per line (small diffs when Kthena changes)."""
    files = []
    for name, found in lists.items():
        rows = ",\n".join(f"   {json.dumps(path)}: {json.dumps(entry)}" for path, entry in found.items())
        files.append(f"  {json.dumps(name)}: {{\n{rows}\n  }}")
    body = ",\n".join(files)
    return f'{{\n "source": {json.dumps(str(CRDS))},\n "lists": {{\n{body}\n }}\n}}\n'


def main() -> int:
    """Write the table; fail without ``KTHENA_SRC``."""
    source = os.environ.get("KTHENA_SRC")
    if not source:
        print("set KTHENA_SRC to a Kthena checkout", file=sys.stderr)
        return 2
    directory = Path(source) / CRDS
    lists: dict[str, dict[str, dict[str, Any]]] = {}
    for file in sorted(directory.glob("*.yaml")):
        crd = yaml.safe_load(file.read_text(encoding="utf-8"))
        found: dict[str, dict[str, Any]] = {}
        for version in crd["spec"]["versions"]:
            list_types(version["schema"]["openAPIV3Schema"], "", found)
        lists[file.name] = dict(sorted(found.items()))
    if not lists:
        print(f"no CRDs under {directory}", file=sys.stderr)
        return 1
    OUTPUT.write_text(render(lists), encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
