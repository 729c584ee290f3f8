#!/usr/bin/env python3
"""Extract the type and field descriptions of the Kthena API reference into crdgen's data.

The API reference (the project's seed, a rendering of Kthena's Go doc comments) is the source of the
``description`` of every type and field in the generated CRDs and in docs/api.md. This script parses its
tables once and writes ``kthena_py/api/crdgen/data/descriptions.json``:
``{"types": {Type: text}, "fields": {Type: {jsonField: text}}, "values": {Type: {value: text}}}``.

    .venv/bin/python hack/extract-api-descriptions.py ../shared/seeds/000_70b6a46a3d8abcc9.txt
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "kthena_py" / "api" / "crdgen" / "data" / "descriptions.json"
_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_SKIP = ("Appears in:", "Validation:", "Underlying type:", "- Enum:", "| Field |", "|---|")


def _clean(text: str) -> str:
    text = text.strip().rstrip("|").strip()
    text = text.replace("<br />", "\n")
    return re.sub(r"[ \t]+", " ", text)


def parse(lines: list[str]) -> dict[str, dict[str, object]]:
    """Parse the reference into type, field and enum-value descriptions."""
    types: dict[str, str] = {}
    fields: dict[str, dict[str, str]] = {}
    values: dict[str, dict[str, str]] = {}
    current: str | None = None
    mode = "description"
    buffer: list[str] = []
    for index, raw in enumerate(lines):
        stripped = raw.strip()
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if _TYPE.match(stripped) and following and not following.startswith("|"):
            if current is not None and mode == "description":
                types[current] = _clean(" ".join(buffer))
            current, mode, buffer = stripped, "description", []
            continue
        if current is None:
            continue
        if stripped.startswith(("Appears in:", "| Field", "|---")):
            if mode == "description":
                types[current] = _clean(" ".join(buffer))
            mode = "table" if stripped.startswith(("| Field", "|---")) else "appears"
            continue
        if mode == "description":
            if stripped and not stripped.startswith(_SKIP):
                buffer.append(stripped)
            continue
        if mode == "table" and stripped.endswith("|"):
            cells = re.sub(r"[\s|]+$", "", stripped).split(" | ")
            head = cells[0].split(" ", 1)
            name = head[0].strip()
            text = _clean(cells[1]) if len(cells) > 1 else ""
            if len(head) == 1:  # an enum value row: "Value | description |"
                values.setdefault(current, {})[name] = text
            else:
                fields.setdefault(current, {})[name] = text
    for name in list(types):
        if name in ("API", "Packages", "Resource"):
            del types[name]
    return {"types": types, "fields": fields, "values": values}


def main() -> int:
    """Write descriptions.json from the reference given as the only argument."""
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = parse(Path(sys.argv[1]).read_text(encoding="utf-8").splitlines())
    OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {len(data['types'])} types", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
